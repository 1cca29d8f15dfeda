"""body_digest is the digest of the whole body (the key of a call, logist.store.calls), the same
digest recorded keys were made with."""

from __future__ import annotations

import hashlib
import json

from logist.store.calls import body_digest


def reference(body: dict) -> str:
    digest = hashlib.sha256()
    for message in body["messages"]:
        for part in (message["role"], message["content"]):
            data = part.encode("utf-8")
            digest.update(b"%d:" % len(data) + data)
    rest = {k: v for k, v in body.items() if k != "messages"}
    digest.update(json.dumps(rest, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode())
    return digest.hexdigest()


def test_the_digest_is_of_the_roles_and_texts_then_the_other_keys():
    messages = [{"role": "system", "content": "be brief " * 50}, {"role": "user", "content": "hi"}]
    for body in ({"model": "m", "messages": list(messages)},
                 {"model": "m", "messages": messages + [{"role": "assistant", "content": "hello"}], "stream": True},
                 {"messages": []}, {"messages": [{"role": "user", "content": "caf\u00e9 \u2603"}], "n": 1}):
        assert body_digest(body) == reference(body)
    assert body_digest({"messages": messages[:1]}) != body_digest({"messages": messages})


def test_messages_of_another_shape_are_hashed_as_canonical_json():
    for messages in ([{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
                     [{"role": "assistant", "content": None, "tool_calls": []}], [{"role": "user"}], "not a list"):
        body = {"model": "m", "messages": messages}
        expected = hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode())
        assert body_digest(body) == expected.hexdigest()
