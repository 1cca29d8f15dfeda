"""The real agents through the gateway, against Logist's scripted Chat
Completions server, each making a file with a scripted tool call: Codex
(Responses only) and Claude Code (Anthropic Messages) through the
translation, Qwen Code (Chat Completions) as it is. Run where the agent is
on PATH (``npm install @openai/codex @anthropic-ai/claude-code
@qwen-code/qwen-code``), skipped elsewhere. The settings that keep each
agent off every other host are those of ../shared/agents.md."""

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


def fresh(tmp_path: Path) -> tuple[Path, dict]:
    work, home = tmp_path / "work", tmp_path / "agent-home"
    home.mkdir()
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    return work, {"PATH": os.environ["PATH"], "HOME": str(home)}


def records_are_clean(recorded: list) -> None:
    text = json.dumps([r.to_dict() for r in recorded])
    assert CANARY_KEY not in text
    assert all(r.status == 200 and r.error is None and r.usage for r in recorded)


@pytest.mark.skipif(shutil.which("codex") is None, reason="Codex is not installed (npm install @openai/codex)")
def test_codex_writes_a_file_through_the_translation(tmp_path):
    work, env = fresh(tmp_path)
    command = json.dumps({"cmd": "printf 'print(\"hello\")\\n' > hello.py"})
    recorded = []
    with ScriptedLLMServer([Reply(content=command, tool_call="exec_command"), "Created hello.py."]) as upstream, \
            Gateway(upstream.base_url, CANARY_KEY, mode="chat", record=recorded.append) as gateway:
        (Path(env["HOME"]) / "codex").mkdir()
        env.update(CODEX_HOME=str(Path(env["HOME"]) / "codex"), LOCAL_API_KEY=gateway.token)
        provider = f'model_providers.local={{name="local",base_url="{gateway.base_url}",env_key="LOCAL_API_KEY",wire_api="responses"}}'
        run = subprocess.run(["codex", "exec", "-c", "model_provider=local", "-c", "model=m", "-c", provider,
                              "-c", "analytics.enabled=false", "-c", "features.plugins=false",
                              "--dangerously-bypass-approvals-and-sandbox", "--ephemeral", "--json",
                              "Create hello.py that prints hello"],
                             cwd=work, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stderr[-2000:]
    assert (work / "hello.py").read_text() == 'print("hello")\n'
    assert [r.api for r in recorded] == ["responses", "responses"]
    assert recorded[0].response["output"][0]["type"] == "function_call"
    assert recorded[1].upstream_request["messages"][-1]["role"] == "tool"
    records_are_clean(recorded)


@pytest.mark.skipif(shutil.which("claude") is None,
                    reason="Claude Code is not installed (npm install @anthropic-ai/claude-code)")
def test_claude_code_writes_a_file_through_the_translation(tmp_path):
    work, env = fresh(tmp_path)
    write = json.dumps({"file_path": str(work / "hello.py"), "content": 'print("hello")\n'})
    recorded = []
    with ScriptedLLMServer([Reply(content=write, tool_call="Write"), "I created hello.py."]) as upstream, \
            Gateway(upstream.base_url, CANARY_KEY, mode="chat", record=recorded.append) as gateway:
        env.update(ANTHROPIC_BASE_URL=gateway.root_url, ANTHROPIC_API_KEY=gateway.token, ANTHROPIC_MODEL="m",
                   ANTHROPIC_SMALL_FAST_MODEL="m", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_TELEMETRY="1",
                   DISABLE_ERROR_REPORTING="1", DISABLE_AUTOUPDATER="1")
        run = subprocess.run(["claude", "-p", "Create hello.py that prints hello", "--output-format", "json",
                              "--permission-mode", "acceptEdits"],
                             cwd=work, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stderr[-2000:]
    assert json.loads(run.stdout)["result"] == "I created hello.py."
    assert (work / "hello.py").read_text() == 'print("hello")\n'
    assert [(r.api, r.path) for r in recorded] == [("messages", "/v1/messages?beta=true")] * 2
    assert recorded[0].response["stop_reason"] == "tool_use"
    records_are_clean(recorded)


@pytest.mark.skipif(shutil.which("qwen") is None, reason="Qwen Code is not installed (npm install @qwen-code/qwen-code)")
def test_qwen_code_writes_a_file_through_the_gateway_as_it_is(tmp_path):
    work, env = fresh(tmp_path)
    settings = Path(env["HOME"]) / ".qwen" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps({"privacy": {"usageStatisticsEnabled": False}, "telemetry": {"enabled": False}}))
    write = json.dumps({"file_path": str(work / "hello.py"), "content": 'print("hello")\n'})
    recorded = []
    with ScriptedLLMServer([Reply(content=write, tool_call="write_file"), "I created hello.py."]) as upstream, \
            Gateway(upstream.base_url, CANARY_KEY, record=recorded.append) as gateway:
        env.update(OPENAI_BASE_URL=gateway.base_url, OPENAI_API_KEY=gateway.token, OPENAI_MODEL="m")
        run = subprocess.run(["qwen", "--yolo", "--auth-type", "openai", "--output-format", "json",
                              "Create hello.py that prints hello"],
                             cwd=work, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stderr[-2000:]
    assert (work / "hello.py").read_text() == 'print("hello")\n'
    assert [(r.api, r.mode) for r in recorded] == [("chat", "passthrough")] * 2
    assert recorded[0].response["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "write_file"
    records_are_clean(recorded)
