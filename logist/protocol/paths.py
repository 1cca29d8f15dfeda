"""The path rules of an answer's ``file_changes`` and ``evidence_files``:
pure (no disk; :mod:`logist.workspace.changes` checks the disk), used by
:mod:`logist.protocol.answer`, which re-exports them.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Optional

from ..errors import InvalidAnswer

#: Bytes (UTF-8) a path may have, and each of its names: Linux's PATH_MAX
#: and NAME_MAX. A longer one would fail in the file system call (ENAMETOOLONG).
PATH_MAX = 4096
NAME_MAX = 255


def check_relative_path(path: str) -> str:
    """Refuse a path that would leave the workspace or touch .git.

    Returns the normalised path. Symlinks are checked by the workspace, which
    sees the disk.
    """
    if not path:
        raise InvalidAnswer("invalid path ''")
    if "\x00" in path:
        raise InvalidAnswer(f"path {path!r} holds a NUL byte, which no file name can")
    try:
        size = len(path.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidAnswer(f"path {path!r} holds a lone surrogate, which no file name can") from None
    if size > PATH_MAX:
        raise InvalidAnswer(f"path {path[:40]!r}... has {size:,} bytes; a path may have at most {PATH_MAX}")
    if "\\" in path:
        raise InvalidAnswer(f"path {path!r} uses backslashes; use '/'")
    pure = PurePosixPath(path)
    parts = [p for p in pure.parts if p not in ("", ".")]
    if pure.is_absolute() or (parts and re.match(r"^[A-Za-z]:", parts[0])):
        raise InvalidAnswer(f"path {path!r} is absolute; paths are relative to the workspace")
    if not parts:
        raise InvalidAnswer(f"path {path!r} names the workspace itself, not a file")
    if ".." in parts:
        raise InvalidAnswer(f"path {path!r} leaves the workspace")
    long = next((part for part in parts if len(part.encode("utf-8")) > NAME_MAX), None)
    if long is not None:
        raise InvalidAnswer(f"path {path[:40]!r}... has a name of {len(long.encode('utf-8')):,} bytes; "
                      f"a name may have at most {NAME_MAX}")
    git_part = next((part for part in parts if is_git_name(part)), None)
    if git_part is not None:
        what = "is inside .git" if git_part == ".git" else f"is inside .git (as {git_part!r} names it)"
        raise InvalidAnswer(f"path {path!r} {what}, which Logist does not let the model touch")
    return "/".join(parts)


#: Characters HFS+ (macOS) ignores in file names, as git's own check lists them.
_IGNORED = re.compile("[\u200c-\u200f\u202a-\u202e\u206a-\u206f\ufeff]")


def is_git_name(name: str) -> bool:
    """Whether a path component names ``.git`` on some file system: any case
    (``.GIT``, ``.Git``), with trailing dots or spaces or an NTFS stream
    (``.git.``, ``.git::$INDEX_ALLOCATION``), its 8.3 short name (``GIT~1``), or
    with characters macOS ignores, such as U+200C."""
    plain = _IGNORED.sub("", name).split(":", 1)[0].rstrip(". ").casefold()
    return plain == ".git" or re.fullmatch(r"git~\d+", plain) is not None


#: A word that reads as a file's path: a name, an extension that starts with a
#: letter (``hello.py``, ``src/app.test.js``; not ``1.5`` or ``v2.0``).
_NAMED = re.compile(r"(?<![\w./:@-])(?P<path>(?:\./)?[\w][\w./-]*\.[A-Za-z][A-Za-z0-9]{0,7})(?![\w/-]|\.\w)")
#: Abbreviations that read as file names.
_NOT_PATHS = {"e.g", "i.e", "etc.", "vs."}


def named_path(*texts: str) -> Optional[str]:
    """The first workspace path the texts name (a job's objective, details,
    acceptance criteria), as an answer may write it; None if they name none."""
    for text in texts:
        for match in _NAMED.finditer(text or ""):
            word = match.group("path")
            if word.lower() in _NOT_PATHS or "//" in word:
                continue
            try:
                return check_relative_path(word)
            except InvalidAnswer:
                continue
    return None
