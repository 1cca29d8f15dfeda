"""A coding agent as a job's Worker: a role file names it (``"agent"``), and
each of the role's steps is one run of it through Logist's recording gateway.

Real agents (aider, Codex, Claude Code; .ci/agents.sh installs them) against
Logist's scripted Chat Completions server, Codex and Claude Code through the
gateway's translation: each reaches the Supervisor with its file committed,
every call it made recorded in the job. The budget, the kill and the replay
use the ``command`` agent (a short Python program that calls the gateway as
an agent does): the same path, in a fraction of the time.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import logist
from agent_helpers import (USER_HOME_MARKER, WatchingServer, agents_on_path, processes_running,  # noqa: F401
                           require_agent, user_home, wait_for)
from conftest import CANARY_KEY, logist_cli
from logist.errors import LogistError
from logist.replay.scripted import Reply, ScriptedLLMServer
from test_agents_through_the_gateway import chat_script

JOB = "agentjob"
SUPERVISOR_OK = json.dumps({"action": "COMPLETED", "evidence_files": ["hello.py"],
                            "summary_for_supervisor": "hello.py prints hello."})
SUPERVISOR_RETRY = json.dumps({"action": "RETRY", "evidence_files": [],
                               "summary_for_supervisor": "Also make notes.txt say done, and remove blob.bin."})
KEY_ENV = {"LOGIST_API_KEY": CANARY_KEY}


def jobs_with_agent(tmp_path: Path, agent: str, *create: str, **role) -> Path:
    """A jobs directory whose role Coder is ``agent``, and job :data:`JOB` with Coder as its Worker."""
    jobs = tmp_path / "jobs"
    assert logist_cli("init").returncode == 0
    (jobs / "roles").mkdir(exist_ok=True)
    (jobs / "roles" / "Coder.json").write_text(json.dumps({
        "name": "Coder", "description": "a coding agent", "instructions": "Do the job's work in the workspace.",
        "llm_model": "scripted", "agent": agent, **role}))
    created = logist_cli("job", "create", JOB, "-o", "Create hello.py that prints hello.", "--worker", "Coder",
                         "--command-timeout", "240", *create)
    assert created.returncode == 0, created.stderr
    return jobs


def job_of(jobs: Path):
    return logist.open(jobs).get(JOB)


def agent_entries(job) -> list:
    return [entry for entry in job.history() if entry.kind == "agent_run"]


def committed(job, commit: str, path: str) -> str:
    return subprocess.run(["git", "show", f"{commit}:{path}"], cwd=job.workspace, capture_output=True,
                          text=True, check=True).stdout


@pytest.mark.parametrize("agent", ["aider", "codex", "claude-code"])
def test_the_agent_as_the_worker_reaches_the_supervisor_with_its_file_committed(agent, tmp_path, user_home):
    require_agent(agent)
    jobs = jobs_with_agent(tmp_path, agent)
    workspace = jobs / JOB / "workspace"
    script = chat_script(agent, workspace)
    with WatchingServer(script + [SUPERVISOR_OK], needle=f"LOGIST_WORKSPACE={workspace}") as endpoint:
        done = logist_cli("job", "run", JOB, "--base-url", endpoint.base_url, env=KEY_ENV, timeout=300)
        agent_requests = len(endpoint.requests) - 1
    assert done.returncode == 3, done.stderr  # APPROVAL_REQUIRED: the Supervisor approved it
    job = job_of(jobs)
    [run] = agent_entries(job)
    assert run.role == "Coder" and run.response.actions == ["COMPLETED"]
    assert run.response.evidence_files == ["hello.py"] and run.response.files_changed == ["hello.py"]
    assert committed(job, run.workspace_commit, "hello.py").strip() == 'print("hello")'
    following = job.entry(run.sequence + 1)
    assert following.role == "Supervisor" and following.response.actions == ["COMPLETED"]
    assert str(job.status) == "APPROVAL_REQUIRED"
    # Each call the agent made is in the entry, with its usage, and kept whole in the job's folder.
    api = {"aider": "chat", "codex": "responses", "claude-code": "messages"}[agent]
    assert [call.number for call in run.agent.calls] == list(range(1, agent_requests + 1))
    assert all(call.api == api and call.status == 200 and call.input_tokens and call.output_tokens
               for call in run.agent.calls)
    assert run.usage.prompt_tokens == sum(call.input_tokens for call in run.agent.calls)
    assert job.manifest().totals.llm_calls == agent_requests + 1
    for call in run.agent.calls:
        kept = (jobs / JOB / call.file).read_text()
        assert json.loads(kept)["usage"]["input_tokens"] == call.input_tokens
        assert CANARY_KEY not in kept
    # The agent's processes held neither the real key nor the user's home configuration.
    assert any(endpoint.seen[:agent_requests]), "the agent's processes were not seen while it ran"
    for processes in endpoint.seen:
        for env in processes.values():
            assert CANARY_KEY not in "\0".join(env.values())
            assert env["HOME"] != str(user_home)
    assert endpoint.homes
    for files in endpoint.homes:
        assert not any(CANARY_KEY.encode() in data or USER_HOME_MARKER.encode() in data for data in files.values())


# --------------------------------------------------------------------------
# The command agent: a program that calls the gateway as an agent does.

AGENT_PROGRAM = textwrap.dedent('''\
    """A scripted coding agent: calls its model CALLS times, then writes what it is told."""
    import json, os, sys, time, urllib.error, urllib.request
    base, token = os.environ["OPENAI_BASE_URL"], os.environ["OPENAI_API_KEY"]
    plan = json.loads(open(os.path.join(os.path.dirname(sys.argv[0]), "plan.json")).read())
    runs = os.path.join(os.path.dirname(sys.argv[0]), "runs")
    step = sum(1 for _ in open(runs)) if os.path.exists(runs) else 0
    open(runs, "a").write("%d\\n" % os.getpid())
    todo = plan[min(step, len(plan) - 1)]
    for number in range(todo.get("calls", 1)):
        body = json.dumps({"model": "scripted", "messages": [{"role": "user", "content": "call %d" % number}]})
        request = urllib.request.Request(base + "/chat/completions", data=body.encode(),
                                         headers={"Authorization": "Bearer " + token,
                                                  "Content-Type": "application/json"})
        try:
            urllib.request.urlopen(request).read()
        except urllib.error.HTTPError as error:
            print("refused:", error.read().decode(), file=sys.stderr)
            sys.exit(1)
    for path, text in todo.get("write", {}).items():
        if text is None:
            os.remove(path)
        else:
            open(path, "wb").write(text.encode("latin-1"))
    if todo.get("commit"):  # commits its work itself, as some agents do
        import subprocess
        subprocess.run(["git", "add", "-A"], check=True)
        subprocess.run(["git", "commit", "-qm", "the agent's own commit"], check=True)
    if todo.get("sleep"):
        time.sleep(todo["sleep"])
    print(json.dumps({"action": "COMPLETED", "evidence_files": ["hello.py"], "summary_for_supervisor": "done"}))
    ''')


def command_agent(tmp_path: Path, plan: list[dict]) -> Path:
    """The program ``my-agent`` in a folder of its own (put on PATH by the caller) following ``plan``: one
    item per run (calls to make, files to write, None to delete, seconds to sleep)."""
    folder = tmp_path / "agent-bin"
    folder.mkdir()
    program = folder / "my-agent"
    program.write_text(f"#!{sys.executable}\n" + AGENT_PROGRAM)
    program.chmod(0o755)
    (folder / "plan.json").write_text(json.dumps(plan))
    return folder


def on_path(monkeypatch, folder: Path) -> None:
    monkeypatch.setenv("PATH", f"{folder}:{os.environ['PATH']}")


def usage(prompt: int, completion: int) -> dict:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def test_a_token_budget_stops_the_agent_at_the_gateway_after_the_call_that_crossed_it(tmp_path, monkeypatch):
    on_path(monkeypatch, command_agent(tmp_path, [{"calls": 5, "write": {"hello.py": "print('hello')\n"}}]))
    jobs = jobs_with_agent(tmp_path, "command", agent_command=["my-agent", "{prompt_file}"])
    assert logist_cli("job", "set", JOB, "--max-tokens", "150").returncode == 0
    script = [Reply(content="ok", usage=usage(40, 10)) for _ in range(5)]
    with ScriptedLLMServer(script) as endpoint:
        done = logist_cli("job", "run", JOB, "--base-url", endpoint.base_url, env=KEY_ENV)
        forwarded = len(endpoint.requests)
    assert done.returncode == 4, done.stderr  # stopped at a spent budget
    job = job_of(jobs)
    [run] = agent_entries(job)
    # 50, 100, 150 tokens: the third call crossed the budget and is recorded; the fourth was refused.
    assert forwarded == 3
    assert [call.number for call in run.agent.calls] == [1, 2, 3]
    assert run.usage.prompt_tokens == 120 and run.usage.completion_tokens == 30
    assert "token budget spent (150 of 150 tokens)" in run.agent.budget_stop
    assert run.agent.exit_code == 1 and "Logist stopped this run at its budget" in run.agent.stderr_tail
    manifest = job.manifest()
    assert str(manifest.status) == "INTERVENTION_REQUIRED" and job.stopped_by_budget(manifest)
    assert manifest.totals.tokens == 150 and manifest.totals.llm_calls == 3
    assert "raise it: logist job set" in job.raise_hint(manifest)
    transcript = (jobs / JOB / "transcript.md").read_text()
    assert "Stopped at the gateway: token budget spent" in transcript
    assert f"- call 3: chat, HTTP 200, 40 tokens in, 10 out, `{run.agent.calls[2].file}`" in transcript
    assert run.agent.calls[2].file == f"agent_runs/{run.sequence:04d}/call-003.json"


def test_a_kill_during_the_agents_run_leaves_no_agent_and_the_next_command_records_its_calls(tmp_path, monkeypatch):
    folder = command_agent(tmp_path, [{"calls": 1, "write": {"partial.txt": "half done\n"}, "sleep": 120},
                                      {"calls": 1, "write": {"hello.py": "print('hello')\n"}}])
    on_path(monkeypatch, folder)
    jobs = jobs_with_agent(tmp_path, "command", agent_command=["my-agent", "{prompt_file}"])
    with ScriptedLLMServer(["first", "second", SUPERVISOR_OK]) as endpoint:
        env = {**os.environ, **KEY_ENV}
        runner = subprocess.Popen([sys.executable, "-m", "logist", "job", "run", JOB, "--base-url",
                                   endpoint.base_url], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            workspace = jobs / JOB / "workspace"
            assert wait_for(lambda: (workspace / "partial.txt").exists() and (folder / "runs").exists(), 60), \
                "the agent did not start its work"
            assert (jobs / JOB / "agent_runs" / "0002" / "call-001.json").exists()
        finally:
            runner.send_signal(signal.SIGKILL)
            runner.wait(30)
        # The agent dies with its runner (the sandbox's launcher dies with Logist, and its group with it).
        assert wait_for(lambda: not processes_running(str(folder / "my-agent")), 15)
        again = logist_cli("job", "run", JOB, "--base-url", endpoint.base_url, env=KEY_ENV)
        forwarded = len(endpoint.requests)
    assert again.returncode == 3, again.stderr
    job = job_of(jobs)
    killed, finished = agent_entries(job)
    assert killed.response.status == "UNKNOWN" and killed.agent.interrupted
    assert [call.file for call in killed.agent.calls] == ["agent_runs/0002/call-001.json"]
    assert killed.usage.prompt_tokens == killed.agent.calls[0].input_tokens
    # What the killed run wrote was undone; the next run's work is the step's.
    assert finished.response.actions == ["COMPLETED"] and finished.response.files_changed == ["hello.py"]
    assert not (job.workspace / "partial.txt").exists()
    tree = subprocess.run(["git", "ls-tree", "--name-only", finished.workspace_commit], cwd=job.workspace,
                          capture_output=True, text=True, check=True).stdout.split()
    assert tree == ["hello.py"]
    # Every call the gateway forwarded is in the history: the killed run's, the next run's, the Supervisor's.
    assert len(killed.agent.calls) + len(finished.agent.calls) + 1 == forwarded == 3
    assert job.manifest().totals.llm_calls == forwarded
    # The report shows both runs and their calls.
    assert logist_cli("job", "report", JOB).returncode == 0
    report = (jobs / JOB / "report.html").read_text()
    assert "The agent <code>command</code> ran (interrupted), 1 model call through the gateway" in report
    assert "The agent <code>command</code> ran (exit 0), 1 model call through the gateway" in report


def test_replay_of_an_agent_job_without_the_agent_makes_the_same_commit_at_each_step(tmp_path, monkeypatch):
    folder = command_agent(tmp_path, [
        {"calls": 1, "write": {"hello.py": "print('hello')\n", "blob.bin": "\x00\xff\x10binary\x00"}},
        {"calls": 2, "write": {"notes.txt": "done\n", "blob.bin": None, "hello.py": "print('hello, world')\n"}}])
    on_path(monkeypatch, folder)
    jobs = jobs_with_agent(tmp_path, "command", agent_command=["my-agent", "{prompt_file}"])
    with ScriptedLLMServer(["a", SUPERVISOR_RETRY, "b", "c", SUPERVISOR_OK]) as endpoint:
        done = logist_cli("job", "run", JOB, "--base-url", endpoint.base_url, env=KEY_ENV)
    assert done.returncode == 3, done.stderr
    recorded = job_of(jobs)
    assert len(agent_entries(recorded)) == 2
    # The agent is gone from PATH, and no endpoint is given: the replay applies what was recorded.
    monkeypatch.setenv("PATH", os.environ["PATH"].replace(f"{folder}:", ""))
    assert subprocess.run(["which", "my-agent"], capture_output=True).returncode != 0
    assert logist_cli("job", "create", "copy", "-o", "Create hello.py that prints hello.", "--worker",
                      "Coder").returncode == 0
    replayed = logist_cli("job", "replay", "copy", "--history", str(recorded.history_path))
    assert replayed.returncode == 3, replayed.stderr
    copy = logist.open(jobs).get("copy")

    def trees(job) -> list[str]:
        return [subprocess.run(["git", "rev-parse", f"{entry.workspace_commit}^{{tree}}"], cwd=job.workspace,
                               capture_output=True, text=True, check=True).stdout.strip()
                for entry in job.history()]

    assert trees(copy) == trees(recorded) and len(set(trees(recorded))) == 3  # baseline, then each agent step
    replays = [entry for entry in copy.history() if entry.agent is not None]
    assert [entry.kind for entry in replays] == ["replay", "replay"]
    assert (copy.workspace / "notes.txt").read_text() == "done\n" and not (copy.workspace / "blob.bin").exists()
    # A live replay (each call made again against a replay server) cannot make an agent's run again: refused in
    # one line naming what to do instead, before anything is applied.
    assert logist_cli("job", "create", "live", "-o", "Create hello.py that prints hello.", "--worker",
                      "Coder").returncode == 0
    live = logist.open(jobs).get("live")
    with pytest.raises(LogistError) as refused:
        live.replay(recorded.history_path, base_url="http://127.0.0.1:9/v1")
    assert str(refused.value).startswith("history entry 2 is a run of the coding agent 'command', which a live replay "
                                         "cannot make again") and "logist job replay JOB --history FILE" in str(refused.value)
    assert "\n" not in str(refused.value)
    assert [entry.kind for entry in live.history()] == ["user_action"] and str(live.status) == "PENDING"


def test_commits_the_agent_makes_itself_are_folded_into_the_steps_commit(tmp_path, monkeypatch):
    on_path(monkeypatch, command_agent(tmp_path, [{"calls": 1, "write": {"hello.py": "print('hello')\n"},
                                                   "commit": True}]))
    # Without the sandbox's mounts the workspace's .git is writable to the agent.
    jobs = jobs_with_agent(tmp_path, "command", "--command-sandbox", "none",
                           agent_command=["my-agent", "{prompt_file}"])
    with ScriptedLLMServer(["ok", SUPERVISOR_OK]) as endpoint:
        done = logist_cli("job", "run", JOB, "--base-url", endpoint.base_url, env=KEY_ENV)
    assert done.returncode == 3, done.stderr
    job = job_of(jobs)
    [run] = agent_entries(job)
    assert run.agent.commits is not None and run.response.files_changed == ["hello.py"]

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=job.workspace, capture_output=True, text=True,
                              check=True).stdout.strip()

    baseline = job.entry(1).workspace_commit
    assert git("rev-parse", f"{run.workspace_commit}^") == baseline  # one step, one commit
    assert git("log", "-1", "--format=%s", run.workspace_commit).startswith(f"logist: {JOB} entry {run.sequence} Coder")
    assert git("show", f"{run.workspace_commit}:hello.py") == "print('hello')"
    kept = git("rev-parse", f"refs/logist/agent/{run.sequence}")
    assert git("log", "-1", "--format=%s", kept) == "the agent's own commit"


def test_an_agent_that_is_not_installed_changes_nothing(tmp_path):
    jobs = jobs_with_agent(tmp_path, "command", agent_command=["no-such-agent-program", "{prompt_file}"])
    (jobs / JOB / "workspace" / "by-hand.txt").write_text("a person's edit\n")
    with ScriptedLLMServer([]) as endpoint:
        done = logist_cli("job", "step", JOB, "--base-url", endpoint.base_url, env=KEY_ENV)
        assert endpoint.requests == []
    assert done.returncode == 1
    assert "cannot run the agent 'command': no program 'no-such-agent-program' on PATH" in done.stderr
    job = job_of(jobs)
    assert [entry.kind for entry in job.history()] == ["user_action"] and str(job.status) == "PENDING"
    assert job.unrecorded_step() is None
    status = subprocess.run(["git", "status", "--porcelain"], cwd=job.workspace, capture_output=True, text=True)
    assert status.stdout.strip() == "?? by-hand.txt"  # not committed by a step that did not happen


def test_the_roles_call_cap_stops_the_agent_at_the_gateway(tmp_path, monkeypatch):
    on_path(monkeypatch, command_agent(tmp_path, [{"calls": 5}]))
    jobs = jobs_with_agent(tmp_path, "command", agent_command=["my-agent", "{prompt_file}"], agent_max_calls=2)
    with ScriptedLLMServer(["one", "two", "three"]) as endpoint:
        done = logist_cli("job", "run", JOB, "--base-url", endpoint.base_url, env=KEY_ENV)
        forwarded = len(endpoint.requests)
    assert done.returncode == 4, done.stderr
    [run] = agent_entries(job_of(jobs))
    assert forwarded == 2 and len(run.agent.calls) == 2
    assert run.agent.budget_stop == "the agent's call limit reached (2 of 2 calls: the role's agent_max_calls)"
    assert run.response.status == "FAILED" and str(job_of(jobs).status) == "INTERVENTION_REQUIRED"


@pytest.mark.parametrize("point", ["after_call", "after_history"])
def test_a_crash_after_the_agents_run_is_finished_by_the_next_command_without_running_it_again(point, tmp_path,
                                                                                               monkeypatch):
    folder = command_agent(tmp_path, [{"calls": 1, "write": {"hello.py": "print('hello')\n"}}])
    on_path(monkeypatch, folder)
    jobs = jobs_with_agent(tmp_path, "command", agent_command=["my-agent", "{prompt_file}"])
    with ScriptedLLMServer(["ok", SUPERVISOR_OK]) as endpoint:
        crashed = subprocess.run([sys.executable, "-m", "logist", "job", "step", JOB, "--oneshot", "--base-url",
                                  endpoint.base_url], env={**os.environ, **KEY_ENV, "LOGIST_FAILPOINT": point},
                                 capture_output=True, text=True, timeout=120)
        assert crashed.returncode == -signal.SIGKILL, crashed.stderr
        done = logist_cli("job", "run", JOB, "--base-url", endpoint.base_url, env=KEY_ENV)
    assert done.returncode == 3, done.stderr
    assert len((folder / "runs").read_text().split()) == 1  # the agent ran once
    job = job_of(jobs)
    [run] = agent_entries(job)
    assert run.response.actions == ["COMPLETED"] and run.response.files_changed == ["hello.py"]
    assert committed(job, run.workspace_commit, "hello.py") == "print('hello')\n"
    assert subprocess.run(["git", "rev-list", "--count", run.workspace_commit], cwd=job.workspace,
                          capture_output=True, text=True).stdout.strip() == "2"  # the baseline, then the step
    assert job.manifest().totals.llm_calls == 2 and job.entry(run.sequence + 1).role == "Supervisor"


def test_the_agents_prompt_ends_with_its_exit_command_not_the_json_protocols_answer(tmp_path):
    jobs = jobs_with_agent(tmp_path, "command", agent_command=["my-agent", "{prompt_file}"])
    shown = logist_cli("job", "preview", JOB)
    assert shown.returncode == 0, shown.stderr
    assert "end with an exit command" in shown.stdout  # the system message: how the run ends
    assert "When you are done, end with the exit command described above." in shown.stdout
    assert "Answer with one JSON object as the protocol describes." not in shown.stdout
    # A role that is a model, in the same jobs directory, is still asked for its answer.
    (jobs / "roles" / "Coder.json").write_text(json.dumps({
        "name": "Coder", "description": "a model", "instructions": "Do the job's work.", "llm_model": "scripted"}))
    assert "Answer with one JSON object as the protocol describes." in logist_cli("job", "preview", JOB).stdout
