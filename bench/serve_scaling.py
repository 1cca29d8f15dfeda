"""logist serve on big data: its pages against the CLI's, and its memory on a 1 GB history.

Four figures (issue 30, acceptance 10), each against a real ``logist
serve`` process asked over HTTP (the time of the request, the server
already running; the CLI's time is its whole process, start-up included,
as a person waits for it):

* the list of ``--jobs`` jobs (default 1,000; made by ``create_job``, one
  git repository each) against ``logist job list``;
* the page of a job of ``--steps`` entries (default 10,000; the entries of
  bench/views_memory.py, real commits and diffs) against ``logist job
  report``: the default page (its last 500 entries) and the whole timeline
  on one page (``--page-size`` as large as the history);
* the server's peak resident memory (VmHWM) after it showed a job whose
  history is ``--size-mb`` MB (default 1,024; or the one in ``--history``);
* on that history: the time of its latest page, its first page and one in the middle,
  an event stream's first update, and a live update (the time from one
  more entry recorded to its row arriving on an open stream).

    python bench/serve_scaling.py [--jobs 1000] [--steps 10000] [--size-mb 1024] [--skip-memory]
                                  [--only-memory] [--history JOBS_DIR]

Targets: each page within 2x the CLI's time; memory under 200 MB; a page
and a live update of the 1 GB history well under 2 s. Figures only.
"""

from __future__ import annotations

import argparse
import http.client
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from views_memory import build  # noqa: E402

from logist.engine.create import create_job  # noqa: E402
from logist.serve.app import POLL_SECONDS  # noqa: E402
from logist.store.entries import HistoryEntry  # noqa: E402
from logist.store.history import TAIL, append_entry  # noqa: E402
from logist.store.jobsdir import JobsDir  # noqa: E402


def serve(jobs: JobsDir, *args: str):
    process = subprocess.Popen([sys.executable, "-m", "logist", "--jobs-dir", str(jobs.path), "serve", "--port", "0",
                                *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    found = re.search(r":(\d+)/\?token=(\S+)", process.stdout.readline())
    if found is None:
        process.kill()
        raise SystemExit(f"logist serve did not start: {process.stderr.read()}")
    return process, int(found.group(1)), found.group(2)


def get(port: int, token: str, path: str, first_event: bool = False) -> tuple[float, int]:
    """Seconds to read the whole response (or an event stream up to its
    first state event), and its size in bytes."""
    started = time.perf_counter()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=3600)
    connection.request("GET", path, headers={"Authorization": f"Bearer {token}"})
    response = connection.getresponse()
    size = 0
    if first_event:
        while line := response.readline():
            size += len(line)
            if line.startswith(b"event: state"):
                break
    else:
        size = len(response.read())
    connection.close()
    assert response.status == 200, (path, response.status)
    return time.perf_counter() - started, size


def timed_cli(jobs: JobsDir, *args: str) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "logist", "--jobs-dir", str(jobs.path), *args], check=True,
                   stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def median(run, times: int = 3) -> float:
    return statistics.median(run() for _ in range(times))


def peak_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmHWM:\s+(\d+) kB", status).group(1)) / 1024


def stop(process) -> None:
    process.terminate()
    process.wait(30)


def list_figures(root: Path, count: int) -> None:
    jobs = JobsDir(root / "many")
    jobs.init()
    started = time.perf_counter()
    for n in range(count):
        create_job(jobs, f"job-{n:04d}", f"Write module {n}")
    print(f"made {count} jobs in {time.perf_counter() - started:.0f} s", flush=True)
    cli = median(lambda: timed_cli(jobs, "job", "list"))
    process, port, token = serve(jobs)
    try:
        page, size = min(get(port, token, "/") for _ in range(3))
    finally:
        stop(process)
    print(f"list of {count} jobs: GET / {page:.2f} s ({size // 1024} KB) vs logist job list {cli:.2f} s: "
          f"{page / cli:.2f}x (target <= 2x)", flush=True)


def job_figures(root: Path, steps: int) -> None:
    jobs, job, entries = build(root / "long", 0, 50, entries=steps)
    size = job.history_path.stat().st_size / 1e6
    print(f"built a job of {entries} entries ({size:.0f} MB of history)", flush=True)
    cli = median(lambda: timed_cli(jobs, "job", "report", "bench"), 1)
    process, port, token = serve(jobs)
    try:
        latest, latest_size = get(port, token, "/jobs/bench")
    finally:
        stop(process)
    process, port, token = serve(jobs, "--page-size", str(entries))
    try:
        whole, whole_size = get(port, token, "/jobs/bench")
    finally:
        stop(process)
    print(f"job of {entries} entries: its page (last 500) {latest:.2f} s ({latest_size // 1024} KB), the whole "
          f"timeline on one page {whole:.2f} s ({whole_size // 1024} KB), vs logist job report {cli:.2f} s: "
          f"{latest / cli:.2f}x and {whole / cli:.2f}x (target <= 2x)", flush=True)


def stream_events(port: int, token: str, path: str):
    """An open event stream: a function that reads it up to the next event of
    a kind, returning that event's id (or None) and the seconds it took."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=3600)
    connection.request("GET", path, headers={"Authorization": f"Bearer {token}"})
    response = connection.getresponse()
    assert response.status == 200, (path, response.status)

    def until(kind: str) -> tuple[Optional[str], float]:
        started, event_id = time.perf_counter(), None
        while line := response.readline():
            if line.startswith(b"id: "):
                event_id = line[4:].strip().decode()
            if line.startswith(b"event: " + kind.encode()):
                return event_id, time.perf_counter() - started
        raise SystemExit(f"the stream {path} ended before a {kind} event")

    return until, connection


def memory_figures(root: Path, size_mb: int, history: Optional[Path]) -> None:
    started = time.perf_counter()
    if history is not None:
        jobs = JobsDir(history)
        job = jobs.job("bench")
        entries = job.last_entry().sequence
    else:
        jobs, job, entries = build(root / "huge", size_mb, 50)
    size = job.history_path.stat().st_size / 1e6
    print(f"{'took' if history else 'built'} a history of {size:.0f} MB ({entries} entries) in "
          f"{time.perf_counter() - started:.0f} s", flush=True)
    process, port, token = serve(jobs)
    appended = None
    try:
        idle = peak_mb(process.pid)
        latest, _ = get(port, token, "/jobs/bench")
        first, _ = get(port, token, "/jobs/bench?from=1")
        middle, _ = get(port, token, f"/jobs/bench?from={entries // 2}")
        update, _ = get(port, token, f"/jobs/bench/events?from={entries - 499}&after={entries - 20}", first_event=True)
        # A live update: the page's stream is open; one more entry is recorded, and the time it takes to
        # come (the stream looks at the file every POLL_SECONDS) is measured from the append.
        until, connection = stream_events(port, token, f"/jobs/bench/events?from={entries - 499}&after={entries}")
        until("state")
        entry = job.entry(entries).dump()
        appended = job.history_path.stat().st_size
        append_entry(job, HistoryEntry.model_validate({**entry, "sequence": entries + 1}))
        event_id, live = until("step")
        assert event_id == str(entries + 1), event_id
        connection.close()
        peak = peak_mb(process.pid)
    finally:
        stop(process)
        if appended is not None:  # the history as it was (it may be reused)
            with open(job.history_path, "r+b") as handle:
                handle.seek(appended - len(TAIL))
                handle.write(TAIL)
                handle.truncate()
    print(f"{size:.0f} MB history: the latest page {latest:.2f} s, the first page {first:.2f} s, a page in the middle "
          f"{middle:.2f} s, an event stream's first update (20 entries) {update:.2f} s, a live update (one entry "
          f"recorded, polled every {POLL_SECONDS} s) {live:.2f} s after the append (target: well under 2 s); "
          f"server peak {peak:.0f} MB (idle {idle:.0f} MB; target < 200 MB)", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--skip-memory", action="store_true")
    parser.add_argument("--only-memory", action="store_true", help="Only the 1 GB history's figures.")
    parser.add_argument("--history", type=Path, help="A jobs directory whose job 'bench' has the long history "
                        "(bench/views_memory.py --keep DIR builds one), used instead of building it.")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="logist-serve-bench-"))
    try:
        if not args.only_memory:
            list_figures(root, args.jobs)
            job_figures(root, args.steps)
        if not args.skip_memory:
            memory_figures(root, args.size_mb, args.history)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
