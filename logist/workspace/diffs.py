"""Patches of many commit pairs streamed from one ``git diff-tree --stdin``
process (:meth:`logist.workspace.repository.Workspace.iter_diffs`): a report on a job
of thousands of steps would otherwise start thousands of processes, or hold
every patch at once."""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from pathlib import Path
from typing import Iterator, NamedTuple, Optional

SHA = re.compile(r"^[0-9a-f]{40}$")
#: Bytes of one "<new> <old>" line given to git diff-tree --stdin.
_PAIR_LINE = 82


class Patch(NamedTuple):
    """One patch of :meth:`Workspace.iter_diffs`."""

    text: str
    #: Characters left out after the limit.
    cut: int = 0
    #: Why there is no patch (git cannot read a commit), or None.
    error: Optional[str] = None


class _Cut:
    """A patch read piece by piece, kept up to ``limit`` characters."""

    def __init__(self, limit: Optional[int]):
        self.limit, self.parts, self.size, self.cut = limit, [], 0, 0

    def add(self, text: str) -> None:
        room = len(text) if self.limit is None else max(0, min(len(text), self.limit - self.size))
        if room:
            self.parts.append(text[:room])
            self.size += room
        self.cut += len(text) - room

    def patch(self) -> Patch:
        return Patch("".join(self.parts), self.cut)


def stream_patches(git: list[str], cwd: Path, env: dict, stdin, count: int, limit: Optional[int]) -> Iterator[Patch]:
    """Run ``git`` (a ``diff-tree --stdin`` command line) in ``cwd`` on the
    ``count`` fixed-width pair lines of the file ``stdin``, and yield one
    :class:`Patch` per pair, in order; restarted after a pair git stops at."""

    def new_of(index: int) -> bytes:  # pread: git shares the file's offset
        return os.pread(stdin.fileno(), 40, index * _PAIR_LINE)

    with stdin, tempfile.TemporaryFile() as errors:
        done = 0  # pairs answered
        while done < count:
            stdin.seek(done * _PAIR_LINE)
            errors.seek(0)
            errors.truncate()
            proc = subprocess.Popen(git, cwd=cwd, env=env, stdin=stdin, stdout=subprocess.PIPE, stderr=errors)
            try:
                current: Optional[_Cut] = None
                at_start = True
                for piece in iter(lambda: proc.stdout.readline(1 << 16), b""):
                    header = at_start and len(piece) == 41 and SHA.match(piece[:40].decode("ascii", "replace"))
                    at_start = piece.endswith(b"\n")
                    if header:
                        found = next((i for i in range(done, count) if new_of(i) == piece[:40]), None)
                        if found is not None:
                            if current is not None:
                                yield current.patch()
                            for skipped in range(done, found):  # git skips a commit it cannot read
                                yield Patch("", error=f"git cannot read commit {new_of(skipped).decode()}")
                            current, done = _Cut(limit), found + 1
                            continue
                    if current is not None:
                        current.add(piece.decode("utf-8", errors="replace"))
                if current is not None:
                    yield current.patch()
                code = proc.wait()
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
                proc.stdout.close()
            if done < count and code == 0:  # git skipped the last pairs
                for skipped in range(done, count):
                    yield Patch("", error=f"git cannot read commit {new_of(skipped).decode()}")
                done = count
            elif done < count:  # git stopped at pair `done`: say why, go on after it
                errors.seek(0)
                why = " ".join(errors.read(500).decode("utf-8", "replace").split()) or f"git diff-tree exit {code}"
                yield Patch("", error=why)
                done += 1
