"""How long the HTML report of a long job takes to write, and how big it is.

Builds a job of ``--steps`` LLM calls (default 1,000) by posting answers
(``post_answer``: everything a live step does after the call, including the
git commit, the history append and the transcript append, but no network).
Turns look like real ones: a Worker writes and edits files over several
steps, runs a command, answers COMPLETED, and the Supervisor sends it back
with RETRY. Then prints the time to build the job (and the transcript
append's cost early and late in the job, which should not grow), the time
to write ``report.html``, its size, and the time headless Chromium takes to
load it and dump its DOM (against a blank page, to leave out the browser's
start-up), when Chromium is installed.

    python bench/report_scaling.py [--steps 1000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from logist.engine.create import create_job
from logist.engine.step import post_answer
from logist.store.jobsdir import JobsDir
from logist.views import transcript
from logist.views.report import render_job_report, write_job_report

TURN = 10  # steps per Worker turn, the Supervisor's RETRY included


def answer_for(step: int) -> str:
    """The answer of call number ``step`` (0-based) in the scripted turns."""
    turn, at = divmod(step, TURN)
    if at == TURN - 1:
        return json.dumps({"action": "RETRY", "evidence_files": ["src/app.py"],
                           "summary_for_supervisor": f"Round {turn}: the edge cases are not handled yet; add them."})
    if at == TURN - 2:
        return json.dumps({"action": "COMPLETED", "evidence_files": ["src/app.py"],
                           "summary_for_supervisor": f"Round {turn}: wrote the module and its notes; the command shows them."})
    if at == TURN - 3:
        return json.dumps({"action": "CMD", "command": "ls -R src"})
    body = "".join(f"def f{turn}_{at}_{n}(x):\n    return x * {n}  # <b>escaped</b>\n\n" for n in range(20))
    change = {"path": f"src/mod{at}.py", "content": body}
    return json.dumps({"action": "MESSAGE", "message": f"Round {turn}: writing module {at}.", "file_changes": [change]})


def build(root: Path, steps: int):
    jobs = JobsDir(root / "jobs")
    job = create_job(jobs, "bench", "Write a module, again and again", allowed_commands=["ls *"],
                     max_steps=steps + 10, max_retries_in_a_row=steps)
    append_times: list[float] = []
    original = transcript.update

    def timed(job_dir):
        started = time.perf_counter()
        outcome = original(job_dir)
        append_times.append(time.perf_counter() - started)
        return outcome

    transcript.update = timed
    try:
        for step in range(steps):
            post_answer(job, answer_for(step))
    finally:
        transcript.update = original
    return job, append_times


def chromium_load_seconds(path: Path) -> float | None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if not browser:
        return None
    with tempfile.TemporaryDirectory() as profile:
        started = time.perf_counter()
        subprocess.run(
            [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={profile}", "--dump-dom", path.resolve().as_uri()],
            capture_output=True, timeout=300, check=True,
        )
        return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--keep", help="Build the job in this directory and keep it.")
    args = parser.parse_args()
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="logist-bench-"))
    try:
        started = time.perf_counter()
        job, appends = build(root, args.steps)
        built = time.perf_counter() - started
        print(f"built a job of {args.steps} calls in {built:.1f} s "
              f"(jobHistory.json {job.history_path.stat().st_size / 1e6:.1f} MB, "
              f"transcript.md {job.transcript_path.stat().st_size / 1e6:.1f} MB)")
        first, last = appends[1:51], appends[-50:]
        print(f"transcript update per step: median {statistics.median(first) * 1000:.2f} ms over calls 2-51, "
              f"{statistics.median(last) * 1000:.2f} ms over the last 50")
        timings = []
        for _ in range(3):
            started = time.perf_counter()
            page = render_job_report(job)
            timings.append(time.perf_counter() - started)
        path = write_job_report(job)
        rows = page.count('<details class="step')
        each = ", ".join(f"{t:.2f}" for t in timings)
        print(f"report.html: {len(page.encode()) / 1e6:.1f} MB, {rows} rows, "
              f"generated in {min(timings):.2f} s (best of 3: {each})")
        load = chromium_load_seconds(path)
        if load is None:
            print("headless chromium: not installed, load time not measured")
        else:
            blank = root / "blank.html"
            blank.write_text("<!DOCTYPE html><title>blank</title><p>blank</p>")
            baseline = chromium_load_seconds(blank)
            print(f"headless chromium --dump-dom: {load:.1f} s for report.html, {baseline:.1f} s for a blank page "
                  f"(browser start-up), so about {max(load - baseline, 0):.1f} s for the page itself")
        if args.keep:
            print(f"kept: {path}")
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
