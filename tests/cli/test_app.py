"""The application object: data on stdout with --json, chatter on stderr,
for the commands that change a job or show its work."""

from __future__ import annotations

import json

from click.testing import CliRunner

from logist.engine.create import create_job
from logist.engine.step import post_answer
from logist.cli import cli
from logist.replay.scripted import answer


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), prog_name="logist")


def _json(result) -> dict:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_a_persons_decision_prints_the_new_state_as_json(jobs):
    create_job(jobs, "j", "objective")
    data = _json(invoke("job", "suspend", "j", "--json"))
    assert data["job_id"] == "j" and data["status"] == "SUSPENDED" and data["role"] == "Worker"
    text = invoke("job", "resume", "j")
    assert text.exit_code == 0 and text.stdout == "" and "is now PENDING" in text.stderr


def test_rewind_diff_and_export_print_json(jobs, tmp_path):
    job = create_job(jobs, "j", "objective")
    post_answer(job, answer("MESSAGE", message="one", file_changes=[{"path": "a.txt", "content": "a\n"}]))
    post_answer(job, answer("MESSAGE", message="two", file_changes=[{"path": "b.txt", "content": "b\n"}]))
    diff = _json(invoke("job", "diff", "j", "--entry", "3", "--json"))
    assert diff["step"] == 3 and "+b" in diff["diff"] and "a.txt" not in diff["diff"]
    patch = tmp_path / "j.patch"
    exported = _json(invoke("job", "export", "j", "--patch", str(patch), "--json"))
    assert exported["commits"] == 2 and patch.is_file()
    rewound = _json(invoke("job", "restep", "j", "--json"))
    assert rewound["status"] == "RUNNING" and rewound["workspace_commit"] == job.manifest().workspace_commit
    baseline = _json(invoke("job", "rerun", "j", "--json"))
    assert baseline["status"] == "PENDING" and baseline["workspace_commit"] == job.manifest().baseline_commit


def test_version_and_help_are_clicks_own_in_the_program():
    from conftest import logist_cli

    clicks = invoke("--version")
    assert clicks.exit_code == 0 and clicks.stdout.startswith("logist, version ")
    program = logist_cli("--version")
    assert (program.returncode, program.stdout, program.stderr) == (0, clicks.stdout, "")
    for option in ("--help", "-h"):
        program = logist_cli(option)
        assert program.returncode == 0 and program.stderr == ""
        assert program.stdout.startswith("Usage: logist [OPTIONS] COMMAND") and "Exit codes" in program.stdout
