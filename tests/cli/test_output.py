"""What the CLI prints and where: ``--json`` on every command (data on
stdout, chatter on stderr), the exit-code table in ``--help``, the jobs
directory found from anywhere inside it, tables that follow ``COLUMNS``,
shell completion."""

from __future__ import annotations

import json
import os
import re

import pytest
from click.testing import CliRunner

from logist.engine.create import create_job
from logist.engine.step import post_answer
from logist.cli import cli
from logist.cli.app import EXIT_CODES, RUNS_STEPS

from conftest import logist_cli

LONG = "Write a command line tool that counts the words, lines and characters of every file it is given " * 2
MESSAGE = json.dumps({"action": "MESSAGE", "message": "Reading the specification of wc very carefully, " * 4})


def invoke(*args: str, columns: str = "100"):
    return CliRunner(env={"COLUMNS": columns}).invoke(cli, list(args), prog_name="logist")


def _commands(path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command, found as a user finds them: in the Commands section of ``--help``."""
    result = invoke(*path, "--help")
    assert result.exit_code == 0, result.output
    if "\nCommands:\n" not in result.stdout:
        return [path]
    section = result.stdout.split("\nCommands:\n", 1)[1].split("\n\n", 1)[0]
    names = [line.split()[0] for line in section.splitlines() if re.match(r"^  \S", line)]
    return [found for name in names for found in _commands((*path, name))]


COMMANDS = _commands()


def test_the_walk_finds_every_command():
    names = {" ".join(path) for path in COMMANDS}
    assert {"job run", "job set", "job answer", "demo", "report", "role list", "workflow"} <= names
    assert len(names) == len(COMMANDS) >= 37


@pytest.mark.parametrize("path", COMMANDS, ids=[" ".join(p) for p in COMMANDS])
def test_every_command_takes_json_and_names_its_exit_codes(path):
    text = invoke(*path, "--help").stdout
    assert re.search(r"^\s+--json\s", text, re.M), f"logist {' '.join(path)} has no --json"
    table = [f"  {code}  {meaning}" for code, meaning in EXIT_CODES]
    if " ".join(path) in RUNS_STEPS:
        for row in table:
            assert row in text, f"logist {' '.join(path)} --help lacks the exit code {row!r}"


def test_logist_help_has_the_exit_code_table():
    text = invoke("--help").stdout
    for code, meaning in EXIT_CODES:
        assert f"    {code}  {meaning}\n" in text


def test_json_of_the_commands_that_write_files_or_select(jobs, llm):
    job = create_job(jobs, "hello", "Write hello.py", make_current=False)
    post_answer(job, MESSAGE)

    selected = invoke("job", "select", "hello", "--json")
    assert json.loads(selected.stdout) == {"current_job_id": "hello", "path": str(job.dir)}
    transcript = invoke("job", "transcript", "hello", "--json")
    data = json.loads(transcript.stdout)
    assert data["job_id"] == "hello" and data["transcript"] == (job.dir / "transcript.md").read_text(encoding="utf-8")
    report = json.loads(invoke("job", "report", "hello", "--json").stdout)
    assert report["path"] == str(job.dir / "report.html") and report["bytes"] == (job.dir / "report.html").stat().st_size
    index = json.loads(invoke("report", "--json").stdout)
    assert index["path"] == str(jobs.path / "index.html") and [j["job_id"] for j in index["jobs"]] == ["hello"]
    init = json.loads(invoke("init", "--json").stdout)
    assert init == {"jobs_dir": str(jobs.path), "created": False}


def test_demo_prints_its_summary_on_stdout(jobs):
    demo = logist_cli("demo", "--json")
    assert demo.returncode == 0, demo.stderr
    data = json.loads(demo.stdout)
    assert data["job_id"] == "demo" and data["status"] == "APPROVAL_REQUIRED"
    assert all((jobs.path.parent / path).exists() for path in data["open"]), data["open"]
    assert data["next"][-1] == "logist job approve demo"
    assert "Supervisor" in demo.stderr, "the progress goes to stderr"


# The jobs directory, found upward ------------------------------------------------------------


def test_commands_work_from_anywhere_inside_a_jobs_directory(tmp_path, monkeypatch):
    monkeypatch.delenv("LOGIST_JOBS_DIR")
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    made = logist_cli("--jobs-dir", str(project / "jobs"), "job", "create", "hello", "-o", "Write hello.py")
    assert made.returncode == 0, made.stderr
    assert logist_cli("--jobs-dir", str(project / "jobs"), "job", "create", "other", "-o", "Other").returncode == 0

    def status_from(folder) -> dict:
        monkeypatch.chdir(folder)
        result = logist_cli("job", "status", "--json")
        assert result.returncode == 0, (folder, result.stderr)
        return json.loads(result.stdout)

    # From the project, a folder beside the jobs, or the jobs directory: the current job.
    for folder in (project, project / "src", project / "jobs"):
        assert status_from(folder)["job_id"] == "other"
    # From inside a job, or deep in its workspace: that job.
    deep = project / "jobs" / "hello" / "workspace" / "lib"
    deep.mkdir()
    assert status_from(project / "jobs" / "hello")["job_id"] == "hello"
    assert status_from(deep)["job_id"] == "hello"
    # Found: nothing new appears where the command ran.
    assert not (deep / "jobs").exists() and not (project / "src" / "jobs").exists()


def test_a_jobs_directory_planted_in_a_workspace_is_never_found(tmp_path, monkeypatch):
    """A model writes a ``jobs_index.json``, a ``config.json`` naming its own
    endpoint and a link to another job into its workspace: a command run
    from inside the workspace still finds the real jobs directory, and no
    job folder is reached through the link, even when that folder is named."""
    from logist.store.jobsdir import JobsIndex

    monkeypatch.delenv("LOGIST_JOBS_DIR")
    jobs_dir = tmp_path / "project" / "jobs"
    for job_id in ("other", "hello"):
        made = logist_cli("--jobs-dir", str(jobs_dir), "job", "create", job_id, "-o", "Write hello.py")
        assert made.returncode == 0, made.stderr
    workspace = jobs_dir / "hello" / "workspace"
    index = JobsIndex(jobs={"x": "x"}, current_job_id="x", queue=["x"])
    (workspace / "jobs_index.json").write_text(json.dumps(index.dump()))
    (workspace / "config.json").write_text(json.dumps({"defaults": {"base_url": "http://model.invalid/v1"}}))
    (workspace / "x").symlink_to(jobs_dir / "other")
    (workspace / "deep" / "jobs").mkdir(parents=True)
    (workspace / "deep" / "jobs" / "jobs_index.json").write_text(json.dumps(index.dump()))

    for folder in (workspace, workspace / "deep"):
        monkeypatch.chdir(folder)
        shown = logist_cli("job", "status", "--json")
        assert shown.returncode == 0, shown.stderr
        assert json.loads(shown.stdout)["job_id"] == "hello", "the job the workspace belongs to, in the real jobs dir"
        listed = logist_cli("job", "list", "--json")
        assert sorted(job["job_id"] for job in json.loads(listed.stdout)["jobs"]) == ["hello", "other"]
    named = logist_cli("--jobs-dir", str(workspace), "job", "status", "x")
    assert named.returncode != 0 and "symbolic link" in named.stderr, named.stderr
    assert "Traceback" not in named.stderr


def test_jobs_dir_is_accepted_after_the_command_too(tmp_path, monkeypatch):
    monkeypatch.delenv("LOGIST_JOBS_DIR")
    elsewhere = tmp_path / "elsewhere"
    created = invoke("job", "create", "there", "-o", "Write hello.py", "--jobs-dir", str(elsewhere))
    assert created.exit_code == 0, created.output
    for argv in (["job", "--jobs-dir", str(elsewhere), "list", "--json"],
                 ["job", "list", "--jobs-dir", str(elsewhere), "--json"],
                 ["--jobs-dir", str(tmp_path / "ignored"), "job", "list", "--jobs-dir", str(elsewhere), "--json"]):
        result = invoke(*argv)
        assert result.exit_code == 0, result.output
        assert [j["job_id"] for j in json.loads(result.stdout)["jobs"]] == ["there"], argv
    assert not (tmp_path / "jobs").exists() and not (tmp_path / "ignored").exists()


# Tables --------------------------------------------------------------------------------------


@pytest.mark.parametrize("argv", [["job", "list"], ["job", "history", "wc"], ["job", "show", "wc"], ["role", "list"],
                                  ["skill", "list"]])
def test_tables_follow_columns(jobs, argv):
    job = create_job(jobs, "wc", LONG)
    post_answer(job, MESSAGE)
    narrow, wide = invoke(*argv, columns="60"), invoke(*argv, columns="250")
    assert narrow.exit_code == wide.exit_code == 0, narrow.output
    table = {"job list": 1, "job history": 3}.get(" ".join(argv[:2]))
    narrow_lines = narrow.stdout.splitlines()
    wide_lines = wide.stdout.splitlines()
    if argv[1] == "show":  # only the table of the last entries is cut
        narrow_lines = narrow_lines[narrow_lines.index(next(l for l in narrow_lines if l.startswith("Last entries"))) + 1:]
        wide_lines = wide_lines[wide_lines.index(next(l for l in wide_lines if l.startswith("Last entries"))) + 1:]
        narrow_lines = [l for l in narrow_lines if l.startswith("  ")][:3]
        wide_lines = [l for l in wide_lines if l.startswith("  ")][:3]
    assert narrow_lines and all(len(line) <= 60 for line in narrow_lines), narrow.stdout
    assert any(line.endswith("…") for line in narrow_lines)
    assert max(len(line) for line in wide_lines) > 60
    if table:
        assert len(narrow_lines) == table


def test_a_narrow_history_table_leaves_out_the_time_for_the_summary(jobs):
    job = create_job(jobs, "wc", LONG)
    post_answer(job, MESSAGE)
    narrow, wide = invoke("job", "history", "wc", columns="110"), invoke("job", "history", "wc", columns="140")
    assert "time (UTC)" not in narrow.stdout and "time (UTC)" in wide.stdout
    assert "Reading the specification" in narrow.stdout.splitlines()[2]


def test_piped_tables_are_whole_without_columns(jobs):
    job = create_job(jobs, "wc", LONG)
    listing = logist_cli("job", "list", env={"COLUMNS": ""})
    assert listing.returncode == 0, listing.stderr
    assert " ".join(LONG.split()) in listing.stdout


# Shell completion --------------------------------------------------------------------------


def test_shell_completion_of_commands_and_job_ids(jobs):
    create_job(jobs, "hello", "Write hello.py")
    create_job(jobs, "help-wanted", "Something")
    script = logist_cli(env={"_LOGIST_COMPLETE": "bash_source"})
    assert script.returncode == 0 and "_LOGIST_COMPLETE=bash_complete" in script.stdout

    def complete(words: str) -> list[str]:
        parts = words.split(" ")
        result = logist_cli(env={"_LOGIST_COMPLETE": "bash_complete", "COMP_WORDS": words, "COMP_CWORD": str(len(parts) - 1)})
        assert result.returncode == 0, result.stderr
        return [line.split(",", 1)[1] for line in result.stdout.splitlines()]

    assert "status" in complete("logist job sta")
    assert complete("logist job status hel") == ["hello", "help-wanted"]
    assert "--max-steps" in complete("logist job set hello --max-s")
