"""The ``command`` agent (any program) through the runner: a tiny Python
agent covers where the exit command comes from (the exit file, the final
JSON object, the rules), what it is given, and how it is stopped."""

from __future__ import annotations

import json
import os
import signal
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from agent_helpers import (USER_HOME_MARKER, WatchingServer, agents_on_path, processes_running,  # noqa: F401
                           user_home, wait_for, workspace)
from conftest import CANARY_KEY
from logist.agents import run_agent
from logist.agents.exits import EXIT_FILE, FINAL_MESSAGE, RULE
from logist.secrets import environment

#: The tiny agent: what it does is its first argument.
AGENT = textwrap.dedent(r'''
    import json, os, subprocess, sys, time, urllib.request
    mode, prompt_file = sys.argv[1], sys.argv[2]
    prompt = open(prompt_file).read()
    def write(name, text):
        with open(name, "w") as f:
            f.write(text)
    if mode == "exit-file":
        write("notes.md", prompt)
        write(os.environ["LOGIST_EXIT_FILE"], json.dumps({"action": "COMPLETED", "evidence_files": ["notes.md"],
              "summary_for_supervisor": "wrote the notes"}))
        print('{"action": "STUCK", "evidence_files": [], "summary_for_supervisor": "not this one"}')
    elif mode == "final-json":
        write("notes.md", prompt)
        print("working...")
        print(json.dumps({"action": "RETRY", "evidence_files": ["notes.md"],
                          "summary_for_supervisor": "try another way"}))
    elif mode == "bad-final":
        print(json.dumps({"action": "CMD", "command": "ls"}))
    elif mode == "bad-exit-file":
        write(os.environ["LOGIST_EXIT_FILE"], json.dumps({"action": "COMPLETED", "evidence_files": ["../x"],
              "summary_for_supervisor": "outside"}))
    elif mode == "silent":
        write("made.txt", "made\n")
        os.remove("old.txt")
        print("done, no protocol")
    elif mode == "nothing":
        print("nothing to do")
    elif mode == "fail":
        write("half.txt", "half\n")
        print("step one ok")
        print("Traceback: it broke", file=sys.stderr)
        sys.exit(3)
    elif mode == "commit":
        write("committed.txt", "c\n")
        subprocess.run(["git", "add", "committed.txt"], check=True)
        subprocess.run(["git", "commit", "-q", "-m", "agent's own commit"], check=True)
        write("loose.txt", "l\n")
    elif mode == "call":
        request = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions",
            data=json.dumps({"model": "m", "messages": [{"role": "user", "content": prompt}]}).encode(),
            headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"], "Content-Type": "application/json"})
        answer = json.load(urllib.request.urlopen(request, timeout=30))
        write("answer.txt", answer["choices"][0]["message"]["content"])
    elif mode == "hang":
        marker = sys.argv[3]
        subprocess.Popen(["sleep", "300", marker])
        subprocess.Popen(["setsid", "sh", "-c", f"sleep 301 {marker}; :"], start_new_session=True)
        write("started.txt", "")
        time.sleep(300)
''')


@pytest.fixture
def agent(tmp_path) -> Path:
    path = tmp_path / "tiny_agent.py"
    path.write_text(AGENT)
    return path


def run(agent: Path, mode: str, workspace: Path, *extra: str, prompt: str = "Write the notes.", **kwargs):
    return run_agent("command", workspace, prompt, "http://127.0.0.1:9/v1", "run-token-1", "m",
                     command=[sys.executable, str(agent), mode, "{prompt_file}", *extra], **kwargs)


def test_the_exit_file_wins_over_the_final_message(agent, workspace):
    result = run(agent, "exit-file", workspace)
    assert result.exit_code == 0
    assert result.exit.source == EXIT_FILE and result.exit.refused is None
    assert result.exit.answer.action == "COMPLETED"
    assert result.exit.answer.evidence_files == ["notes.md"]
    assert (workspace / "notes.md").read_text() == "Write the notes."  # the prompt file it was given
    assert result.changed_files == ["notes.md"]
    assert result.commits is None


def test_the_last_json_object_of_the_output_is_the_exit_command(agent, workspace):
    result = run(agent, "final-json", workspace)
    assert result.exit.source == FINAL_MESSAGE
    assert result.exit.answer.action == "RETRY"
    assert result.exit.answer.summary_for_supervisor == "try another way"
    assert json.loads(result.final_message)["action"] == "RETRY"


@pytest.mark.parametrize("mode, reason", [("bad-final", "action CMD is not an exit command"),
                                          ("bad-exit-file", "..")])
def test_an_exit_command_the_answer_check_refuses_is_stuck_with_the_reason(agent, workspace, mode, reason):
    result = run(agent, mode, workspace)
    assert result.exit.answer.action == "STUCK"
    assert result.exit.refused and reason in result.exit.refused
    assert reason in result.exit.answer.summary_for_supervisor


def test_exit_0_having_changed_files_is_completed_with_them_as_evidence(agent, workspace):
    (workspace / "old.txt").write_text("old\n")
    (workspace / "dirty.txt").write_text("dirty before the run, untouched by it\n")
    result = run(agent, "silent", workspace)
    assert result.exit.source == RULE
    assert result.exit.answer.action == "COMPLETED"
    assert result.changed_files == ["made.txt", "old.txt"]  # dirty.txt was changed before it ran
    assert result.exit.answer.evidence_files == ["made.txt"]  # old.txt is gone
    assert "changed 2 files (1 of them deleted)" in result.exit.answer.summary_for_supervisor
    assert "done, no protocol" in result.exit.answer.summary_for_supervisor


def test_exit_0_having_changed_nothing_is_stuck(agent, workspace):
    result = run(agent, "nothing", workspace)
    assert result.exit.answer.action == "STUCK"
    assert "without changing any file" in result.exit.answer.summary_for_supervisor


def test_a_non_zero_exit_is_stuck_with_the_tail_of_its_output(agent, workspace):
    result = run(agent, "fail", workspace)
    assert result.exit_code == 3
    assert result.exit.source == RULE and result.exit.answer.action == "STUCK"
    summary = result.exit.answer.summary_for_supervisor
    assert "exited with code 3" in summary and "Traceback: it broke" in summary and "step one ok" in summary
    assert "Traceback: it broke" in result.stderr_tail
    assert result.changed_files == ["half.txt"]


def test_commits_the_agent_made_itself_are_reported_as_a_range(agent, workspace):
    # Its .git is writable only without protect_git (else it is read-only to it, where mounts work).
    result = run(agent, "commit", workspace, protect_git=False)
    assert result.exit_code == 0, result.stderr_tail
    assert result.commits == f"{result.head_before}..{result.head_after}"
    assert result.commit_count == 1
    assert result.changed_files == ["committed.txt", "loose.txt"]


def test_with_protect_git_the_agent_cannot_commit(agent, workspace):
    from logist.workspace.sandbox import mounts_work

    if not mounts_work():
        pytest.skip("this system cannot mount .git read-only for a command (no mount namespace)")
    result = run(agent, "commit", workspace)
    assert result.exit_code != 0
    assert result.commits is None
    assert result.head_after == result.head_before


def test_the_agent_calls_the_gateway_with_the_run_token_and_sees_no_key_nor_the_users_home(
        agent, workspace, user_home, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", CANARY_KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", CANARY_KEY)
    monkeypatch.setenv("LOGIST_API_KEY", CANARY_KEY)
    environment.hold(["LOGIST_API_KEY"])  # as the logist program holds it
    try:
        with WatchingServer(["the model's words"], token="run-token-2") as server:
            result = run_agent("command", workspace, "say something", server.base_url, "run-token-2", "m",
                               command=[sys.executable, str(agent), "call", "{prompt_file}"])
    finally:
        environment.release()
    assert result.exit_code == 0, result.stderr_tail
    assert (workspace / "answer.txt").read_text() == "the model's words"
    assert server.headers[0]["Authorization"] == "Bearer run-token-2"
    assert server.seen and server.seen[0], "the agent's processes were not found while it ran"
    for env in server.seen[0].values():
        assert CANARY_KEY not in "\0".join(f"{k}={v}" for k, v in env.items())
        assert env["HOME"] != str(user_home) and not env["HOME"].startswith(str(user_home))
        assert env["OPENAI_BASE_URL"] == server.base_url
        assert env["ANTHROPIC_BASE_URL"] == server.base_url[:-3]
        assert env["ANTHROPIC_API_KEY"] == "run-token-2"
    assert server.homes, "the agent's home was not read while it ran"
    for files in server.homes:
        for data in files.values():
            assert CANARY_KEY.encode() not in data and USER_HOME_MARKER.encode() not in data


def gone(marker: str) -> bool:
    """No process whose command line holds ``marker`` is left, within a few
    seconds: a SIGKILL to a group (or a PID namespace's end, which kills the
    rest of it) is delivered asynchronously, so a killed process can show in
    /proc for a moment after the call that killed it returned. An agent that
    was not killed goes on hanging: this still fails."""
    return wait_for(lambda: processes_running(marker) == [], timeout=5)


def test_a_timeout_ends_the_agents_whole_process_group(agent, workspace, tmp_path):
    marker = f"logist-agent-test-{os.getpid()}-{tmp_path.name}"
    seen: set[int] = set()

    def both_children_seen() -> bool:
        seen.update(processes_running(marker))
        return len(seen) >= 2

    watcher = threading.Thread(target=wait_for, args=(both_children_seen,))
    watcher.start()
    result = run(agent, "hang", workspace, marker, timeout=4)
    watcher.join()
    assert result.timed_out and result.exit_code is None
    assert len(seen) >= 2, "the agent's children were never seen running"
    assert (workspace / "started.txt").exists()
    assert gone(marker)
    assert result.exit.answer.action == "STUCK"
    assert "stopped after 4 s" in result.exit.answer.summary_for_supervisor


def test_ctrl_c_ends_the_agents_whole_process_group(agent, workspace, tmp_path):
    marker = f"logist-agent-test-ctrl-c-{os.getpid()}-{tmp_path.name}"

    def interrupt():
        if wait_for(lambda: len(processes_running(marker)) >= 2):
            os.kill(os.getpid(), signal.SIGINT)

    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        pytest.skip("this test process does not turn SIGINT into KeyboardInterrupt")
    threading.Thread(target=interrupt, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        run(agent, "hang", workspace, marker, timeout=60)
    assert gone(marker)


def test_a_missing_program_is_a_clear_error(workspace):
    from logist.errors import LogistError

    with pytest.raises(LogistError, match="no program 'no-such-agent-program'"):
        run_agent("command", workspace, "x", "http://127.0.0.1:9/v1", "t", "m", command=["no-such-agent-program"])
    with pytest.raises(LogistError, match="needs agent_command"):
        run_agent("command", workspace, "x", "http://127.0.0.1:9/v1", "t", "m")
