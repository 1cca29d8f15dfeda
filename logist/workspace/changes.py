"""The model's file changes, checked against the disk and written.

Paths are checked twice: for shape by :mod:`logist.protocol.answer` (no absolute
paths, no ``..``, no ``.git`` in any spelling) and here against the disk (no
symlink on the way, nothing resolving outside the workspace). A set of
changes is checked whole before the first byte is written, so a refused
answer changes nothing. A file is written as a new file renamed over the
old one, so a hard link a command made to a file outside the workspace is
replaced, never written through.
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path
from typing import Optional, Sequence

from ..errors import InvalidAnswer
from ..protocol.file_changes import DeleteFile, FileChange, ReplaceInFile, WriteFile
from ..protocol.paths import check_relative_path


def write_as_new_file(target: Path, data: bytes) -> None:
    """Write ``target`` as a new file: a temp file in its folder renamed over
    it. A hard link at ``target`` (a command can make one to any file of
    yours) is replaced, never written through; the permission bits stay."""
    try:
        mode: Optional[int] = stat.S_IMODE(os.lstat(target).st_mode)
    except FileNotFoundError:
        mode = None
    tmp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.logist.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the umask applies, as to a plain write
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def resolve_inside(root: Path, rel: str) -> Path:
    """The absolute path for ``rel``, refusing symlinks on the way."""
    rel = check_relative_path(rel)
    current = root
    for part in rel.split("/"):
        current = current / part
        if current.is_symlink():
            raise InvalidAnswer(f"path {rel!r} goes through a symlink ({current.relative_to(root)}), which Logist refuses")
    resolved = current.resolve()
    if resolved != root and root not in resolved.parents:
        raise InvalidAnswer(f"path {rel!r} resolves outside the workspace")
    return current


def plan(root: Path, changes: Sequence[FileChange]) -> list[tuple[Path, Optional[bytes], str]]:
    """:meth:`Workspace.plan_changes` for the resolved ``root``."""
    contents: dict[str, Optional[str]] = {}
    targets: dict[str, Path] = {}
    order: list[str] = []

    def current(rel: str, target: Path) -> Optional[str]:
        if rel in contents:
            return contents[rel]
        if target.is_file():
            try:
                return target.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                raise InvalidAnswer(f"{rel}: is not UTF-8 text; it cannot be edited by replacement") from None
        if target.exists():
            raise InvalidAnswer(f"{rel}: is a directory, not a file")
        return None

    def check_parents(index: int, rel: str) -> None:
        """Every parent must be (or become) a directory, not a file."""
        parts = rel.split("/")
        for depth in range(1, len(parts)):
            parent = "/".join(parts[:depth])
            will_be_file = contents.get(parent) is not None if parent in contents else (root / parent).is_file()
            if will_be_file:
                raise InvalidAnswer(f"file_changes/{index}: cannot write {rel}: {parent} is a file, not a directory")
            if parent not in contents and (root / parent).exists() and not (root / parent).is_dir():
                raise InvalidAnswer(f"file_changes/{index}: cannot write {rel}: {parent} is not a directory "
                                    "(a pipe or a socket a command made)")
        prefix = rel + "/"
        if any(other.startswith(prefix) and data is not None for other, data in contents.items()):
            raise InvalidAnswer(f"file_changes/{index}: cannot write {rel}: an earlier change puts files inside it")

    def plan_one(index: int, change: FileChange, rel: str) -> Path:
        target = resolve_inside(root, rel)
        if target.is_dir():
            raise InvalidAnswer(f"file_changes/{index}: {rel} is a directory, not a file")
        if isinstance(change, WriteFile):
            check_parents(index, rel)
            contents[rel] = change.content
        elif isinstance(change, DeleteFile):
            if current(rel, target) is None:
                raise InvalidAnswer(f"file_changes/{index}: cannot delete {rel}: no such file")
            contents[rel] = None
        elif isinstance(change, ReplaceInFile):
            text = current(rel, target)
            if text is None:
                raise InvalidAnswer(f"file_changes/{index}: cannot edit {rel}: no such file")
            count = text.count(change.old)
            if count != 1:
                what = "does not occur" if count == 0 else f"occurs {count} times"
                raise InvalidAnswer(
                    f"file_changes/{index}: in {rel} the 'old' text {what}; it must occur exactly once"
                )
            contents[rel] = text.replace(change.old, change.new, 1)
        return target

    for index, change in enumerate(changes):
        rel = check_relative_path(change.path)
        try:
            target = plan_one(index, change, rel)
        except OSError as exc:  # the disk's word on a path the rules let through (too long with the root, unreadable)
            raise InvalidAnswer(f"file_changes/{index}: {rel}: {exc.strerror or exc}") from None
        targets[rel] = target
        if rel not in order:
            order.append(rel)
    return [
        (targets[rel], None if contents[rel] is None else contents[rel].encode("utf-8"), rel) for rel in order
    ]
