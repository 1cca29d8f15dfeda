"""What a role file says of its coding agent, how the gateway reaches the
role's endpoint for it, and the text the agent is given (no agent runs)."""

from __future__ import annotations

import pytest

from logist.agents import PROVIDERS
from logist.errors import ConfigError
from logist.model.agent import gateway_mode, prompt_text
from logist.store.roles import RoleManifest, load_roles_file

BASE = {"name": "Coder", "description": "a coding agent", "instructions": "Work.", "llm_model": "m"}


def test_a_role_names_any_provider_and_an_unknown_agent_is_refused_naming_those_there_are(tmp_path):
    for name in PROVIDERS:
        extra = {"agent_command": ["my-agent", "{prompt_file}"]} if name == "command" else {}
        assert RoleManifest.model_validate({**BASE, "agent": name, **extra}).agent == name
    path = tmp_path / "Coder.json"
    path.write_text('{"name": "Coder", "description": "d", "instructions": "i", "llm_model": "m", "agent": "cline"}')
    with pytest.raises(ConfigError) as raised:
        load_roles_file(path)
    assert "no agent 'cline' (known: aider, codex, claude-code, qwen-code, opencode, command)" in str(raised.value)


@pytest.mark.parametrize("fields, error", [
    ({"agent": "command"}, "agent_command: the argv of the agent command to run"),
    ({"agent": "aider", "agent_command": ["x"]}, 'agent_command is for "agent": "command"'),
    ({"agent": "aider", "agent_max_calls": 0}, "agent_max_calls"),
])
def test_an_agent_role_that_cannot_run_is_refused_when_loaded(fields, error):
    with pytest.raises(ValueError) as raised:
        RoleManifest.model_validate({**BASE, **fields})
    assert error in str(raised.value)


def test_the_gateway_translates_for_an_endpoint_that_speaks_chat_completions_only():
    assert gateway_mode("chat", "http://127.0.0.1:8080/v1") == "passthrough"
    assert gateway_mode("responses", "http://127.0.0.1:8080/v1") == "chat"
    assert gateway_mode("messages", "http://localhost:11434/v1") == "chat"
    assert gateway_mode("responses", "https://api.openai.com/v1") == "passthrough"
    assert gateway_mode("messages", "https://api.anthropic.com/v1") == "passthrough"
    assert gateway_mode("messages", "https://api.openai.com/v1") == "chat"


def test_the_agent_is_given_the_system_message_then_the_turn_in_order():
    text = prompt_text([
        {"role": "system", "content": "How to end."},
        {"role": "user", "content": "# Job\nWrite hello.py."},
        {"role": "assistant", "content": '{"action": "COMPLETED"}'},
        {"role": "user", "content": [{"type": "text", "text": "The Supervisor asks for a test."}]},
    ])
    assert text == ("How to end.\n\n--- User ---\n# Job\nWrite hello.py.\n\n"
                    '--- Your earlier run ended with ---\n{"action": "COMPLETED"}\n\n'
                    "--- User ---\nThe Supervisor asks for a test.\n")


def test_logist_agents_lists_every_provider_and_doctor_says_the_installed_ones_versions(tmp_path, monkeypatch):
    import json
    import os

    from conftest import logist_cli

    folder = tmp_path / "bin"
    folder.mkdir()
    fake = folder / "aider"
    fake.write_text("#!/bin/sh\necho 'aider 9.8.7'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}:/usr/bin:/bin")  # this aider, no other agent
    listed = json.loads(logist_cli("agents", "--json").stdout)
    assert [agent["name"] for agent in listed] == list(PROVIDERS)
    assert listed[0] == {"name": "aider", "program": "aider", "api": "chat", "installed": str(fake),
                         "tested": "0.86.2", "description": PROVIDERS["aider"].description}
    assert all(agent["installed"] is None for agent in listed[1:])
    assert logist_cli("init").returncode == 0
    doctor = logist_cli("doctor", "--json", "--base-url", "http://127.0.0.1:9/v1")
    assert doctor.returncode == 1  # nothing answers there; the agents are reported all the same
    assert json.loads(doctor.stdout)["agents"] == {"aider": {"path": str(fake), "version": "9.8.7",
                                                             "tested": "0.86.2"}}
    shown = logist_cli("doctor", "--base-url", "http://127.0.0.1:9/v1").stdout
    assert f"agents     aider 9.8.7 ({fake})" in shown
