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
    pairs = [(m["role"], m["content"]) for m in messages]
    assert calls._DIGESTS.longest(pairs)[0] == pairs
    messages += [{"role": "assistant", "content": "hello"}, {"role": "user", "content": "more"}]
    second = {"model": "m", "messages": list(messages), "stream": True}
    assert body_digest(second) == reference(second)
    assert len(calls._DIGESTS.longest([(m["role"], m["content"]) for m in messages])[0]) == 4


def test_a_changed_message_a_shorter_or_another_conversation_is_hashed_afresh():
    messages = [{"role": "system", "content": "rules"}, {"role": "user", "content": "one"}, {"role": "user", "content": "two"}]
    assert body_digest({"messages": messages}) == reference({"messages": messages})
    changed = [dict(m) for m in messages]
    changed[1]["content"] = "".join(["o", "n", "e!"])  # another object, another text
    assert body_digest({"messages": changed}) == reference({"messages": changed})
    same_text = [dict(m) for m in changed]
    same_text[1]["content"] = "".join(["o", "n", "e!"])  # equal text, another object (a conversation rebuilt
    same_text.append({"role": "assistant", "content": "ok"})  # from the history): only the new message is hashed
    assert body_digest({"messages": same_text}) == reference({"messages": same_text})
    assert len(calls._DIGESTS.longest([(m["role"], m["content"]) for m in same_text])[0]) == 4
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


def test_the_encoded_body_is_what_the_sdk_would_send_and_encodes_each_message_once():
    from openai._utils._json import openapi_dumps

    messages = [{"role": "system", "content": "rules é ✓ \"quoted\" \\ \n"}, {"role": "user", "content": "one"}]
    body = {"model": "m", "messages": list(messages), "temperature": 0.2, "stream": True,
            "stream_options": {"include_usage": True}}
    assert calls.encoded_body(body) == openapi_dumps(body)
    first = calls._ENCODED.longest([(m["role"], m["content"]) for m in messages])[1]
    messages += [{"role": "assistant", "content": "two"}, {"role": "user", "content": "".join(["thr", "ee"])}]
    longer = {"model": "m", "messages": [dict(m) for m in messages], "temperature": 0.2}
    assert calls.encoded_body(longer) == openapi_dumps(longer)
    pieces = calls._ENCODED.longest([(m["role"], m["content"]) for m in messages])[1]
    assert len(first) == 2 and len(pieces) == 4 and all(a is b for a, b in zip(pieces, first))
    changed = {"model": "m", "messages": [{"role": "user", "content": "other"}, *messages[1:]]}
    assert calls.encoded_body(changed) == openapi_dumps(changed)
    odd = {"model": "m", "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]}
    assert calls.encoded_body(odd) == openapi_dumps(odd)


def test_conversations_stepped_in_turn_each_keep_what_was_hashed_and_encoded():
    """A batch steps several jobs in one process: each job's conversation
    keeps its own digest state and encoded messages."""
    from openai._utils._json import openapi_dumps

    talks = {name: [{"role": "system", "content": f"job {name}"}] for name in "abc"}
    for round_ in range(3):
        for name, messages in talks.items():
            messages.append({"role": "user", "content": f"{name} round {round_}"})
            body = {"model": "m", "messages": [dict(m) for m in messages]}
            before = len(calls._DIGESTS.longest([(m["role"], m["content"]) for m in messages])[0])
            assert body_digest(body) == reference(body) and calls.encoded_body(body) == openapi_dumps(body)
            if round_:
                assert before == len(messages) - 1, "the job's earlier messages were kept"
