"""The ``logist`` command line as a user meets it: the real program (its entry
point, run in the test's process, or ``python -m logist`` where a process of
its own matters: tests/conftest.py), or click's CliRunner on the command
group, against a real OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import json
import re
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from logist.store.session import JobFiles
from logist.engine.create import create_job
from logist.engine.step import post_answer
from logist.cli import cli
from logist.replay.scripted import Reply, ScriptedLLMServer, answer

from conftest import CANARY_KEY, logist_cli, write_config

REPO_ROOT = Path(__file__).resolve().parents[2]
WORDCOUNT_HISTORY = REPO_ROOT / "fixtures" / "wordcount" / "jobHistory.json"




WRITE_HELLO = answer(
    "COMPLETED", "Wrote hello.py.", ["hello.py"],
    file_changes=[{"path": "hello.py", "content": "print('Hello')\n"}],
)
APPROVE_HELLO = answer("COMPLETED", "hello.py prints Hello; criterion met.", ["hello.py"])


def ok(result: subprocess.CompletedProcess, code: int = 0) -> subprocess.CompletedProcess:
    assert result.returncode == code, f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert "Traceback" not in result.stderr
    return result


def create_hello(job_id="hello", env=None) -> subprocess.CompletedProcess:
    return ok(logist_cli(
        "job", "create", job_id, "-o", "Write hello.py that prints a greeting", "-d", "Use plain Python.",
        "-a", "python hello.py prints Hello", "-a", "no third-party packages", env=env,
    ))


def git(workspace: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=workspace, capture_output=True, text=True, check=True).stdout


def free_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def invoke(*args: str):
    """CliRunner on the click group (not the program's entry point), 100 columns wide."""
    return CliRunner(env={"COLUMNS": "100"}).invoke(cli, list(args), prog_name="logist", terminal_width=100)


# 1. A whole job through the CLI ---------------------------------------------------


def test_whole_job_through_the_cli(jobs, llm):
    created = create_hello()
    assert created.stdout == ""
    assert "Created job 'hello'" in created.stderr and "PENDING" in created.stderr

    status = ok(logist_cli("job", "status", "hello"))
    assert "Status:  PENDING" in status.stdout and "Role:    Worker" in status.stdout
    assert "Steps:   0 of 100 used" in status.stdout and "Entry:   1 " in status.stdout

    preview = ok(logist_cli("job", "preview", "hello"))
    assert "===== system =====" in preview.stdout
    assert "--- Role: Worker ---" in preview.stdout
    assert "Write hello.py that prints a greeting" in preview.stdout
    assert "no third-party packages" in preview.stdout
    assert preview.stdout.rstrip().endswith("[Step 1 of 100]")
    assert llm.requests == [], "preview makes no call"

    llm.add(WRITE_HELLO, APPROVE_HELLO)
    run = ok(logist_cli("job", "run", "hello", "--base-url", llm.base_url), code=3)  # waits for approval
    assert run.stdout == "", "progress goes to stderr"
    assert "#2 Worker COMPLETED -> REVIEWING [hello.py]" in run.stderr
    assert "#3 Supervisor COMPLETED -> APPROVAL_REQUIRED" in run.stderr
    assert "Job 'hello' is APPROVAL_REQUIRED: approve it (logist job approve)" in run.stderr
    assert len(llm.requests) == 2
    # The system prompt preview showed is the one the server received.
    assert llm.requests[0]["messages"][0]["content"] in preview.stdout
    workspace = jobs.path / "hello" / "workspace"
    assert (workspace / "hello.py").read_text() == "print('Hello')\n"

    history = ok(logist_cli("job", "history", "hello", env={"COLUMNS": "200"}))  # wide: every column
    header, *lines = history.stdout.splitlines()
    assert header.split() == ["seq", "time", "(UTC)", "role", "action", "state", "after", "tokens", "cost", "commit", "summary"]
    assert len(lines) == 3
    assert lines[0].split()[:5] == ["1", lines[0].split()[1], "person", "create", "PENDING"]
    assert "Worker" in lines[1] and "COMPLETED" in lines[1] and "REVIEWING" in lines[1] and "Wrote hello.py." in lines[1]
    assert "Supervisor" in lines[2] and "APPROVAL_REQUIRED" in lines[2]
    tokens = [int(line.split()[5]) for line in lines[1:]]
    assert all(t > 0 for t in tokens), "each call's tokens are shown"

    history_json = ok(logist_cli("job", "history", "hello", "--json"))
    entries = json.loads(history_json.stdout)  # stdout is JSON and nothing else
    assert [e["sequence"] for e in entries] == list(range(1, len(entries) + 1)) == [1, 2, 3]
    assert [e["state_after"] for e in entries] == ["PENDING", "REVIEWING", "APPROVAL_REQUIRED"]
    assert entries[1]["response"]["raw_response"] == WRITE_HELLO
    assert history_json.stderr == ""

    show = json.loads(ok(logist_cli("job", "show", "hello", "--json")).stdout)
    assert show["job_id"] == "hello" and show["status"] == "APPROVAL_REQUIRED"
    assert show["acceptance_criteria"] == ["python hello.py prints Hello", "no third-party packages"]
    assert show["details"] == "Use plain Python."
    assert show["workspace_commit"] == git(workspace, "rev-parse", "HEAD").strip()

    approve = ok(logist_cli("job", "approve", "hello"))
    assert "Job 'hello' is now SUCCESS." in approve.stderr and approve.stdout == ""
    assert json.loads(ok(logist_cli("job", "status", "hello", "--json")).stdout)["status"] == "SUCCESS"

    listing = ok(logist_cli("job", "list"))
    assert listing.stdout.splitlines()[0].split()[:3] == ["*", "hello", "SUCCESS"]
    listing_json = json.loads(ok(logist_cli("job", "list", "--json")).stdout)
    assert listing_json["current_job_id"] == "hello"
    assert [(j["job_id"], j["status"]) for j in listing_json["jobs"]] == [("hello", "SUCCESS")]


def test_run_json_prints_only_json_on_stdout(jobs, llm):
    create_hello()
    llm.add(WRITE_HELLO, APPROVE_HELLO)
    run = ok(logist_cli("job", "run", "--json", "--base-url", llm.base_url), code=3)  # the current job
    data = json.loads(run.stdout)
    assert [(r["role"], r["action"], r["status"]) for r in data] == [
        ("Worker", "COMPLETED", "REVIEWING"), ("Supervisor", "COMPLETED", "APPROVAL_REQUIRED"),
    ]
    assert "#2 Worker COMPLETED" in run.stderr


# 2. Secrets ------------------------------------------------------------------------


def _all_bytes(root: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in root.rglob("*") if p.is_file() and not p.is_symlink()}


@pytest.mark.parametrize("key_variable", ["LOGIST_API_KEY", "OPENAI_API_KEY"])
def test_api_key_never_leaks(jobs, llm, key_variable):
    write_config(jobs, max_retries=1)
    env = {key_variable: CANARY_KEY}
    outputs: list[subprocess.CompletedProcess] = []

    def run(*args):
        result = logist_cli(*args, env=env)
        outputs.append(result)
        return result

    # A whole job, with every command that shows data.
    ok(run("job", "create", "hello", "-o", "Write hello.py that prints a greeting", "-a", "prints Hello"))
    ok(run("job", "preview", "hello"))
    llm.add(WRITE_HELLO, APPROVE_HELLO)
    assert json.loads(ok(run("job", "run", "hello", "--json", "--base-url", llm.base_url), code=3).stdout)[-1]["status"] == "APPROVAL_REQUIRED"
    for args in (("job", "history", "hello", "--json"), ("job", "show", "hello", "--json"),
                 ("job", "status", "hello"), ("job", "approve", "hello"), ("job", "list", "--json")):
        ok(run(*args))

    # The key was really sent.
    assert len(llm.headers) == 2
    for headers in llm.headers:
        auth = {k.lower(): v for k, v in headers.items()}["authorization"]
        assert auth == f"Bearer {CANARY_KEY}"

    # A server refusing the key.
    with ScriptedLLMServer([Reply(status=401, error_message="Incorrect API key provided")]) as refusing:
        ok(run("job", "create", "refused", "-o", "Anything"))
        # Exit 1, the job as it was: a refused key is a setup error, no call was made.
        refused = ok(run("job", "step", "refused", "--oneshot", "--base-url", refusing.base_url), code=1)
        assert "after 1 attempt: HTTP 401" in refused.stderr and "nothing was recorded" in refused.stderr
        assert {k.lower(): v for k, v in refusing.headers[0].items()}["authorization"] == f"Bearer {CANARY_KEY}"
    status = json.loads(ok(run("job", "status", "refused", "--json")).stdout)
    assert status["status"] == "PENDING"
    ok(run("job", "history", "refused"))

    # Nothing listening.
    ok(run("job", "create", "closed", "-o", "Anything"))
    closed = ok(run("job", "step", "closed", "--oneshot", "--base-url", f"http://127.0.0.1:{free_port()}/v1"), code=1)
    assert "cannot connect: connection refused" in closed.stderr
    status = json.loads(ok(run("job", "status", "closed", "--json")).stdout)
    assert status["status"] == "PENDING"

    for result in outputs:
        assert CANARY_KEY not in result.stdout, result.args
        assert CANARY_KEY not in result.stderr, result.args

    files = _all_bytes(jobs.path)
    assert any(p.name == "jobHistory.json" for p in files)
    leaking = [str(p) for p, data in files.items() if CANARY_KEY.encode() in data]
    assert leaking == []

    for job_id in ("hello", "refused", "closed"):
        workspace = jobs.path / job_id / "workspace"
        objects = subprocess.run(
            ["git", "cat-file", "--batch-all-objects", "--batch"], cwd=workspace, capture_output=True, check=True,
        ).stdout
        assert objects, "the workspace has git objects to search"
        assert CANARY_KEY.encode() not in objects
        log = subprocess.run(["git", "log", "--all", "-p"], cwd=workspace, capture_output=True, check=True).stdout
        assert CANARY_KEY.encode() not in log
    assert b"print('Hello')" in subprocess.run(
        ["git", "cat-file", "--batch-all-objects", "--batch"], cwd=jobs.path / "hello" / "workspace",
        capture_output=True, check=True,
    ).stdout, "the search really reads object contents"


# 3. Start-up imports ------------------------------------------------------------------

_IMPORTS_SCRIPT = """
import json, sys
sys.argv = ["logist", *json.loads(sys.argv[1])]
import logist.cli
try:
    logist.cli.main()
except SystemExit:
    pass
names = ("openai", "git", "httpx", "httpx2", "jsonschema", "yaml")
print("MODULES " + json.dumps({n: n in sys.modules for n in names}))
"""


@pytest.mark.parametrize("argv", [["--help"], ["job", "status"]], ids=["help", "job-status"])
def test_startup_imports_neither_openai_nor_git(jobs, argv):
    create_job(jobs, "hello", "Write hello.py that prints a greeting")
    result = subprocess.run(
        [sys.executable, "-c", _IMPORTS_SCRIPT, json.dumps(argv)], capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 0, result.stderr
    last = result.stdout.splitlines()[-1]
    # The command really ran.
    assert ("Usage: logist" in result.stdout) if argv == ["--help"] else ("Status:  PENDING" in result.stdout)
    modules = json.loads(last.removeprefix("MODULES "))
    print(f"modules imported by logist {' '.join(argv)}: {modules}")
    assert modules["openai"] is False
    assert modules["git"] is False
    assert modules["yaml"] is False, "YAML is parsed only by logist.store.yaml_text, which imports PyYAML when it parses"


_LOADED_SCRIPT = """
import json, sys
sys.argv = ["logist", *json.loads(sys.argv[1])]
import logist.__main__
try:
    logist.__main__.main()
except SystemExit:
    pass
print("MODULES " + json.dumps(sorted(sys.modules)))
"""


@pytest.mark.parametrize("argv", [["--help"], ["--version"], ["job", "--help"]], ids=["help", "version", "job-help"])
def test_help_and_version_load_no_command_nor_pydantic_openai_or_the_engine(argv):
    result = subprocess.run([sys.executable, "-c", _LOADED_SCRIPT, json.dumps(argv)], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    assert ("logist, version" in result.stdout) if argv == ["--version"] else ("Commands:" in result.stdout)
    modules = json.loads(result.stdout.splitlines()[-1].removeprefix("MODULES "))
    heavy = [name for name in modules if name.split(".")[0] in ("pydantic", "pydantic_core", "openai", "httpx", "httpx2")
             or name.startswith(("logist.engine", "logist.store", "logist.api", "logist.cli.app", "logist.cli.job."))]
    assert heavy == [], f"logist {' '.join(argv)} imported {heavy}"


@pytest.mark.parametrize("width", [40, 80, 200])
@pytest.mark.parametrize("group", ["logist", "job"])
def test_the_listing_of_help_is_what_click_makes_of_the_commands_themselves(group, width):
    """The lazily loaded groups list their commands from logist/cli/listing.py
    (generated; python -m logist.docs_pages --check finds it stale): the same
    lines click writes from the loaded commands, at any width."""
    ctx = click.Context(cli, info_name="logist")
    lazy = cli if group == "logist" else cli.get_command(ctx, group)
    if group != "logist":
        ctx = click.Context(lazy, info_name=group, parent=ctx)
    listed, loaded = click.HelpFormatter(width=width), click.HelpFormatter(width=width)
    lazy.format_commands(ctx, listed)
    click.Group.format_commands(lazy, ctx, loaded)  # loads every command
    assert listed.getvalue() == loaded.getvalue()
    assert "Commands:" in listed.getvalue()


# 4. Errors ------------------------------------------------------------------------------


def assert_error(result: subprocess.CompletedProcess, *needles: str, code: int = 1) -> str:
    """One clear ``Error:`` line on stderr, the exit code, no traceback, no stdout."""
    assert result.returncode == code, f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert "Traceback" not in result.stderr
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    errors = [line for line in lines if line.startswith("Error:")]
    assert len(errors) == 1, result.stderr
    if code == 1:
        assert lines == errors, f"more than the one line:\n{result.stderr}"
    for needle in needles:
        assert needle in errors[0]
    return errors[0]


def test_error_unknown_job(jobs):
    assert_error(logist_cli("job", "status", "nosuch"), "no job 'nosuch'", code=2)


def test_error_approve_pending_names_the_state(jobs):
    create_hello()
    assert_error(logist_cli("job", "approve", "hello"), "PENDING", "approve")


def test_step_waiting_for_approval_names_the_state_and_exits_3(jobs, llm):
    job = create_job(jobs, "hello", "Write hello.py that prints a greeting")
    post_answer(job, WRITE_HELLO)
    post_answer(job, APPROVE_HELLO)
    result = ok(logist_cli("job", "step", "hello", "--base-url", llm.base_url), code=3)
    assert result.stderr.startswith("Job 'hello' is APPROVAL_REQUIRED: approve it") and len(result.stderr.splitlines()) == 1
    assert llm.requests == [], "refused before any call"
    assert job.manifest().status == "APPROVAL_REQUIRED"


def test_error_reject_without_feedback_is_a_usage_error(jobs):
    create_hello()
    assert_error(logist_cli("job", "reject", "hello"), "--feedback", code=2)


def test_error_invalid_job_id(jobs):
    assert_error(logist_cli("job", "create", "bad id!", "-o", "x"), "invalid job id", "'bad id!'", code=2)
    assert not (jobs.path / "bad id!").exists()


@pytest.mark.parametrize("job_id", ["a..b", "a.", "a.lock", "v1..2.lock"])
def test_a_job_id_git_refuses_for_a_branch_is_refused_first(jobs, job_id):
    """The id names the branch logist/<id>: an id git refuses failed in git init, after the folder was made."""
    assert_error(logist_cli("job", "create", job_id, "-o", "x"), "invalid job id", "not ending in '.' or '.lock'", code=2)
    assert sorted(p.name for p in jobs.path.iterdir() if p.is_dir()) == ["roles", "skills"]


def test_every_job_id_is_a_branch_name_git_takes(jobs):
    import subprocess

    for job_id in ("a", "a.b", "a-b_c.d.e", "A9", "x" * 64, "a.lock.b", "a.locks"):
        assert logist_cli("job", "create", job_id, "-o", "x").returncode == 0, job_id
        branch = subprocess.run(["git", "branch", "--show-current"], cwd=jobs.path / job_id / "workspace",
                                capture_output=True, text=True).stdout.strip()
        assert branch == f"logist/{job_id}"


def test_error_from_repo_not_a_repository(jobs, tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    assert_error(logist_cli("job", "create", "cloned", "-o", "x", "--from-repo", str(plain)), "not a git repository", str(plain))
    assert not (jobs.path / "cloned").exists()
    assert "cloned" not in json.loads((jobs.path / "jobs_index.json").read_text())["jobs"]


def test_error_bad_role_manifest_names_file_and_field(jobs):
    bad = jobs.path / "roles" / "bad.json"
    bad.write_text(json.dumps({"name": "Bad", "description": "d", "instructions": "i"}))
    line = assert_error(logist_cli("role", "inspect", "Bad"), str(bad), "llm_model")
    assert "required" in line
    listing = ok(logist_cli("role", "list"))  # the others are listed; the bad one is named on stderr
    assert "Worker" in listing.stdout and "Bad" not in listing.stdout
    assert listing.stderr.startswith(f"Not loaded: role manifest {bad}: llm_model: Field required")


def test_error_corrupt_config(jobs):
    (jobs.path / "config.json").write_text("{not json")
    assert_error(logist_cli("job", "create", "hello", "-o", "x"), "config.json")
    assert not (jobs.path / "hello").exists()


def test_error_poststep_with_two_responses(jobs, tmp_path):
    create_hello()
    answer_file = tmp_path / "answer.json"
    answer_file.write_text(WRITE_HELLO)
    assert_error(
        logist_cli("job", "poststep", "hello", "--response-string", WRITE_HELLO, "--response-file", str(answer_file)),
        "exactly one", code=2,
    )
    assert json.loads(ok(logist_cli("job", "status", "hello", "--json")).stdout)["calls"] == 0


def test_error_poststep_from_history_entry_that_is_not_a_call(jobs):
    create_hello()
    history = jobs.path / "hello" / "jobHistory.json"
    assert_error(logist_cli("job", "poststep", "hello", "--from-history", str(history), "--index", "1"), "entry 1", "not an LLM call")


def test_debug_shows_the_traceback(jobs):
    result = logist_cli("job", "status", "nosuch", env={"LOGIST_DEBUG": "1"})
    assert result.returncode != 0
    assert "Traceback" in result.stderr
    assert "NoSuchNameError: no job 'nosuch'" in result.stderr


# 5. Roles -----------------------------------------------------------------------------------


def test_role_list_and_inspect_builtins(jobs):
    listing = invoke("role", "list")
    assert listing.exit_code == 0, listing.output
    names = [line.split()[0] for line in listing.stdout.splitlines()]
    assert {"Worker", "Supervisor", "Planner"} <= set(names)

    inspected = invoke("role", "inspect", "Worker", "--json")
    assert inspected.exit_code == 0, inspected.output
    data = json.loads(inspected.stdout)
    assert data["name"] == "Worker"
    for field in ("name", "description", "instructions", "llm_model"):
        assert isinstance(data[field], str) and data[field]


def test_jobs_dir_roles_override_and_yaml(jobs):
    builtin_model = json.loads(invoke("role", "inspect", "Worker", "--json").stdout)["llm_model"]
    (jobs.path / "roles" / "my-worker.json").write_text(json.dumps({
        "name": "Worker", "description": "A local Worker", "instructions": "Work locally.", "llm_model": "local-model-7b",
    }))
    (jobs.path / "roles" / "reviewer.yaml").write_text(
        "name: Reviewer\n"
        "description: Reviews like a hawk\n"
        "instructions: |\n  Check every criterion twice.\n"
        "llm_model: yaml-model\n"
        "temperature: 0.1\n"
    )
    assert builtin_model != "local-model-7b"

    listing = invoke("role", "list", "--json")
    assert listing.exit_code == 0, listing.output
    roles = {r["name"]: r for r in json.loads(listing.stdout)}
    assert roles["Worker"]["llm_model"] == "local-model-7b"
    assert roles["Worker"]["source"].endswith("my-worker.json")
    assert roles["Reviewer"]["llm_model"] == "yaml-model"
    assert {"Supervisor", "Planner"} <= set(roles)

    reviewer = json.loads(invoke("role", "inspect", "Reviewer", "--json").stdout)
    assert reviewer["instructions"] == "Check every criterion twice." and reviewer["temperature"] == 0.1

    # Jobs use them.
    created = invoke("job", "create", "hello", "-o", "Write hello.py", "--supervisor", "Reviewer")
    assert created.exit_code == 0, created.output
    preview = json.loads(invoke("job", "preview", "hello", "--json").stdout)
    assert preview["model"] == "local-model-7b"
    assert "Work locally." in preview["messages"][0]["content"]


# 6. poststep and replay ---------------------------------------------------------------------------


def test_poststep_string_and_file(jobs, tmp_path):
    create_hello()
    first = ok(logist_cli("job", "poststep", "hello", "--response-string", WRITE_HELLO))
    assert "#2 Worker COMPLETED -> REVIEWING [hello.py]" in first.stderr
    workspace = jobs.path / "hello" / "workspace"
    assert (workspace / "hello.py").read_text() == "print('Hello')\n"

    answer_file = tmp_path / "supervisor.json"
    answer_file.write_text(APPROVE_HELLO)
    second = ok(logist_cli("job", "poststep", "hello", "--response-file", str(answer_file), "--json"), code=3)
    data = json.loads(second.stdout)
    assert [(r["role"], r["status"]) for r in data] == [("Supervisor", "APPROVAL_REQUIRED")]

    entries = JobFiles(jobs.path / "hello").load_history().interactions
    assert [e.response.raw_response for e in entries if e.kind == "poststep"] == [WRITE_HELLO, APPROVE_HELLO]
    assert all(e.kind != "llm_call" for e in entries), "a posted answer is not recorded as a call"
    assert int(git(workspace, "rev-list", "--count", "HEAD")) == 2


def test_poststep_from_a_live_history(jobs, llm):
    create_hello("live")
    llm.add(WRITE_HELLO, APPROVE_HELLO)
    ok(logist_cli("job", "run", "live", "--base-url", llm.base_url), code=3)
    recorded = jobs.path / "live" / "jobHistory.json"
    worker_call = next(
        e for e in json.loads(recorded.read_text())["interactions"] if e["kind"] == "llm_call" and e["role"] == "Worker"
    )

    create_hello("posted")
    result = ok(logist_cli("job", "poststep", "posted", "--from-history", str(recorded), "--index", str(worker_call["sequence"])))
    assert "Worker COMPLETED -> REVIEWING" in result.stderr
    assert (jobs.path / "posted" / "workspace" / "hello.py").read_text() == "print('Hello')\n"
    posted = JobFiles(jobs.path / "posted").load_history().interactions[-1]
    assert posted.response.raw_response == worker_call["response"]["raw_response"]
    assert len(llm.requests) == 2, "poststep calls no LLM"


def test_replay_the_wordcount_fixture(jobs):
    fixture = json.loads(WORDCOUNT_HISTORY.read_text())
    ok(logist_cli("job", "create", "wc", "-o", "Write wordcount.py"))
    result = ok(logist_cli("job", "replay", "wc", "--history", str(WORDCOUNT_HISTORY)), code=3)
    assert "Replayed 4 entries." in result.stderr and "Job 'wc' is APPROVAL_REQUIRED: approve it" in result.stderr
    status = json.loads(ok(logist_cli("job", "status", "wc", "--json")).stdout)
    assert status["status"] == "APPROVAL_REQUIRED"
    workspace = jobs.path / "wc" / "workspace"
    assert "def count_words" in (workspace / "wordcount.py").read_text()

    def raw_responses(entries, kind):
        return [e["response"]["raw_response"] for e in entries if e["kind"] == kind]

    replayed = json.loads((jobs.path / "wc" / "jobHistory.json").read_text())["interactions"]
    assert raw_responses(replayed, "replay") == raw_responses(fixture["interactions"], "llm_call")
    assert raw_responses(replayed, "llm_call") == [], "replayed answers are not recorded as calls"
    assert len(raw_responses(replayed, "replay")) == 4
    assert [e["state_after"] for e in replayed] == [e["state_after"] for e in fixture["interactions"]]


# 7. The demo ---------------------------------------------------------------------------------------


def _can_unshare_network() -> bool:
    unshare = shutil.which("unshare")
    return bool(unshare) and subprocess.run([unshare, "-rn", "true"], capture_output=True).returncode == 0


def _offline(argv: list[str]) -> list[str]:
    """``argv`` in a network namespace with only loopback, when the system allows it."""
    if _can_unshare_network() and shutil.which("ip"):
        return ["unshare", "-rn", "sh", "-c", 'ip link set lo up && exec "$@"', "sh", *argv]
    return argv


def test_demo_runs_offline_without_a_key(jobs):
    env = dict(os.environ)
    # Anything not on 127.0.0.1 would go to a dead proxy, should the namespace be unavailable.
    env.update(HTTP_PROXY="http://127.0.0.1:9", HTTPS_PROXY="http://127.0.0.1:9", NO_PROXY="127.0.0.1,localhost",
               OPENAI_BASE_URL=f"http://127.0.0.1:{free_port()}/v1")
    assert not any(k in env for k in ("LOGIST_API_KEY", "OPENAI_API_KEY"))
    demo = subprocess.run(_offline([sys.executable, "-m", "logist", "demo"]), capture_output=True, text=True, env=env, timeout=120)
    ok(demo)
    job_dir = jobs.path / "demo"
    assert "Job 'demo' is APPROVAL_REQUIRED" in demo.stdout, "the summary is data: stdout"
    assert "#5 Supervisor" in demo.stderr, "the progress is chatter: stderr"
    assert str(job_dir) in demo.stderr + demo.stdout

    approve = ok(logist_cli("job", "approve", "demo"))
    assert "SUCCESS" in approve.stderr
    assert json.loads(ok(logist_cli("job", "status", "demo", "--json")).stdout)["status"] == "SUCCESS"
    workspace = job_dir / "workspace"
    assert int(git(workspace, "rev-list", "--count", "HEAD")) > 1
    assert (workspace / "wordcount.py").is_file()


def test_demo_that_fails_says_so(jobs):
    """In a network namespace whose loopback is down, the demo's own server is
    unreachable: the demo fails in one line naming the endpoint, records
    nothing (a call that never connected cost nothing) and leaves its job as
    it was, never pointing at an approval."""
    if not _can_unshare_network():
        pytest.skip("needs unshare -rn")
    write_config(jobs, max_retries=0)
    demo = subprocess.run(["unshare", "-rn", sys.executable, "-m", "logist", "demo"], capture_output=True, text=True, timeout=120)
    assert demo.returncode != 0
    assert "Traceback" not in demo.stderr
    [error] = [line for line in demo.stderr.splitlines() if line.startswith("Error:")]
    assert "cannot connect" in error and "http://127.0.0.1:" in error and "nothing was recorded" in error, error
    assert "job approve" not in demo.stderr
    status = json.loads(ok(logist_cli("job", "status", "demo", "--json")).stdout)
    assert status["status"] == "PENDING", status
    assert len(json.loads((jobs.path / "demo" / "jobHistory.json").read_text())["interactions"]) == 1, "only the creation"


def test_demo_paths_it_prints_exist_from_the_current_directory(jobs, tmp_path, monkeypatch):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    demo = logist_cli("demo", timeout=120)
    ok(demo)
    printed = [line.split()[0] for line in demo.stdout.splitlines() if line.strip().endswith(("its state", "every prompt and answer"))]
    assert len(printed) == 2, demo.stderr
    for path in printed:
        assert (elsewhere / path).exists(), f"{path} does not exist from {elsewhere}"


# 8. Snapshots of what users read ------------------------------------------------------------------------


@pytest.mark.parametrize("args", [["--help"], ["job", "--help"], ["job", "create", "--help"]], ids=["logist", "job", "job-create"])
def test_help_snapshots(args, snapshot):
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("Usage: logist")
    assert result.stdout == snapshot


def test_job_show_snapshot(jobs, normalise, snapshot):
    job = create_job(
        jobs, "hello", "Write hello.py that prints a greeting", details="Use plain Python.",
        acceptance=["python hello.py prints Hello", "no third-party packages"],
    )
    post_answer(job, WRITE_HELLO)
    result = invoke("job", "show", "hello")
    assert result.exit_code == 0, result.output
    commit = job.manifest().workspace_commit
    assert commit[:12] in result.stdout
    text = normalise.text(result.stdout.replace(commit[:12], "<commit>"))
    # The time spent is the machine's (a posted answer's step counts too).
    text = re.sub(r"(?m)^(Calls: .*, )\d+\.\d s$", r"\1<seconds> s", text)
    assert "REVIEWING" in text and "<seconds> s" in text
    assert text == snapshot
