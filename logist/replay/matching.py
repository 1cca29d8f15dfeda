"""Which recorded call a request is: the canonical request of a body and
of a recorded call (model, messages, :data:`PARAMETERS`, the workspace path
as ``<workspace>``, the response_format as its digest, which a recording
keeps without the file it is stored in: :mod:`logist.store.response_formats`),
its digest (found without building the canonical request where the
messages are plain roles and texts, as Logist sends them: the server's cost
of a request at round 1,000 of a turn), and how far a request agrees with a
recording and where it first differs (what a refused request is told).
:class:`logist.replay.server.ReplayLLMServer` answers with it.
"""

from __future__ import annotations

import json
import operator
from typing import Optional

from ..store.calls import body_digest, role_content
from ..store.history import HistoryEntry
from ..store.requests import messages_of
from ..store.response_formats import digest_of

#: The request parameters a recording keeps (history ``request.metadata``),
#: compared besides the model and the messages.
PARAMETERS = ("temperature", "max_tokens", "response_format")
#: What the workspace path becomes in a canonical request.
WORKSPACE = "<workspace>"
_EXCERPT = 30


def _content(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return json.dumps(content, ensure_ascii=False)  # content parts, or absent


def canonical_request(body: dict, workspaces: tuple[str, ...] = ()) -> dict:
    """The part of a request body a recording can be matched on: model,
    messages (role and text) and :data:`PARAMETERS`, with each of the exact
    ``workspaces`` paths replaced by ``<workspace>``."""
    paths = sorted({w for w in workspaces if w}, key=len, reverse=True)

    def text(message: dict) -> str:
        value = _content(message)
        for path in paths:
            value = value.replace(path, WORKSPACE)
        return value

    request = {
        "model": body.get("model"),
        "messages": [{"role": m.get("role"), "content": text(m)} for m in body.get("messages") or []],
    }
    request.update({key: body.get(key) for key in PARAMETERS})
    request["response_format"] = digest_of(request["response_format"])
    return request


def recorded_body(entry: HistoryEntry, entries: Optional[dict[int, dict]] = None) -> dict:
    """The request body of a recorded call, as far as the history keeps it
    (``entries``: the history's entries by number, which a request that
    continues another is rebuilt from)."""
    entries = entries if entries is not None else {entry.sequence: entry.dump()}
    metadata = entry.request.metadata
    body: dict = {"model": metadata.model, "messages": messages_of(entries, entry.sequence)}
    body.update({key: getattr(metadata, key) for key in PARAMETERS})
    return body


def shaped_by(entry: HistoryEntry, key: str) -> str:
    """Where the recorded value of parameter ``key`` came from, in words
    (for a mismatch: the recording's side of it), or "" when the history
    does not say."""
    metadata = entry.request.metadata if entry.request is not None else None
    if metadata is None:
        return ""
    if key == "max_tokens" and metadata.context_window:
        return (f"sized for a context window of {metadata.context_window:,} tokens from "
                f"{metadata.context_window_from or 'the recording machine'}")
    if key == "response_format":
        if metadata.structured_output:
            return f"structured_output {metadata.structured_output} from config.json model_settings"
        return "structured_output from the role, else auto"
    if key == "max_tokens":
        return "sized with no context window from the recording machine's config.json or endpoint"
    return ""


def digest(request: dict) -> str:
    """The digest of canonical request ``request`` (:func:`canonical_request`):
    the digest a call's key is made with (:func:`logist.store.calls.body_digest`)."""
    return body_digest(request)


_CONTENT = operator.itemgetter(1)


def request_digest(body: dict, workspaces: tuple[str, ...] = ()) -> str:
    """``digest(canonical_request(body, workspaces))``. Where every message is
    exactly a role and a text and none holds a workspace path, the canonical
    messages are the body's own: they are hashed as they are (C-level maps
    over them), not rebuilt one by one in Python."""
    messages = body.get("messages")
    parts = role_content(messages)
    paths = [w for w in workspaces if w]
    if parts is None or (paths and names_any(parts, paths)):
        return digest(canonical_request(body, workspaces))
    request = {"model": body.get("model"), "messages": messages}
    request.update({key: body.get(key) for key in PARAMETERS})
    request["response_format"] = digest_of(request["response_format"])
    return digest(request)


def names_any(parts: list, paths: list[str]) -> bool:
    """Whether any of the texts of ``parts`` ((role, text) pairs) holds any of ``paths`` (one search of the texts joined:
    a path holds no NUL)."""
    texts = "\0".join(map(_CONTENT, parts))
    return any(path in texts for path in paths)


def _excerpt(text: str, at: int) -> str:
    start = max(0, at - 10)
    piece = text[start : at + _EXCERPT]
    quoted = json.dumps(piece, ensure_ascii=False)
    return ("..." if start else "") + quoted + ("..." if at + _EXCERPT < len(text) else "")


def _common_prefix(a: str, b: str) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def agreement(recorded: dict, received: dict) -> tuple[int, int, bool, bool]:
    """How far two canonical requests agree: leading messages equal, then
    characters of the next message, then the model, then the parameters.
    The larger, the nearer."""
    same = 0
    for a, b in zip(recorded["messages"], received["messages"]):
        if a != b:
            break
        same += 1
    prefix = 0
    if same < min(len(recorded["messages"]), len(received["messages"])):
        a, b = recorded["messages"][same], received["messages"][same]
        prefix = _common_prefix(a["content"], b["content"]) if a["role"] == b["role"] else 0
    parameters = all(recorded[key] == received[key] for key in PARAMETERS)
    return same, prefix, recorded["model"] == received["model"], parameters


def first_difference(recorded: dict, received: dict, entry: Optional[HistoryEntry] = None) -> Optional[str]:
    """Where canonical request ``received`` first differs from ``recorded``,
    in words; None if they are the same. ``entry``: the recorded call, whose
    metadata says where a differing parameter's value came from."""
    if recorded["model"] != received["model"]:
        return f"the model is {json.dumps(received['model'])}, the recording used {json.dumps(recorded['model'])}"
    for index, (rec, got) in enumerate(zip(recorded["messages"], received["messages"])):
        if rec["role"] != got["role"]:
            return f"message {index} has role {json.dumps(got['role'])}, the recording {json.dumps(rec['role'])}"
        a, b = rec["content"], got["content"]
        if a != b:
            at = _common_prefix(a, b)
            return (
                f"message {index} ({rec['role']}) differs at character {at}: "
                f"recorded {_excerpt(a, at)}, received {_excerpt(b, at)}"
            )
    if len(recorded["messages"]) != len(received["messages"]):
        return f"the request has {len(received['messages'])} messages, the recording {len(recorded['messages'])}"
    for key in PARAMETERS:
        if recorded[key] != received[key]:
            where = shaped_by(entry, key) if entry is not None else ""
            return (f"{key} is {json.dumps(received[key])}, the recording used {json.dumps(recorded[key])}"
                    + (f" ({where})" if where else ""))
    return None
