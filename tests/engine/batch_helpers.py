"""Shared by the batch tests: jobs made from one recording, run with
``logist job run --all`` against one replay server, compared with a job of
the same recording run serially."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from logist.store.session import JobFiles
from logist.store.jobsdir import JobsDir
from logist.replay.fixtures import create_from_fixture
from logist.store.entries import CALL_KINDS

from conftest import REPO_ROOT, logist_cli, logist_process

WORDCOUNT = REPO_ROOT / "fixtures" / "wordcount"
MODEL = "gpt-4o-mini"


def make_jobs(jobs: JobsDir, count: int) -> list[str]:
    ids = [f"job-{n:02d}" for n in range(count)]
    for job_id in ids:
        create_from_fixture(jobs, WORDCOUNT, job_id)
    return ids


def run_all(jobs: JobsDir, server, *options: str, timeout: float = 300, process: bool = False) -> subprocess.CompletedProcess:
    """``logist job run --all`` on ``server``; ``process``: in a child process
    (the Ray engine: its driver cannot share the test's process, which is one already)."""
    run = logist_process if process else logist_cli
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
