"""aider, Codex and Claude Code, installed by .ci/agents.sh, run for real
through the runner: each writes a file in the workspace from scripted
answers, sees neither Logist's key nor the user's home, looks up no host,
and a timeout leaves none of its processes behind.

aider speaks Chat Completions and runs against the scripted server itself.
Codex (Responses) and Claude Code (Messages) run against a scripted server of
their own API here (:class:`agent_helpers.NativeServer`), which checks their
providers; through the recording gateway's translation to the scripted
Chat Completions server in ``test_agents_through_the_gateway``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent_helpers import (USER_HOME_MARKER, NativeServer, WatchingServer, agents_on_path,  # noqa: F401
                           codex_shell_call, messages_turn, processes_with, require_agent, responses_message,
                           responses_turn, user_home, workspace)
from conftest import CANARY_KEY
from logist import programs
from logist.agents import installed_agents, run_agent
from logist.agents.exits import RULE
from logist.agents.providers import PINNED
from logist.replay.scripted import Reply
from logist.secrets import environment
from logist.workspace import sandbox

HERE = Path(__file__).resolve().parent
PROMPT = "Create hello.py that prints hello."
#: aider's answer in its "whole" edit format (its default for a model it does not know).
AIDER_HELLO = 'hello.py\n```python\nprint("hello")\n```\n'


@pytest.fixture
def keys_in_logists_environment(monkeypatch):
    """The real key where Logist finds it, held as the logist program holds it."""
    for name in ("OPENAI_API_KEY", "LOGIST_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.setenv(name, CANARY_KEY)
    environment.hold(["LOGIST_API_KEY"])
    yield
    environment.release()


def codex_script():
    return ([responses_turn(1, codex_shell_call("printf 'print(\"hello\")\\n' > hello.py")),
             responses_turn(2, responses_message("Created hello.py."))],
            responses_turn(9, responses_message("ok")))


def claude_script(workspace: Path):
    write = {"type": "tool_use", "name": "Write",
             "input": {"file_path": str(workspace / "hello.py"), "content": 'print("hello")\n'}}
    return ([messages_turn(1, [write], "tool_use"),
             messages_turn(2, [{"type": "text", "text": "Created hello.py."}], "end_turn")],
            messages_turn(9, [{"type": "text", "text": "ok"}], "end_turn"))


def assert_contained(server, token: str, user_home: Path) -> None:
    """While the agent ran, none of its processes held the key or pointed at
    the user's home, and its home held nothing from either."""
    assert server.seen and any(server.seen), "the agent's processes were never found while it ran"
    for processes in server.seen:
        for env in processes.values():
            text = "\0".join(f"{name}={value}" for name, value in env.items())
            assert CANARY_KEY not in text
            assert str(user_home) not in text
            assert env["OPENAI_API_KEY"] == token and env["ANTHROPIC_API_KEY"] == token
    assert server.homes, "the agent's home was never read while it ran"
    for files in server.homes:
        assert files, "the agent's home was empty"
        for relative, data in files.items():
            assert CANARY_KEY.encode() not in data, relative
            assert USER_HOME_MARKER.encode() not in data, relative


def assert_wrote_hello(result, workspace: Path) -> None:
    assert result.exit_code == 0, (result.stdout_tail, result.stderr_tail)
    assert (workspace / "hello.py").read_text().strip() == 'print("hello")', result.stdout_tail + result.stderr_tail
    assert result.changed_files == ["hello.py"]
    assert result.exit.source == RULE and result.exit.answer.action == "COMPLETED"
    assert result.exit.answer.evidence_files == ["hello.py"]


def test_installed_agents_are_listed_with_their_versions():
    for name in ("aider", "codex", "claude-code"):
        require_agent(name)
    found = {agent.name: agent.version for agent in installed_agents()}
    assert found["aider"] == PINNED["aider"]
    assert found["codex"] == PINNED["codex"]
    assert found["claude-code"] == PINNED["claude-code"]


def test_aider_writes_a_file_from_the_scripted_server(workspace, user_home, keys_in_logists_environment):
    require_agent("aider")
    token = "aider-run-token"
    with WatchingServer([AIDER_HELLO], token=token) as server:
        result = run_agent("aider", workspace, PROMPT, server.base_url, token, "scripted", timeout=240)
    assert_wrote_hello(result, workspace)
    assert len(server.requests) == 1
    assert server.requests[0]["model"] == "scripted"
    assert PROMPT in json.dumps(server.requests[0]["messages"])
    assert server.headers[0]["Authorization"] == f"Bearer {token}"
    assert_contained(server, token, user_home)
    assert token not in " ".join(result.argv)


def test_codex_writes_a_file_from_a_scripted_responses_server(workspace, user_home, keys_in_logists_environment):
    require_agent("codex")
    token = "codex-run-token"
    script, fallback = codex_script()
    with NativeServer(script, token, fallback) as server:
        result = run_agent("codex", workspace, PROMPT, server.base_url, token, "scripted", timeout=240)
    assert_wrote_hello(result, workspace)
    assert result.final_message == "Created hello.py."
    assert [route for route, _ in server.requests] == ["/v1/responses", "/v1/responses"]
    assert PROMPT in json.dumps(server.requests[0][1]["input"])  # read from its standard input
    assert server.headers[0]["authorization"] == f"Bearer {token}"
    assert_contained(server, token, user_home)


def test_claude_code_writes_a_file_from_a_scripted_messages_server(workspace, user_home,
                                                                    keys_in_logists_environment):
    require_agent("claude-code")
    token = "claude-run-token"
    script, fallback = claude_script(workspace)
    with NativeServer(script, token, fallback) as server:
        result = run_agent("claude-code", workspace, PROMPT, server.base_url, token, "scripted", timeout=240)
    assert_wrote_hello(result, workspace)
    assert result.final_message == "Created hello.py."
    assert {route for route, _ in server.requests} == {"/v1/messages"}
    assert PROMPT in json.dumps(server.requests[0][1]["messages"])
    assert server.headers[0]["x-api-key"] == token
    assert_contained(server, token, user_home)


class ToolsServer(WatchingServer):
    """Answers a request that offers no tools (opencode's title request, sent
    beside its first call) with a title; the others from the script."""

    def reply_for(self, body, headers):
        if not body.get("tools"):
            self.seen.append(processes_with(f"OPENAI_API_KEY={self.token}"))
            return Reply(content="Writing hello.py")
        return super().reply_for(body, headers)


@pytest.mark.parametrize("agent, tool, path_key", [("qwen-code", "write_file", "file_path"),
                                                    ("opencode", "write", "filePath")])
def test_a_chat_agent_with_tools_writes_a_file_from_the_scripted_server(agent, tool, path_key, workspace, user_home,
                                                                        keys_in_logists_environment):
    require_agent(agent)
    token = f"{agent}-run-token"
    call = Reply(tool_call=tool, content=json.dumps({path_key: str(workspace / "hello.py"),
                                                     "content": 'print("hello")\n'}))
    with ToolsServer([call, "Created hello.py."], token=token) as server:
        result = run_agent(agent, workspace, PROMPT, server.base_url, token, "scripted", timeout=240)
    assert_wrote_hello(result, workspace)
    assert result.final_message.strip().endswith("Created hello.py.")
    assert server.remaining == 0
    assert_contained(server, token, user_home)


def timeout_once_called(monkeypatch, server, held: float = 1.0) -> None:
    """The run's wait (:func:`logist.workspace.sandbox.wait_for`, its first
    call: the agent's run) ends as a timeout ``held`` seconds after the
    agent's call reached ``server``, which holds its answer: the timeout the
    test passes is then only the longest the agent may take to start (aider's
    start-up on a loaded machine), not a wait every run pays in full. The
    runner's timeout path is the real one (the process has not ended when
    the real wait gives up), and the waits after it (ending the group) are
    the real ones."""
    real = sandbox.wait_for

    def wait(proc, timeout: float) -> bool:
        monkeypatch.setattr(sandbox, "wait_for", real)
        deadline = time.monotonic() + timeout
        while not server.called.is_set():
            if real(proc, 0.1):
                return True
            if time.monotonic() >= deadline:
                return False
        return real(proc, held)

    monkeypatch.setattr(sandbox, "wait_for", wait)


@pytest.mark.slow
def test_a_timeout_leaves_no_process_of_a_real_agent(workspace, monkeypatch):
    require_agent("aider")
    token = "aider-timeout-token"
    with WatchingServer([Reply(content=AIDER_HELLO, delay=300)], token=token) as server:
        timeout_once_called(monkeypatch, server)
        result = run_agent("aider", workspace, PROMPT, server.base_url, token, "scripted", timeout=120)
    assert result.timed_out and result.exit_code is None
    assert server.seen and server.seen[0], "aider never called the server before its timeout"
    # The group was killed; in a PID namespace the kernel ends the rest once its first
    # process is gone, which takes a moment on a loaded machine: none may be left after it.
    deadline = time.monotonic() + 15
    while processes_with(f"OPENAI_API_KEY={token}") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert processes_with(f"OPENAI_API_KEY={token}") == {}
    assert result.exit.answer.action == "STUCK"
    assert not (workspace / "hello.py").exists()


def _network_namespaces_work() -> bool:
    unshare = programs.program("unshare")
    if unshare is None or programs.program("ip") is None:
        return False
    probe = subprocess.run([unshare, "--net", "--mount", "--map-root-user", "true"], capture_output=True)
    return probe.returncode == 0


#: The hosts an agent still looks up with every setting this table gives it: opencode installs its
#: plugin package from the npm registry in the background on every run, and no setting stops that.
STILL_LOOKED_UP = {"opencode": {"registry.npmjs.org"}}


@pytest.mark.slow
@pytest.mark.parametrize("agent", ["aider", "codex", "claude-code", "qwen-code", "opencode"])
def test_in_a_network_namespace_with_loopback_only_the_agent_looks_up_no_host(agent, tmp_path):
    require_agent(agent)
    if not _network_namespaces_work():
        pytest.skip("this system cannot make a network namespace (unshare --net --map-root-user)")
    from logist.workspace.repository import Workspace

    workspace = Workspace.init(tmp_path / "job" / "workspace", "netns").path
    unshare = programs.program("unshare")
    done = subprocess.run([unshare, "--net", "--mount", "--map-root-user", sys.executable,
                           str(HERE / "netns_agent.py"), agent, str(workspace)],
                          capture_output=True, text=True, timeout=400, env=os.environ.copy())
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["exit_code"] == 0, seen
    assert seen["changed"] == ["hello.py"] and seen["action"] == "COMPLETED"
    assert seen["requests"] >= 1
    assert seen["control_heard"], "the DNS listener heard nothing: the check could not have failed"
    assert set(seen["looked_up"]) <= STILL_LOOKED_UP.get(agent, set()), seen["looked_up"]
