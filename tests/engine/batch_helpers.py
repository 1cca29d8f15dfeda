"""Shared by the batch tests: jobs made from one recording, run with
``logist job run --all`` against one replay server, compared with a job of
the same recording run serially."""

from __future__ import annotations

import importlib.util
import json
import re
import os
import subprocess
import sys
import tempfile
import threading
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

from logist.store.session import JobFiles
from logist.store.jobsdir import JobsDir
from logist.replay.fixtures import create_from_fixture
from logist.replay.server import ReplayLLMServer
from logist.store.entries import CALL_KINDS

import pytest

from conftest import REPO_ROOT, logist_cli, logist_forked

#: The Ray engine's tests: skipped where Ray is not installed. Ray is imported by the tests that run:
#: imported as their modules are collected, it would cost each pytest-xdist worker ~0.35 s of CPU in
#: runs that leave these slow tests out too.
NEEDS_RAY = pytest.mark.skipif(importlib.util.find_spec("ray") is None,
                               reason="the ray engine's tests need Ray (pip install -e '.[test]')")

WORDCOUNT = REPO_ROOT / "fixtures" / "wordcount"
MODEL = "gpt-4o-mini"

#: What the test clusters leave out of each Ray node: what Logist's engine does not use (no
#: dashboard, and no log monitor streaming the workers' logs to a driver: Logist starts Ray with
#: ``log_to_driver=False``), about a second of CPU a node in the suite.
RAY_LEAN = dict(include_log_monitor=False)
#: And of a head node: the autoscaler's monitor (a test cluster is the nodes it starts).
RAY_LEAN_HEAD = dict(include_dashboard=False, no_monitor=True)
#: ``ray start``'s options for :data:`RAY_LEAN`.
RAY_LEAN_START = "--include-log-monitor=False"


def make_jobs(jobs: JobsDir, count: int) -> list[str]:
    ids = [f"job-{n:02d}" for n in range(count)]
    for job_id in ids:
        create_from_fixture(jobs, WORDCOUNT, job_id)
    return ids


def run_all(jobs: JobsDir, server, *options: str, timeout: float = 300, process: bool = False) -> subprocess.CompletedProcess:
    """``logist job run --all`` on ``server``; ``process``: in a child process
    (the Ray engine: its driver cannot share the test's process, which is one already)."""
    run = logist_forked if process else logist_cli
    return run("--jobs-dir", str(jobs.path), "job", "run", "--all", "--base-url", server.base_url,
               "--model", MODEL, *options, timeout=timeout)


def fingerprint(job_dir: Path) -> dict:
    """What must be the same however the job was run: state, history and
    workspace (commit messages name the job, so its id is replaced and trees
    are compared, not commits)."""
    manifest = json.loads((job_dir / "job_manifest.json").read_text())
    entries = JobFiles(job_dir).load_history().interactions
    git = lambda *a: subprocess.run(["git", *a], cwd=job_dir / "workspace", capture_output=True, text=True,
                                    check=True).stdout
    return {
        "status": manifest["status"],
        "calls": (manifest["calls"], manifest["totals"]["llm_calls"]),
        "history": [(e.kind, e.role, e.response.raw_response if e.response else None, e.state.status if e.state else None,
                     ) for e in entries],
        "tree": git("rev-parse", "HEAD^{tree}").strip(),
        "log": git("log", "--format=%s").replace(job_dir.name, "<job>"),
    }


def recorded_calls(job_dir: Path, unknown: bool = False) -> int:
    """Calls the history records with an answer (``unknown``: those of
    unknown outcome instead, made while a process was killed)."""
    return sum(1 for e in JobFiles(job_dir).load_history().interactions
               if e.kind in CALL_KINDS and e.request is not None and e.unknown_outcome == unknown)


def unknown_call_keys(job_dir: Path) -> list[str]:
    """The Idempotency-Keys of the calls the history records as of unknown outcome."""
    return [e.request.metadata.idempotency_key for e in JobFiles(job_dir).load_history().interactions
            if e.kind in CALL_KINDS and e.request is not None and e.unknown_outcome]


def corrupt_files(jobs: JobsDir) -> list[str]:
    return [str(p) for p in jobs.path.rglob("*.corrupt-*")]


def scaled(small: int, full: int) -> int:
    """``full`` when ``LOGIST_SCALE=full`` asks for the acceptance size, else ``small``."""
    return full if os.environ.get("LOGIST_SCALE") == "full" else small


def set_lease_seconds(jobs: JobsDir, seconds: float) -> None:
    """config.json's ``lease_seconds``: the batch runners' lease length."""
    (jobs.path / "config.json").write_text(json.dumps({"lease_seconds": seconds}))


def start_batch(jobs: JobsDir, server, *options: str) -> subprocess.Popen:
    """``logist job run --all --json`` as a process of its own (to be stopped
    or killed); its output goes to files (a pipe nobody reads while the test
    waits would fill and stop a large batch): :func:`finish` reads them."""
    folder = Path(tempfile.mkdtemp(prefix="batch-", dir=jobs.path.parent))
    with open(folder / "stdout", "w") as stdout, open(folder / "stderr", "w") as stderr:
        # Started as a program is (not forked, tests/forked.py): the fault tests time their faults against
        # a batch's start. Forked, the Ray fault test's driver, killed mid-batch, once left a job whose
        # runner recorded "git ... exit code -9" as its answer's failure (INTERVENTION_REQUIRED).
        batch = subprocess.Popen(
            [sys.executable, "-m", "logist", "--jobs-dir", str(jobs.path), "job", "run", "--all", "--base-url",
             server.base_url, "--model", MODEL, "--json", *options], stdout=stdout, stderr=stderr, text=True)
    batch.output = folder
    return batch


def finish(batch: subprocess.Popen, timeout: float = 900) -> tuple[str, str]:
    """Wait for a batch :func:`start_batch` started; its (stdout, stderr)."""
    batch.wait(timeout=timeout)
    return output(batch)


def output(batch: subprocess.Popen) -> tuple[str, str]:
    """What the batch printed so far: (stdout, stderr)."""
    return (batch.output / "stdout").read_text(), (batch.output / "stderr").read_text()


def leases_of(jobs: JobsDir, ids: list[str]) -> dict[str, dict]:
    """The leases held on ``ids`` now (jobs without one are left out)."""
    found = {job_id: JobFiles(jobs.path / job_id).read_lease() for job_id in ids}
    return {job_id: lease for job_id, lease in found.items() if lease}


def utc(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp)


def now() -> datetime:
    return datetime.now(timezone.utc)


class TakeoverWatch:
    """Watches the leases of the jobs a fault hit and records, for each, the
    lease that replaced the one it had then: its ``acquired_at``, written
    by the runner that took the job over, is when the job stopped waiting.

    A lease seen gone counts as taken over when it was seen gone: its holder
    was stopped, dead or made up by the test, so only a runner that took it
    over removed it, having found the job with nothing left to run (the
    stopped runner had recorded the job's last step and not yet released
    its lease), often before the next look. The moment it was seen gone is
    later than the takeover, so the bound asserted on it still holds for the
    takeover; a lease its holder released itself once let go on is seen gone
    only after the fault's two lease lengths, which no bound allows."""

    def __init__(self, jobs: JobsDir, faulted: dict[str, dict]):
        self.jobs, self.faulted = jobs, faulted
        self.taken: dict[str, dict] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.is_set() and len(self.taken) < len(self.faulted):
            for job_id, lease in self.faulted.items():
                if job_id not in self.taken:
                    files = JobFiles(self.jobs.path / job_id)
                    current = files.read_lease()
                    if current is None and not files.lease_path.exists():
                        self.taken[job_id] = {"acquired_at": now().isoformat(), "seen_gone": True}
                    elif current and current.get("token") != lease.get("token"):
                        self.taken[job_id] = current
            self._stop.wait(0.02)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def waits(self, fault: datetime) -> dict[str, float]:
        """Seconds from ``fault`` to each takeover, by job (a job never taken over is left out)."""
        return {job_id: (utc(lease["acquired_at"]) - fault).total_seconds() for job_id, lease in self.taken.items()}


def call_keys(job_dir: Path, unknown: bool = False) -> list[str]:
    """The Idempotency-Keys the calls the history records with an answer were
    sent with (``unknown``: those of unknown outcome instead), as
    ``Job.entry_in_full`` gives them (the file leaves out a key it can derive)."""
    import logist

    job = logist.open(job_dir.parent).get(job_dir.name)
    return [job.entry_in_full(e.sequence).data["request"]["metadata"]["idempotency_key"]
            for e in JobFiles(job_dir).load_history().interactions
            if e.kind in CALL_KINDS and e.request is not None and e.unknown_outcome == unknown]


def assert_each_paid_call_recorded_once(jobs: JobsDir, ids: list[str], server) -> None:
    """Every request the server answered is a call a history records, once;
    a key is answered twice only when it is that of a call of unknown
    outcome (cut off by a fault) sent again, and never more."""
    answered = Counter(e["key"] for e in server.ledger)
    recorded = Counter(key for job_id in ids for key in call_keys(jobs.path / job_id))
    unknown = {key for job_id in ids for key in call_keys(jobs.path / job_id, unknown=True)}
    assert None not in recorded and None not in unknown
    assert server.mismatches == []
    assert all(count == 1 for count in recorded.values()), ("no call recorded twice", {k: c for k, c in recorded.items() if c > 1})
    assert set(answered) <= set(recorded) | unknown, "every answered call is recorded, or of unknown outcome"
    assert set(recorded) <= set(answered), "every recorded call was answered"
    twice = {key for key, count in answered.items() if count > 1}
    assert twice <= unknown and all(answered[key] == 2 for key in twice), "sent again only once, only when cut off"
    assert len(server.ledger) == sum(recorded.values()) + len(twice) + len(set(answered) - set(recorded))


def end_state(job_dir: Path) -> dict:
    """Where the job's answers led it: :func:`fingerprint` less what a fault
    adds on the way (a call cut off, recorded as of unknown outcome and sent
    again; the entry a recovery records for a step cut off after its answer
    was recorded; the calls counted with them; the entry numbers commit
    messages name, one later for each such entry)."""
    state = fingerprint(job_dir)
    state["log"] = re.sub(r"entry \d+", "entry <n>", state["log"])
    entries = JobFiles(job_dir).load_history().interactions
    state["history"] = [row for row, e in zip(state["history"], entries)
                        if not e.unknown_outcome and e.kind != "repair"]
    state["calls"] = recorded_calls(job_dir)
    return state


def serial_reference(folder: Path) -> dict:
    """The end state of one job of the recording (:data:`WORDCOUNT`) run alone
    and serially in a jobs directory made in ``folder``: what each job of a
    batch under a fault must end as."""
    jobs = JobsDir(folder / "jobs")
    jobs.init()
    make_jobs(jobs, 1)
    with ReplayLLMServer(WORDCOUNT) as server:
        result = run_all(jobs, server, "--engine", "serial")
    assert result.returncode == 3, result.stderr
    return end_state(jobs.path / "job-00")
