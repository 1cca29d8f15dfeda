"""The one way Logist writes a whole file: temp file, fsync, rename, fsync dir.

A reader (or a crash) therefore only ever sees the old bytes or the new bytes,
never a mix, and once :func:`atomic_write` returns the new bytes survive a
power loss. The history's in-place append is the only write that does not go
through here; it has its own journal (see :mod:`logist.store.history`).

``durable=False`` keeps the temp file and the rename (a reader or a killed
process still sees the old bytes or the new) and leaves out the two fsyncs:
for a file that another, durable one restores after a power loss (the
manifest once its entry is in the history: the entry carries the state
after it, and recovery brings a manifest behind the history, or one a disk
left unreadable, up to it). Every other file is written durably.
"""

from __future__ import annotations

import json
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO, Iterable, Iterator

from ..secrets.redact import redact_data


def fsync_dir(directory: Path) -> None:
    """Make a rename or create inside ``directory`` durable."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


_UMASK: list[int] = []


def _mode_for(path: Path) -> int:
    try:
        return os.stat(path).st_mode & 0o777
    except FileNotFoundError:
        if not _UMASK:  # read once: os.umask can only be read by setting it
            _UMASK.append(os.umask(0o022))
            os.umask(_UMASK[0])
        return 0o666 & ~_UMASK[0]


@contextmanager
def naming(path: Path) -> Iterator[None]:
    """An OSError raised in the block names ``path`` when it names no file
    (a ``write`` or ``fsync`` that fails for a full disk says only "No space
    left on device"), so the command's one line can say where."""
    try:
        yield
    except OSError as exc:
        if exc.filename is None:
            exc.filename = str(path)
        raise


@contextmanager
def atomic_writer(path: Path, durable: bool = True) -> Iterator[BinaryIO]:
    """A binary file that replaces ``path`` atomically and durably when the
    block ends (and is removed if it raises): for a file written piece by
    piece, so it never has to be held whole in memory (``durable``: see the
    module's doc)."""
    path = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=_temp_prefix(path), suffix=".tmp", dir=path.parent)
    except FileNotFoundError:  # its folder is made on the first write only (a check each write cost two calls)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=_temp_prefix(path), suffix=".tmp", dir=path.parent)
    try:
        # mkstemp makes 0600 files; keep the mode a normal write would give.
        os.fchmod(fd, _mode_for(path))
        with naming(path), os.fdopen(fd, "wb") as handle:
            yield handle
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    if durable:
        fsync_dir(path.parent)


def _temp_prefix(path: Path) -> str:
    return f".{path.name}."


def leftover_temps(directory: Path, names: Iterable[str]) -> list[Path]:
    """The temp files :func:`atomic_writer` left in ``directory`` for the
    files ``names`` (a write killed before its rename; a live one's too, so
    call it holding the lock those files are written under)."""
    prefixes = [f".{os.path.basename(name)}." for name in names]  # _temp_prefix's, without a Path each

    def temp_of_one(name: str) -> bool:  # <prefix>*.tmp
        return name.endswith(".tmp") and any(name.startswith(p) and len(name) >= len(p) + 4 for p in prefixes)

    try:
        # One listing of the folder for all the names (a glob each listed it once per name).
        with os.scandir(directory) as listing:
            return sorted(Path(entry.path) for entry in listing
                          if temp_of_one(entry.name) and entry.is_file(follow_symlinks=False))
    except FileNotFoundError:
        return []


def atomic_write(path: Path, data: bytes | str, durable: bool = True) -> None:
    """Replace ``path`` with ``data`` atomically and durably (``durable``: see the module's doc)."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    with atomic_writer(path, durable) as handle:
        handle.write(data)


#: The separators of a file written ``compact`` (:func:`dump_json`).
COMPACT = (",", ":")


def compact_json(value: Any) -> bytes:
    """``value`` as compact JSON in UTF-8, keys in their order, text not
    escaped to ASCII: the bytes the openai SDK sends a request body as (its
    ``openapi_dumps``; a test holds the two equal), so the bytes a recorded
    request was sent as, and a ``response_format``'s file
    (:mod:`logist.store.response_formats`)."""
    return json.dumps(value, ensure_ascii=False, separators=COMPACT, allow_nan=False).encode("utf-8")


def dump_json(data: Any, compact: bool = False) -> str:
    """Logist's on-disk JSON style: indented, UTF-8, trailing newline.

    Key order is the order of the pydantic model's fields, which is stable.
    No known secret value is written (:func:`logist.secrets.redact.redact_data`).
    ``compact``: on one line, without spaces, for a file only Logist reads
    (the step journal, written up to three times a step and removed at its
    end): json's C encoder writes that, while an indented file goes through
    its pure-Python one, several times slower.
    """
    layout = {"separators": COMPACT} if compact else {"indent": 2}
    return json.dumps(redact_data(data), ensure_ascii=False, **layout) + "\n"


def atomic_write_json(path: Path, data: Any, durable: bool = True, compact: bool = False) -> None:
    """Replace ``path`` with ``data`` as JSON (:func:`dump_json`), as :func:`atomic_write` does."""
    atomic_write(path, dump_json(data, compact), durable)


def move_aside(path: Path, stamp: str) -> Path:
    """Rename a corrupt file out of the way, keeping every byte of it."""
    target = path.with_name(f"{path.name}.corrupt-{stamp}")
    n = 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}.corrupt-{stamp}-{n}")
    os.replace(path, target)
    fsync_dir(path.parent)
    return target
