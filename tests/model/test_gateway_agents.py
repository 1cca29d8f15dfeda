"""The real agents through the gateway, against Logist's scripted Chat
Completions server: each makes a file with a scripted tool call, and each
ends its run at the first call a budget refuses. Codex (Responses only) and
Claude Code (Anthropic Messages) go through the translation, Qwen Code
(Chat Completions) as it is. Run where the agent is on PATH (``npm install
@openai/codex @anthropic-ai/claude-code @qwen-code/qwen-code``), skipped
elsewhere. The settings that keep each agent off every other host are those
of ../shared/agents.md."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import CANARY_KEY
from logist.model.gateway import Gateway
from logist.replay.scripted import Reply, ScriptedLLMServer

pytestmark = pytest.mark.slow

PROMPT = "Create hello.py that prints hello"
HELLO = 'print("hello")\n'


def codex(gateway: Gateway, work: Path, env: dict) -> subprocess.CompletedProcess:
    (Path(env["HOME"]) / "codex").mkdir()
    env.update(CODEX_HOME=str(Path(env["HOME"]) / "codex"), LOCAL_API_KEY=gateway.token)
    provider = f'model_providers.local={{name="local",base_url="{gateway.base_url}",env_key="LOCAL_API_KEY",wire_api="responses"}}'
    return run(["codex", "exec", "-c", "model_provider=local", "-c", "model=m", "-c", provider,
                "-c", "analytics.enabled=false", "-c", "features.plugins=false",
                "--dangerously-bypass-approvals-and-sandbox", "--ephemeral", "--json", PROMPT], work, env)


def claude(gateway: Gateway, work: Path, env: dict) -> subprocess.CompletedProcess:
    env.update(ANTHROPIC_BASE_URL=gateway.root_url, ANTHROPIC_API_KEY=gateway.token, ANTHROPIC_MODEL="m",
               ANTHROPIC_SMALL_FAST_MODEL="m", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_TELEMETRY="1",
               DISABLE_ERROR_REPORTING="1", DISABLE_AUTOUPDATER="1")
    return run(["claude", "-p", PROMPT, "--output-format", "json", "--permission-mode", "acceptEdits"], work, env)


def qwen(gateway: Gateway, work: Path, env: dict) -> subprocess.CompletedProcess:
    settings = Path(env["HOME"]) / ".qwen" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps({"privacy": {"usageStatisticsEnabled": False}, "telemetry": {"enabled": False}}))
    env.update(OPENAI_BASE_URL=gateway.base_url, OPENAI_API_KEY=gateway.token, OPENAI_MODEL="m")
    return run(["qwen", "--yolo", "--auth-type", "openai", "--output-format", "json", PROMPT], work, env)


def run(command: list, work: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=work, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=180)


#: name, how it is run, its mode, the API it speaks, the scripted tool call that writes the file.
AGENTS = [
    ("codex", codex, "chat", "responses", lambda work: Reply(
        content=json.dumps({"cmd": "printf 'print(\"hello\")\\n' > hello.py"}), tool_call="exec_command")),
    ("claude", claude, "chat", "messages", lambda work: Reply(
        content=json.dumps({"file_path": str(work / "hello.py"), "content": HELLO}), tool_call="Write")),
    ("qwen", qwen, "passthrough", "chat", lambda work: Reply(
        content=json.dumps({"file_path": str(work / "hello.py"), "content": HELLO}), tool_call="write_file")),
]

installed = pytest.mark.parametrize("name, start, mode, api, tool_call", [
    pytest.param(*agent, marks=pytest.mark.skipif(shutil.which(agent[0]) is None, reason=f"{agent[0]} is not installed"),
                 id=agent[0]) for agent in AGENTS])


def fresh(tmp_path: Path) -> tuple[Path, dict]:
    work, home = tmp_path / "work", tmp_path / "agent-home"
    home.mkdir()
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    return work, {"PATH": os.environ["PATH"], "HOME": str(home)}


@installed
def test_the_agent_writes_a_file_through_the_gateway(tmp_path, name, start, mode, api, tool_call):
    work, env = fresh(tmp_path)
    recorded = []
    with ScriptedLLMServer([tool_call(work), "I created hello.py."]) as upstream, \
            Gateway(upstream.base_url, CANARY_KEY, mode=mode, record=recorded.append) as gateway:
        done = start(gateway, work, env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (work / "hello.py").read_text() == HELLO
    assert [(r.api, r.mode, r.status, r.error) for r in recorded] == [(api, mode, 200, None)] * 2
    assert all(r.usage and r.usage["input_tokens"] > 0 for r in recorded)
    assert CANARY_KEY not in json.dumps([r.to_dict() for r in recorded])


@installed
def test_the_agent_ends_its_run_at_the_first_refusal(tmp_path, name, start, mode, api, tool_call):
    work, env = fresh(tmp_path)
    recorded = []
    with ScriptedLLMServer([tool_call(work), "I created hello.py."]) as upstream, \
            Gateway(upstream.base_url, CANARY_KEY, mode=mode, record=recorded.append,
                    budget=lambda totals: "max_tokens 10 reached") as gateway:
        done = start(gateway, work, env)
    assert (gateway.refusal, gateway.refused) == ("max_tokens 10 reached", 1)  # not sent again
    assert recorded == [] and upstream.requests == []
    assert not (work / "hello.py").exists()
    shown = done.stdout + done.stderr
    assert "Quota exceeded" in shown if name == "codex" else "Logist stopped this run at its budget" in shown
