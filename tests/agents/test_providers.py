"""The provider table, read without running any agent: each provider's
command line, variables, files and final message, and the exit command's
rules (:mod:`logist.agents.exits`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from logist.agents.exits import EXIT_FILE, FINAL_MESSAGE, RULE, exit_command
from logist.agents.providers import APIS, PROVIDERS, Invocation, json_objects, last_json_object, provider
from logist.errors import LogistError


@pytest.fixture
def invocation(tmp_path) -> Invocation:
    prompt = tmp_path / "run" / "prompt.md"
    prompt.parent.mkdir()
    prompt.write_text("Do the thing.")
    return Invocation(prompt_file=prompt, workspace=tmp_path / "ws", base_url="http://127.0.0.1:4321/v1",
                      token="tok-123456", model="m1", home=tmp_path / "run" / "home", state=tmp_path / "run" / "state",
                      extra_args=("--extra",), command=("my-agent", "--prompt-file", "{prompt_file}", "--in={workspace}"))


def test_every_provider_names_its_program_api_and_command_line(invocation):
    assert set(PROVIDERS) == {"aider", "codex", "claude-code", "qwen-code", "opencode", "command"}
    for name, agent in PROVIDERS.items():
        assert agent.name == name and agent.api in APIS and agent.description
        argv = agent.argv(invocation)
        assert argv[0] == agent.executable(invocation)
        assert "--extra" in argv  # the role's extra arguments
        for relative in agent.config_files(invocation):
            assert not Path(relative).is_absolute() and ".." not in Path(relative).parts


def test_the_apis_the_gateway_serves_each_agent():
    assert {name: agent.api for name, agent in PROVIDERS.items()} == {
        "aider": "chat", "codex": "responses", "claude-code": "messages", "qwen-code": "chat",
        "opencode": "chat", "command": "chat"}


def test_each_agent_is_kept_off_every_other_host(invocation):
    aider = provider("aider").argv(invocation)
    for flag in ("--no-check-update", "--analytics-disable", "--no-show-release-notes", "--no-detect-urls"):
        assert flag in aider
    assert aider[aider.index("--openai-api-base") + 1] == invocation.base_url
    assert aider[aider.index("--model") + 1] == "openai/m1"
    assert "--no-git" in aider  # .git read-only to it: it must not git add
    assert "--no-git" not in provider("aider").argv(Invocation(**{**invocation.__dict__, "git_writable": True}))
    assert provider("aider").env(invocation)["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
    codex = " ".join(provider("codex").argv(invocation))
    assert 'base_url="http://127.0.0.1:4321/v1"' in codex and 'wire_api="responses"' in codex
    assert "analytics.enabled=false" in codex and codex.endswith(" -")  # the prompt on standard input
    assert provider("codex").env(invocation)["CODEX_HOME"] == str(invocation.home / ".codex")
    claude = provider("claude-code").env(invocation)
    for name in ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "DISABLE_TELEMETRY", "DISABLE_ERROR_REPORTING",
                 "DISABLE_AUTOUPDATER"):
        assert claude[name] == "1"
    qwen = json.loads(provider("qwen-code").config_files(invocation)[".qwen/settings.json"])
    assert qwen == {"privacy": {"usageStatisticsEnabled": False}, "telemetry": {"enabled": False}}
    assert "--yolo" in provider("qwen-code").argv(invocation)
    opencode = json.loads(provider("opencode").config_files(invocation)[".config/opencode/opencode.json"])
    assert opencode["provider"]["logist"]["options"] == {"baseURL": invocation.base_url, "apiKey": "tok-123456"}
    assert opencode["autoupdate"] is False and opencode["share"] == "disabled"
    assert provider("opencode").env(invocation)["OPENCODE_DISABLE_MODELS_FETCH"] == "1"


def test_the_anthropic_base_url_is_the_gateways_without_v1(invocation):
    assert invocation.origin == "http://127.0.0.1:4321"


def test_the_command_agent_fills_in_its_placeholders(invocation):
    argv = provider("command").argv(invocation)
    assert argv == ["my-agent", "--prompt-file", str(invocation.prompt_file), f"--in={invocation.workspace}", "--extra"]
    bare = Invocation(**{**invocation.__dict__, "command": ()})
    with pytest.raises(LogistError, match="agent_command"):
        provider("command").argv(bare)
    with pytest.raises(LogistError, match="no agent 'cline'"):
        provider("cline")


def test_final_messages_as_each_agent_prints_them():
    codex = "\n".join(json.dumps(e) for e in [
        {"type": "thread.started"}, {"type": "item.completed", "item": {"type": "agent_message", "text": "first"}},
        {"type": "item.completed", "item": {"type": "command_execution", "command": "ls"}},
        {"type": "item.completed", "item": {"type": "agent_message", "text": "last"}}, {"type": "turn.completed"}])
    assert provider("codex").final_message(codex + "\nnot json\n", "") == "last"
    claude = json.dumps({"type": "result", "subtype": "success", "result": "Created hello.py.", "usage": {}})
    assert provider("claude-code").final_message(claude, "") == "Created hello.py."
    assert provider("claude-code").final_message("", "Error: no key") is None
    assert provider("qwen-code").final_message(json.dumps([{"type": "system"}, {"type": "result", "result": "done"}]),
                                               "") == "done"
    assert provider("qwen-code").final_message(json.dumps({"response": "ok", "stats": {}}), "") == "ok"
    assert provider("aider").final_message("\nAider v0.86.2\nhello.py\n", "") == "Aider v0.86.2\nhello.py"
    command = 'log {"a": 1}\n{"action": "COMPLETED", "nested": {"x": {}}}\ntrailing'
    assert json.loads(provider("command").final_message(command, "")) == {"action": "COMPLETED", "nested": {"x": {}}}
    assert provider("command").final_message("just words\n", "") == "just words"


def test_json_objects_are_found_among_prose():
    assert json_objects('a {"x": 1} b {not json} {"y": [1, {"z": 2}]} [3]') == [{"x": 1}, {"y": [1, {"z": 2}]}]
    assert last_json_object("no object") is None


def decide(**given):
    facts = {"exit_file_text": None, "final_message": None, "exit_code": 0, "timed_out": False, "timeout": 60.0,
             "changed": [], "existing": [], "output_tail": ""}
    return exit_command(**{**facts, **given})


DONE = json.dumps({"action": "COMPLETED", "evidence_files": ["a.py"], "summary_for_supervisor": "did it"})


def test_the_exit_file_comes_first_then_the_final_message_then_the_rules():
    stuck = json.dumps({"action": "STUCK", "evidence_files": [], "summary_for_supervisor": "help"})
    assert decide(exit_file_text=DONE, final_message=stuck, exit_code=1).source == EXIT_FILE
    by_message = decide(final_message=f"I am done.\n```json\n{stuck}\n```", changed=["a.py"], existing=["a.py"])
    assert (by_message.source, by_message.answer.action) == (FINAL_MESSAGE, "STUCK")
    by_rule = decide(final_message="All done, see a.py {braces}", changed=["a.py", "b.py"], existing=["a.py"])
    assert (by_rule.source, by_rule.answer.action, by_rule.answer.evidence_files) == (RULE, "COMPLETED", ["a.py"])
    assert "All done, see a.py" in by_rule.answer.summary_for_supervisor


@pytest.mark.parametrize("given, reason", [
    ({"action": "CMD", "command": "ls"}, "not an exit command"),
    ({"action": "COMPLETED", "evidence_files": ["/etc/passwd"], "summary_for_supervisor": "x"}, "absolute"),
    ({"action": "COMPLETED", "summary_for_supervisor": "x",
      "file_changes": [{"path": "a", "content": "b"}], "evidence_files": []}, "writes its files itself"),
    ({"action": "COMPLETED"}, "required"),
])
def test_an_exit_command_the_check_refuses_is_stuck_with_why(given, reason):
    for where in ("exit_file_text", "final_message"):
        decided = decide(**{where: json.dumps(given)}, changed=["a.py"], existing=["a.py"])
        assert decided.answer.action == "STUCK"
        assert reason in decided.refused and reason in decided.answer.summary_for_supervisor


def test_the_rules_for_an_agent_that_knows_nothing_of_logist():
    assert decide(exit_code=2, output_tail="boom").answer.action == "STUCK"
    assert "code 2" in decide(exit_code=2, output_tail="boom").answer.summary_for_supervisor
    assert "boom" in decide(exit_code=2, output_tail="x" * 5000 + "boom").answer.summary_for_supervisor
    timed_out = decide(exit_code=None, timed_out=True, changed=["a.py"], existing=["a.py"])
    assert timed_out.answer.action == "STUCK" and "60 s" in timed_out.answer.summary_for_supervisor
    assert decide(exit_code=0).answer.action == "STUCK"
    long = decide(final_message="w" * 5000, changed=["a"], existing=["a"]).answer.summary_for_supervisor
    assert len(long) <= 1000
    odd = decide(changed=["ok.py", ".git/config"], existing=["ok.py", ".git/config"])
    assert odd.answer.evidence_files == ["ok.py"]  # a path no answer may name is left out
