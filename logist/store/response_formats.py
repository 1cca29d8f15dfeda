"""The ``response_format`` values a job's calls sent, each kept once.

A decoding schema (:mod:`logist.protocol.decoding`) is several KB, and a
long turn sends the same one on every call: written into every history
entry it made a 1,000-round turn's history 13.6 times the bytes of the
conversation, 83% of each entry. So the history keeps each distinct value
once, in the job's ``response_formats/`` folder, named by its digest::

    response_formats/<digest>.json      the value as sent, compact JSON on one line
                                        (indented, a Worker's schema is 2.6 times longer)

and the entry's ``request.metadata.response_format`` says which, in two
keys a person can read at a glance::

    {"type": "json_schema", "file": "response_formats/<digest>.json"}

The entry still names everything it sent and points at no other entry;
like its ``workspace_commit``, it points at content the job directory
keeps and never changes (a file is written before the entry that names it,
and never rewritten or deleted). The digest is the first 32 hex digits (128
bits) of the SHA-256 of the value's compact JSON (keys in the order sent):
the file is checked against it when it is read, and a request is matched
with a recording by the digest alone (:func:`digest_of`), which needs no
file. (The full 64 digits, written twice in every entry, were 8% of a long
turn's history.)

A value written into an entry whole (a history of an older Logist, a
fixture written by hand) is read as it is.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, Optional

from ..errors import CorruptFileError
from ..secrets.redact import redact_data
from .atomic import atomic_write, compact_json

FOLDER = "response_formats"
#: Hex digits of the SHA-256 a file is named by.
DIGITS = 32
_FILE = re.compile(rf"{FOLDER}/([0-9a-f]{{{DIGITS}}})\.json")


def digest(value: dict) -> str:
    """The first :data:`DIGITS` hex digits of the SHA-256 of ``value``'s compact JSON, keys in their order."""
    return hashlib.sha256(compact_json(value)).hexdigest()[:DIGITS]


def is_reference(value: Any) -> bool:
    """True for a ``response_format`` recorded as a reference to its file."""
    return (isinstance(value, dict) and set(value) == {"type", "file"} and isinstance(value["file"], str)
            and _FILE.fullmatch(value["file"]) is not None)


def digest_of(value: Optional[dict]) -> Optional[str]:
    """The digest of a ``response_format``, whether recorded whole or by reference (None for none)."""
    if value is None:
        return None
    return _FILE.fullmatch(value["file"]).group(1) if is_reference(value) else digest(value)


def keep(files: "JobFiles", value: Optional[dict], made: Optional[list] = None) -> Optional[dict]:
    """Write ``value`` to its file in the job's folder (once; a file already
    there with the digest is the same value) and return the reference an
    entry records. No known secret value is written
    (:func:`logist.secrets.redact.redact_data`). None and a reference are
    returned as they are. ``made``: the paths this call created (the file,
    and the folder when it is new too) are added to it."""
    if value is None or is_reference(value):
        return value
    value = redact_data(value)
    compact = compact_json(value)
    name = f"{FOLDER}/{hashlib.sha256(compact).hexdigest()[:DIGITS]}.json"
    path = files.path_of(name)
    if not path.is_file():
        if not path.parent.exists():
            path.parent.mkdir(exist_ok=True)
            if made is not None:
                made.append(path.parent)
        atomic_write(path, compact + b"\n")
        if made is not None:
            made.insert(0, path)
    return {"type": value.get("type"), "file": name}


def kept_in(files: "JobFiles", entry: dict) -> dict:
    """``entry`` (:meth:`~logist.store.entries.HistoryEntry.dump`) with its
    request's ``response_format`` kept in its file (:func:`keep`); the
    entry is copied where it changes, never changed."""
    request = entry.get("request")
    metadata = (request or {}).get("metadata")
    if not metadata or metadata.get("response_format") is None or is_reference(metadata["response_format"]):
        return entry
    metadata = {**metadata, "response_format": keep(files, metadata["response_format"])}
    return {**entry, "request": {**request, "metadata": metadata}}


def sent(files: "JobFiles", value: Optional[dict]) -> Optional[dict]:
    """The ``response_format`` a call sent: a reference read from its file
    (checked against its digest), anything else as it is."""
    if not is_reference(value):
        return value
    path = files.path_of(value["file"])
    try:
        data = json.loads(path.read_bytes())
    except FileNotFoundError:
        raise CorruptFileError(f"{path} is missing: the history names it as a request's response_format "
                               "(copy a job's folder whole, response_formats/ with it)") from None
    except (OSError, ValueError) as exc:
        raise CorruptFileError(f"{path} is not readable JSON: {exc}") from None
    if not isinstance(data, dict) or digest(data) != digest_of(value):
        raise CorruptFileError(f"{path} does not hold what the history recorded (its SHA-256 differs)")
    return data
