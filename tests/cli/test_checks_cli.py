"""Checks from the command line: job create --check, job check, job status,
and job approve refusing a failing or stale check (one line, exit 1)
unless --despite-checks, which the approve entry records."""

from __future__ import annotations

import json
import subprocess

from conftest import logist_cli


def run(*args: str, code: int = 0) -> subprocess.CompletedProcess:
    result = logist_cli(*args)
    assert result.returncode == code, f"rc={result.returncode}\nstdout={result.stdout}\nstderr={result.stderr}"
    assert "Traceback" not in result.stderr
    return result


def post(job: str, code: int = 0, **answer) -> None:
    run("job", "poststep", job, "--response-string", json.dumps(answer), code=code)


def test_approve_refuses_a_failing_or_stale_check_and_records_despite_checks(jobs):
    run("job", "create", "ok", "-o", "Write ok.txt", "--check", "test -e ok.txt")
    status = json.loads(run("job", "status", "ok", "--json").stdout)
    assert status["checks"] == ["test -e ok.txt"] and status["last_check"] is None
    assert "Checks:  not run yet (logist job check ok)" in run("job", "status", "ok").stdout

    post("ok", action="COMPLETED", evidence_files=["ok.txt"], summary_for_supervisor="Wrote ok.txt.",
         file_changes=[{"path": "ok.txt", "content": "ok\n"}])
    assert json.loads(run("job", "status", "ok", "--json").stdout)["status"] == "RUNNING"
    checked = run("job", "check", "ok")
    assert "$ test -e ok.txt  (exit 0" in checked.stderr and "CHECKS_PASSED -> REVIEWING" in checked.stderr
    post("ok", code=3, action="COMPLETED", evidence_files=["ok.txt"], summary_for_supervisor="ok.txt is there.")
    assert json.loads(run("job", "status", "ok", "--json").stdout)["status"] == "APPROVAL_REQUIRED"

    # A person's edit breaks the work: the last run is stale, then failing once run again.
    workspace = jobs.path / "ok" / "workspace"
    (workspace / "ok.txt").unlink()
    subprocess.run(["git", "commit", "-qam", "a person's edit"], cwd=workspace, check=True)
    stale = run("job", "approve", "ok", code=1)
    assert "checks last ran on another commit" in stale.stderr and len(stale.stderr.strip().splitlines()) <= 2
    failed = run("job", "check", "ok", code=1)
    assert "CHECKS_FAILED -> APPROVAL_REQUIRED" in failed.stderr
    status = json.loads(run("job", "status", "ok", "--json").stdout)
    assert status["last_check"]["passed"] is False and status["last_check"]["stale"] is False
    assert status["last_check"]["results"][0]["exit_code"] == 1
    refused = run("job", "approve", "ok", code=1)
    assert "check `test -e ok.txt` failed" in refused.stderr and "--despite-checks" in refused.stderr
    assert json.loads(run("job", "status", "ok", "--json").stdout)["status"] == "APPROVAL_REQUIRED"

    run("job", "approve", "ok", "--despite-checks")
    history = json.loads((jobs.path / "ok" / "jobHistory.json").read_text())["interactions"]
    assert history[-1]["user_input"]["action"] == "approve" and history[-1]["user_input"]["despite_checks"] is True
    assert json.loads(run("job", "status", "ok", "--json").stdout)["status"] == "SUCCESS"
    shown = run("job", "history", "ok").stdout
    assert "CHECKS_PASSED" in shown and "CHECKS_FAILED" in shown
    assert "Check `test -e ok.txt` failed (exit 1)" in (jobs.path / "ok" / "transcript.md").read_text()


def test_set_replaces_the_checks(jobs):
    run("job", "create", "s", "-o", "Anything", "--check", "true")
    run("job", "set", "s", "--check", "false", "--check", "true")
    assert json.loads(run("job", "status", "s", "--json").stdout)["checks"] == ["false", "true"]
    run("job", "set", "s", "--no-checks")
    assert json.loads(run("job", "status", "s", "--json").stdout)["checks"] == []
    assert "give --check CMD or --no-checks, not both" in run("job", "set", "s", "--check", "x", "--no-checks",
                                                             code=2).stderr
