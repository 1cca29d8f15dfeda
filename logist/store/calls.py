"""Paid calls: the key that names each one, and its answer as it arrived.

A call is paid for once, so it is recorded once. Before a step sends its
request, the step journal (:mod:`logist.store.journal`) records that the
call is being made, with its key and its request; as soon as the answer
arrives, the journal holds it (:class:`SavedAnswer`, fsynced) before
anything is applied. A process that ends after that point is finished by the
next command from the saved answer, never by calling again; one that ends
while the call is in flight leaves a call of unknown outcome, which is
recorded as such.

The key, :func:`call_key`, is ``<job>@<created>:<step>:<digest>``: the job
(its id and when it was created, so a job made again under the same id has
other keys),
the step number (the history entry the call is made for) and the SHA-256 of
the request body's bytes as sent (:func:`sent_digest`: the body encoded
once, as compact JSON, and those bytes sent). It goes out as the
``Idempotency-Key`` header, the same on every retry of the call, so an
endpoint or gateway that honours it never charges twice; a call made again
after one of unknown outcome, with the same body, is sent with that call's
key.

A history entry leaves its key out where its rebuilt body gives it
(:func:`recorded_key`). Format 4 and before took the digest over the
messages' roles and texts, framed (:func:`body_digest`, still the replay
server's canonical digest); their entries, upgraded, say so
(``key_format``: 4), and a call of unknown outcome they record is made
again with its own key whichever rule made it (:func:`same_body`).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import operator
from typing import Optional

from .atomic import compact_json
from .model import StoreModel
from .entries import AgentRunRecord
from .manifest import KEEP_UNKNOWN

#: The HTTP header the key is sent in.
HEADER = "Idempotency-Key"


def sent_digest(data: bytes) -> str:
    """The digest a call's key names: the SHA-256, in hex, of the body's
    bytes as sent (:func:`logist.store.atomic.compact_json` of the body:
    the SDK is handed those bytes)."""
    return hashlib.sha256(data).hexdigest()


def body_digest(body: dict) -> str:
    """Format 4's key digest, and the replay server's canonical digest of a
    request (:func:`logist.replay.matching.digest`: the same for a body
    whatever the order of its keys). The SHA-256, in hex, of a request body: its messages' roles and texts
    as UTF-8 (each length-prefixed, ``<bytes>:``, so no two bodies run
    together), then the other keys as canonical JSON (sorted keys, no
    spaces). At round 1,000 of a turn the body holds some 4,000 roles and
    texts: they are encoded, measured and framed with C-level maps and one
    bytes formatting per :data:`_FRAMED` of them (a loop in Python over
    them cost twice as much), the same bytes hashed as framing them one by one."""
    parts = role_content(body.get("messages"))
    digest = hashlib.sha256()
    if parts is not None:
        texts = list(itertools.chain.from_iterable(parts))
        for start in range(0, len(texts), _FRAMED):
            encoded = list(map(str.encode, texts[start:start + _FRAMED], _UTF8, _SURROGATEPASS))
            digest.update((b"%d:%s" * len(encoded)) % tuple(itertools.chain.from_iterable(zip(map(len, encoded), encoded))))
        rest = {key: value for key, value in body.items() if key != "messages"}
    else:  # messages of another shape (tool calls, parts): the whole body as canonical JSON
        rest = body
    digest.update(json.dumps(rest, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))
    return digest.hexdigest()


#: Roles and texts framed and hashed at a time (what is held at once besides the body: their bytes, twice).
_FRAMED = 1024
_UTF8 = itertools.repeat("utf-8")
_SURROGATEPASS = itertools.repeat("surrogatepass")

_ROLE_CONTENT = operator.itemgetter("role", "content")


def role_content(messages) -> Optional[list]:
    """Each message's (role, content) when every message is exactly a role
    and a text (checked with C-level maps: at round 1,000 of a turn a loop in
    Python over the messages cost more than hashing the new ones), else None."""
    if not isinstance(messages, list) or not all(map(isinstance, messages, itertools.repeat(dict))) \
            or not set(map(len, messages)) <= {2}:
        return None
    try:
        parts = list(map(_ROLE_CONTENT, messages))
    except KeyError:
        return None
    return parts if all(map(isinstance, itertools.chain.from_iterable(parts), itertools.repeat(str))) else None


def call_key_prefix(job_id: str, created_at: str, sequence: int) -> str:
    """A key up to its digest."""
    return f"{job_id}@{created_at}:{sequence}:"


def sent_key(job_id: str, created_at: str, sequence: int, data: bytes) -> str:
    """The key of the call step ``sequence`` of the job makes with the body sent as ``data``."""
    return call_key_prefix(job_id, created_at, sequence) + sent_digest(data)


def call_key(job_id: str, created_at: str, sequence: int, body: dict) -> str:
    """The key of the call step ``sequence`` of the job makes with ``body``."""
    return sent_key(job_id, created_at, sequence, compact_json(body))


#: ``key_format`` of an entry whose key format 4's rule derives (:func:`body_digest`).
FORMAT_4_KEYS = 4


def recorded_key(job_id: str, created_at: str, entry: dict, body: dict) -> str:
    """The key call entry ``entry`` (as the file holds it) was sent with:
    the one its request metadata names, which it does only when the call
    reused an earlier call's key, else the key its own step and ``body``
    (its rebuilt request body, :func:`logist.store.requests.recorded_body`)
    give, by the rule of the format it was written in (``key_format``).
    Leaving the derivable key out saves about 110 bytes an entry."""
    metadata = (entry.get("request") or {}).get("metadata") or {}
    named = metadata.get("idempotency_key")
    if named:
        return named
    if metadata.get("key_format") == FORMAT_4_KEYS:
        return call_key_prefix(job_id, created_at, entry["sequence"]) + body_digest(body)
    return call_key(job_id, created_at, entry["sequence"], body)


def same_body(key: Optional[str], natural: str, body: dict) -> bool:
    """Whether ``key`` (a call's, of unknown outcome) names ``body``, whose
    key by the current rule is ``natural``: its digest is that key's, or
    format 4's digest of the body for a call recorded before (the call made
    again keeps its key across the upgrade)."""
    named = key_digest(key)
    return named is not None and (named == key_digest(natural) or named == body_digest(body))


def key_digest(key: Optional[str]) -> Optional[str]:
    """The body digest a key names (None: not a key of this form)."""
    parts = (key or "").rsplit(":", 2)
    return parts[2] if len(parts) == 3 else None


class SavedAnswer(StoreModel):
    """A call's outcome as it arrived, before anything was made of it."""

    model_config = KEEP_UNKNOWN
    raw: Optional[str] = None
    """The answer's text (None when the call failed)."""
    error: Optional[str] = None
    """Why the call failed, when it did."""
    prompt_tokens: Optional[int] = None
    """Prompt tokens (reported, or estimated: see ``estimated``)."""
    completion_tokens: Optional[int] = None
    """Completion tokens."""
    estimated: bool = False
    """The endpoint reported no usage; the tokens are estimates."""
    duration_ms: int = 0
    """How long the call took, in milliseconds."""
    note: Optional[str] = None
    """What the entry says besides (an answer sent as a tool call)."""
    agent: Optional[AgentRunRecord] = None
    """The run of a coding agent that gave the answer (its calls, its work as a patch)."""
