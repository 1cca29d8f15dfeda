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


def framed_one_by_one(body: dict) -> str:
    """body_digest as it was written before its parts were framed with C-level maps: a loop in
    Python, two updates and an encode per role and per text (the keys of existing histories)."""
    messages = body.get("messages")
    digest = hashlib.sha256()
    plain = isinstance(messages, list) and all(
        isinstance(m, dict) and set(m) == {"role", "content"} and isinstance(m["role"], str)
        and isinstance(m["content"], str) for m in messages)
    if plain:
        for message in messages:
            for part in (message["role"], message["content"]):
                data = part.encode("utf-8", "surrogatepass")
                digest.update(b"%d:" % len(data))
                digest.update(data)
        rest = {key: value for key, value in body.items() if key != "messages"}
    else:
        rest = body
    digest.update(json.dumps(rest, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))
    return digest.hexdigest()


class Text(str):
    """A text that is a subclass of str (hashed as its characters)."""


def test_the_digest_is_the_one_framed_part_by_part_over_varied_bodies():
    texts = ["", "a", "caf\u00e9", "\u2603 snow", "\U0001f600 face", "lone \ud800 surrogate", "\udfff", "1:2:3",
             "\x00nul", "line\nbreak \"quoted\" \\", "x" * 5000, "\u00e9" * 700]
    roles = ["system", "user", "assistant", "", "r\u00f4le"]
    many = [{"role": roles[i % len(roles)], "content": texts[i % len(texts)] * (i % 3)} for i in range(2600)]
    bodies = [
        {"messages": []},
        {"model": "m", "messages": [{"role": "user", "content": t} for t in texts]},
        {"model": "m", "messages": many, "temperature": 0.2, "max_tokens": 100, "stream": True,
         "stream_options": {"include_usage": True}, "response_format": {"type": "json_schema", "json_schema": {
             "name": "n\u00e9", "schema": {"b": [1, 2.5, None, True], "a": "\u2603"}}}},
        {"model": "m", "messages": many[:1024]}, {"model": "m", "messages": many[:1025]},
        {"model": "m", "messages": [{"role": Text("user"), "content": Text("sub \u00e9")}]},
        {"model": "m", "messages": [{"content": "keys in another order", "role": "user"}]},
        # other shapes: the whole body as canonical JSON
        {"model": "m", "messages": [{"role": "user", "content": "hi"}, {"role": "user", "content": None}]},
        {"model": "m", "messages": [{"role": "user", "content": "hi", "name": "x"}]},
        {"model": "m", "messages": [{"role": 1, "content": "hi"}]},
        {"model": "m", "messages": ["not a dict"]}, {"model": "m"}, {},
    ]
    for body in bodies:
        assert body_digest(body) == framed_one_by_one(body), body.get("messages", [])[:2]
    # Pinned: the digest of one body as recorded keys hold it, whatever the references above say.
    pinned = {"model": "m", "messages": [{"role": "system", "content": ""},
                                         {"role": "user", "content": "caf\u00e9 \ud800 \U0001f600"}],
              "temperature": 0.5, "response_format": {"type": "json_object"}}
    assert body_digest(pinned) == "f66bf2338de3fa06a69e28bdf007484b998fe13068ecb631ffac4e3ee48931e1"
    # Framing tells apart bodies whose texts run together the same.
    assert body_digest({"messages": [{"role": "u", "content": "ab"}]}) != \
        body_digest({"messages": [{"role": "ua", "content": "b"}]})
