"""Batch wall time: the same recorded jobs run with ``logist job run --all``
on each engine, against a replay server that waits ``--latency`` seconds
before each answer (a model's response time), as ratios to serial.

Each engine gets a fresh jobs directory of ``--jobs`` jobs made from the
``wordcount`` recording (4 calls each) and runs as a ``logist`` process;
the ray rows join a Ray cluster this script starts once on this machine's
CPUs (as ``ray start --head`` would; each is compared with threads at the
same concurrency), and are left out when Ray is not
installed (``pip install 'logist-jobs[ray]'``). Every run is checked: each job
waiting for approval and the server's ledger exactly 4 calls per job.

    python bench/batch.py [--jobs 20] [--latency 0.5] [--quick]

Figures only: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_rows import Row, add, table  # noqa: E402

from logist.errors import install_hint  # noqa: E402
from logist.store.jobsdir import JobsDir  # noqa: E402
from logist.replay.fixtures import create_from_fixture, fixture_path  # noqa: E402
from logist.replay.server import ReplayLLMServer  # noqa: E402

RUNS = (("serial", ()), ("threads", ("--concurrency", "4")), ("ray", ("--concurrency", "4")),
        ("threads", ("--concurrency", "16")), ("ray", ("--concurrency", "16")))


def _ray_address() -> tuple[str | None, str]:
    try:
        import ray
    except ImportError:
        return None, f"Ray is not installed ({install_hint('ray')})"
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    # A running cluster, as `ray start --head` leaves one (the batch joins it), on this machine's CPUs.
    ray.init(address="local", num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False,
             logging_level="ERROR")
    return ray.get_runtime_context().gcs_address, ""


def run_once(tmp: Path, engine: str, options: tuple, count: int, latency: float, address: str | None) -> tuple[float, bool]:
    jobs = JobsDir(tmp / f"{engine}{''.join(options)}")
    jobs.init()
    for n in range(count):
        create_from_fixture(jobs, fixture_path("wordcount"), f"job-{n:02d}")
    extra = ("--address", address) if engine == "ray" else ()
    with ReplayLLMServer(fixture_path("wordcount"), latency=latency) as server:
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "logist", "--jobs-dir", str(jobs.path), "job", "run", "--all",
                               "--engine", engine, *options, *extra, "--base-url", server.base_url,
                               "--model", "gpt-4o-mini", "-q"], capture_output=True, text=True)
        elapsed = time.perf_counter() - started
    ok = done.returncode == 3 and len(server.ledger) == 4 * count and not server.mismatches
    if not ok:
        print(f"{engine} {options}: exit {done.returncode}\n{done.stderr[-2000:]}", file=sys.stderr)
    return elapsed, ok


def batch_rows(tmp: Path, count: int = 20, latency: float = 0.5) -> None:
    """The batch rows of bench/run.py's table."""
    address, why = _ray_address()
    serial, threads = None, {}
    try:
        for engine, options in RUNS:
            label = f"batch of {count} jobs ({4 * count} calls, {latency:g} s each): {engine}" + (
                f" x{options[1]}" if options else "")
            if engine == "ray" and address is None:
                add(Row(label, None, note=why))
                continue
            elapsed, ok = run_once(tmp, engine, options, count, latency, address)
            serial = serial or elapsed
            note = "" if ok else "a job did not end as recorded"
            if engine == "ray" and options in threads:
                # Issue 31: Ray on a running cluster within 1.3x threads at the same concurrency.
                add(Row(label, elapsed, threads[options], f"threads x{options[1]}", target=1.3, note=note,
                        met_override=False if not ok else None))
                continue
            if engine == "threads":
                threads[options] = elapsed
            add(Row(label, elapsed, serial, "serial", note=note))
    finally:
        if address is not None:
            import ray

            ray.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description="Batch wall time per engine, as ratios to serial.")
    parser.add_argument("--jobs", type=int, default=20)
    parser.add_argument("--latency", type=float, default=0.5, help="Seconds the server waits before each answer.")
    parser.add_argument("--quick", action="store_true", help="8 jobs, 0.2 s a call.")
    args = parser.parse_args()
    count, latency = (8, 0.2) if args.quick else (args.jobs, args.latency)
    with tempfile.TemporaryDirectory() as tmp:
        batch_rows(Path(tmp), count, latency)
    print(table())
    print(f"\n({os.cpu_count()} CPUs; the ray rows on a running cluster of this machine's CPUs)")


if __name__ == "__main__":
    main()
