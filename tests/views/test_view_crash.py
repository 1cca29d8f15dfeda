"""The views are written after a command has recorded its work, and never fail it.

With real processes: a ``logist`` child killed with SIGKILL in the middle of
the transcript write (failpoint ``mid_transcript``) has recorded its entry
and manifest all the same, and the next command rebuilds the transcript; a
transcript that cannot be written costs one warning, not the exit code; a
process that finds the views' lock held skips, and the holder or the next
command catches up. And the store does not import the views at all.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from logist.store.session import JobFiles, VIEWS_LOCK_NAME
from logist.engine.create import create_job
from logist.engine.step import step_once
from logist.replay.scripted import answer
from logist.views.transcript import read_marker, render

from conftest import logist_cli, logist_forked as logist_process

pytestmark = pytest.mark.slow

FIRST = answer("MESSAGE", message="Planning the greeting.", file_changes=[{"path": "plan.md", "content": "# Plan\n"}])
SECOND = answer("COMPLETED", "Wrote hello.py.", ["hello.py"], file_changes=[{"path": "hello.py", "content": "print('Hello')\n"}])
REVIEW = answer("COMPLETED", "hello.py prints Hello.", ["hello.py"])


def read_json(path: Path):
    return json.loads(path.read_text(encoding="utf-8"))


def ok(result: subprocess.CompletedProcess, code: int = 0) -> subprocess.CompletedProcess:
    """``result`` exited ``code`` (3: the job it ran waits for a person) without a traceback."""
    assert result.returncode == code, f"rc={result.returncode}\nstdout={result.stdout}\nstderr={result.stderr}"
    assert "Traceback" not in result.stderr
    return result


def step_cli(llm, **env: str) -> subprocess.CompletedProcess:
    return logist_process("job", "step", "--oneshot", "hello", "--base-url", llm.base_url, env=env)


def fresh_render(job) -> str:
    return render(JobFiles(job.dir).load_history().interactions, "hello")


@pytest.mark.wire
def test_killed_while_the_transcript_is_written_the_step_is_recorded(jobs, llm):
    job = create_job(jobs, "hello", "Write hello.py that prints a greeting")
    llm.add(FIRST)
    step_once(job, base_url=llm.base_url)
    before = JobFiles(job.dir).transcript_path.read_bytes()
    marker = read_marker(JobFiles(job.dir).transcript_path)
    assert marker.seq == 2 and before[marker.offset:] == b"\n<!-- logist: transcript up to step 2 -->\n"

    llm.add(SECOND)
    killed = step_cli(llm, LOGIST_FAILPOINT="mid_transcript")
    assert killed.returncode == -signal.SIGKILL, killed.stderr

    # The entry and the manifest were recorded before the view was touched.
    entries = read_json(job.history_path)["interactions"]
    assert [e["sequence"] for e in entries] == [1, 2, 3]
    assert entries[-1]["response"]["raw_response"] == SECOND
    manifest = read_json(job.manifest_path)
    assert manifest["last_sequence"] == 3 and manifest["status"] == "REVIEWING"
    assert not (job.dir / "step_journal.json").exists()
    status = json.loads(ok(logist_cli("job", "status", "hello", "--json")).stdout)
    assert status["status"] == "REVIEWING" and status["last_sequence"] == 3
    # The transcript was cut in the middle of the new entry's block, which
    # was written over the old marker.
    torn = JobFiles(job.dir).transcript_path.read_bytes()
    assert torn.startswith(before[: marker.offset]) and len(torn) > len(before)
    assert read_marker(JobFiles(job.dir).transcript_path) is None

    # The next command needs no repair and rebuilds the transcript.
    llm.add(REVIEW)
    ok(step_cli(llm), code=3)  # the review ends waiting for approval
    entries = JobFiles(job.dir).load_history().interactions
    assert [e.kind for e in entries] == ["user_action", "llm_call", "llm_call", "llm_call"], "no recovery was needed"
    assert JobFiles(job.dir).transcript_path.read_text(encoding="utf-8") == fresh_render(job)
    assert read_json(job.manifest_path)["status"] == "APPROVAL_REQUIRED"


@pytest.mark.wire  # logist job step, through the CLI
def test_a_transcript_that_cannot_be_written_costs_a_warning_not_the_step(jobs, llm):
    job = create_job(jobs, "hello", "Write hello.py that prints a greeting")
    JobFiles(job.dir).transcript_path.unlink()
    JobFiles(job.dir).transcript_path.mkdir()  # the transcript's path is taken by a directory

    llm.add(SECOND)
    result = ok(step_cli(llm))
    assert result.stdout.strip() == ""
    warnings = [line for line in result.stderr.splitlines() if "could not update" in line]
    assert len(warnings) == 1 and "transcript.md" in warnings[0]
    entries = read_json(job.history_path)["interactions"]
    assert [e["sequence"] for e in entries] == [1, 2] and entries[-1]["response"]["raw_response"] == SECOND
    assert read_json(job.manifest_path)["status"] == "REVIEWING"
    assert (job.workspace / "hello.py").read_text() == "print('Hello')\n"

    # Once the path is free again, the next command writes the whole transcript.
    JobFiles(job.dir).transcript_path.rmdir()
    llm.add(REVIEW)
    ok(step_cli(llm), code=3)  # the review ends waiting for approval
    assert JobFiles(job.dir).transcript_path.read_text(encoding="utf-8") == fresh_render(job)


HOLD_LOCK = """
import sys
from filelock import FileLock
lock = FileLock(sys.argv[1], thread_local=False)
lock.acquire()
print("held", flush=True)
sys.stdin.readline()
"""


@pytest.mark.wire
def test_a_busy_views_lock_is_skipped_and_caught_up_later(jobs, llm):
    job = create_job(jobs, "hello", "Write hello.py that prints a greeting")
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(job.dir / VIEWS_LOCK_NAME)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        llm.add(SECOND)
        result = ok(step_cli(llm))
        assert "could not update" not in result.stderr, "a busy views lock is not a failure"
        assert [e["sequence"] for e in read_json(job.history_path)["interactions"]] == [1, 2]
        assert read_marker(JobFiles(job.dir).transcript_path).seq == 1, "the step did not wait for, or write, the views"
    finally:
        holder.communicate("\n", timeout=30)
    shown = ok(logist_cli("job", "transcript", "hello"))
    assert "Brought" in shown.stderr
    assert shown.stdout == JobFiles(job.dir).transcript_path.read_text(encoding="utf-8") == fresh_render(job)


def test_the_store_does_not_import_the_views_or_the_engine():
    # Without the package's __init__ (the library's front door imports the
    # engine): what is measured is what the store's own modules import.
    import logist

    root = os.path.dirname(logist.__file__)
    code = (
        f"import sys, types; package = types.ModuleType('logist'); package.__path__ = [{root!r}]; "
        "sys.modules['logist'] = package\n"
        "import pkgutil, importlib, logist.store\n"
        "for m in pkgutil.iter_modules(logist.store.__path__): importlib.import_module('logist.store.' + m.name)\n"
        "print(sorted(n for n in sys.modules if n.startswith(('logist.views', 'logist.engine'))))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"
