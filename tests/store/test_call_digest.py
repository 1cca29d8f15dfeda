"""body_digest hashes only the messages a conversation added since the last
body it digested, and gives the digest of the whole body whatever came before."""

from __future__ import annotations

import hashlib
import json

from logist.store import calls
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


def test_a_growing_conversation_is_hashed_from_where_the_last_one_ended():
    messages = [{"role": "system", "content": "be brief " * 50}, {"role": "user", "content": "hi"}]
    first = {"model": "m", "messages": list(messages)}
    assert body_digest(first) == reference(first)
    assert calls._LAST_MESSAGES[0] == [(m["role"], m["content"]) for m in messages]
    messages += [{"role": "assistant", "content": "hello"}, {"role": "user", "content": "more"}]
    second = {"model": "m", "messages": list(messages), "stream": True}
    state = calls._LAST_MESSAGES[1]
    assert body_digest(second) == reference(second)
    assert calls._LAST_MESSAGES[1] is not state and len(calls._LAST_MESSAGES[0]) == 4


def test_a_changed_message_a_shorter_or_another_conversation_is_hashed_afresh():
    messages = [{"role": "system", "content": "rules"}, {"role": "user", "content": "one"}, {"role": "user", "content": "two"}]
    assert body_digest({"messages": messages}) == reference({"messages": messages})
    changed = [dict(m) for m in messages]
    changed[1]["content"] = "".join(["o", "n", "e!"])  # another object, another text
    assert body_digest({"messages": changed}) == reference({"messages": changed})
    same_text = [dict(m) for m in changed]
    same_text[1]["content"] = "".join(["o", "n", "e!"])  # equal text, another object (a conversation rebuilt
    same_text.append({"role": "assistant", "content": "ok"})  # from the history): only the new message is hashed
    state = calls._LAST_MESSAGES[1]
    assert body_digest({"messages": same_text}) == reference({"messages": same_text})
    assert calls._LAST_MESSAGES[1] is not state and len(calls._LAST_MESSAGES[0]) == 4
    assert body_digest({"messages": messages[:1]}) == reference({"messages": messages[:1]})
    assert body_digest({"messages": []}) == reference({"messages": []})
    other = [{"role": "user", "content": "elsewhere"}]
    assert body_digest({"messages": other, "n": 1}) == reference({"messages": other, "n": 1})


def test_messages_of_another_shape_are_hashed_as_canonical_json():
    for messages in ([{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
                     [{"role": "assistant", "content": None, "tool_calls": []}], [{"role": "user"}], "not a list"):
        body = {"model": "m", "messages": messages}
        expected = hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode())
        assert body_digest(body) == expected.hexdigest()
