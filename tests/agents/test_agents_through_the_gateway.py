"""aider, Codex and Claude Code against Logist's scripted Chat Completions
server through the recording gateway (``mode="chat"``: Responses and
Messages translated to Chat Completions, tool calls included): each writes
its file, every call it made is recorded with its usage, the endpoint gets
the real key and the agent only the run's token."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_helpers import USER_HOME_MARKER, WatchingServer, agents_on_path, require_agent, user_home, workspace  # noqa: F401
from conftest import CANARY_KEY
from logist.agents import run_agent
from logist.model import gateway
from logist.replay.scripted import Reply

PROMPT = "Create hello.py that prints hello."


def chat_script(agent: str, workspace: Path) -> list:
    """Chat Completions answers that make ``agent`` write hello.py, then say so."""
    if agent == "aider":
        return ['hello.py\n```python\nprint("hello")\n```\n']
    if agent == "codex":
        call = Reply(tool_call="exec_command", content=json.dumps({"cmd": "printf 'print(\"hello\")\\n' > hello.py"}))
    else:
        call = Reply(tool_call="Write", content=json.dumps({"file_path": str(workspace / "hello.py"),
                                                            "content": 'print("hello")\n'}))
    return [call, "Created hello.py."]


@pytest.mark.parametrize("agent", ["aider", "codex", "claude-code"])
def test_the_agent_writes_its_file_through_the_gateway_and_every_call_is_recorded(agent, workspace, user_home):
    require_agent(agent)
    records = []
    token = f"{agent}-gateway-run-token"  # the endpoint's watcher finds the agent's processes by it
    with WatchingServer(chat_script(agent, workspace), token=token) as endpoint, \
            gateway.Gateway(endpoint.base_url, CANARY_KEY, mode="chat", token=token, record=records.append) as gw:
        result = run_agent(agent, workspace, PROMPT, gw.base_url, gw.token, "scripted", timeout=240)
    assert result.exit_code == 0, result.stdout_tail + result.stderr_tail
    assert (workspace / "hello.py").read_text().strip() == 'print("hello")'
    assert result.changed_files == ["hello.py"]
    assert result.exit.answer.action == "COMPLETED" and result.exit.answer.evidence_files == ["hello.py"]
    # Every call the agent made reached the endpoint once and is recorded, with its usage.
    assert endpoint.remaining == 0
    assert len(records) == len(endpoint.requests)
    assert all(record.status == 200 and record.usage for record in records)
    api = {"aider": "chat", "codex": "responses", "claude-code": "messages"}[agent]
    assert {record.api for record in records} == {api}
    # The endpoint got the real key; the agent had only the run's token, and no home config of the user.
    assert all({name.lower(): value for name, value in headers.items()}["authorization"] == f"Bearer {CANARY_KEY}"
               for headers in endpoint.headers)
    assert endpoint.seen and any(endpoint.seen)
    for processes in endpoint.seen:
        for env in processes.values():
            assert CANARY_KEY not in "\0".join(env.values())
    for files in endpoint.homes:
        assert not any(CANARY_KEY.encode() in data or USER_HOME_MARKER.encode() in data for data in files.values())
