"""Logist's own time and memory per step as the history grows.

For histories of 10, 1,000 and 10,000 earlier interactions whose prompts are
about 20 KB each, posts answers to the job (``post_answer``: everything a
live step does after the LLM call, including the git commit and the history
append, but no network) and prints the median wall time and the peak Python
memory per step. The history is built by writing format 2 entries in the
exact bytes ``append_entry`` produces, so building 10,000 entries takes seconds.

    python bench/history_scaling.py [--sizes 10,1000,10000] [--steps 20]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

from logist.engine.create import create_job
from logist.engine.step import post_answer
from logist.store.jobsdir import JobsDir
from logist.store.entries import HistoryEntry
from logist.store.history import TAIL, layout, header

PROMPT_BYTES = 20_000


def build_job(root: Path, size: int):
    jobs = JobsDir(root / f"jobs-{size}")
    job = create_job(jobs, "bench", "Benchmark the history")
    base = next(job.entry_data())  # the create entry, as the file holds it
    filler = ("x" * 99 + "\n") * (PROMPT_BYTES // 100)
    entries = [layout(base)]
    for seq in range(2, size + 1):
        entry = {
            "sequence": seq, "kind": "llm_call", "timestamp": base["timestamp"], "duration_ms": 100,
            "state_before": "RUNNING", "state_after": "RUNNING", "role": "Worker",
            "request": {
                "prompt": [{"role": "system", "content": "protocol"}, {"role": "user", "content": filler}],
                "metadata": {"role": "Worker", "phase": "RUNNING", "model": "m", "temperature": 0.2},
            },
            "response": {"status": "SUCCESS", "raw_response": '{"action": "MESSAGE", "message": "noted"}'},
            "state": {**base["state"], "last_sequence": seq},
        }
        if seq == 2:
            HistoryEntry.model_validate(entry)  # the template is a valid entry
        entries.append(layout(entry))
    job.history_path.write_bytes(header("bench") + b",".join(entries) + TAIL)
    manifest = job.read_manifest()
    manifest.last_sequence = size
    job.session.write_manifest(manifest)
    return job


def measure(job, steps: int) -> tuple[float, float]:
    times, peaks = [], []
    for i in range(steps):
        answer = json.dumps({"action": "MESSAGE", "message": f"step {i}",
                             "file_changes": [{"path": f"f{i % 5}.txt", "content": f"{i}\n"}]})
        tracemalloc.start()
        started = time.perf_counter()
        post_answer(job, answer)
        times.append(time.perf_counter() - started)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    return statistics.median(times), statistics.median(peaks)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,1000,10000")
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            job = build_job(Path(tmp), size)
            mb = job.history_path.stat().st_size / 1e6
            per_step, peak = measure(job, args.steps)
            rows.append((size, mb, per_step, peak))
    base = rows[0][2]
    print(f"{'earlier entries':>16} {'history MB':>11} {'ms/step':>9} {'vs first':>9} {'peak KB/step':>13}")
    for size, mb, per_step, peak in rows:
        print(f"{size:>16,} {mb:>11.1f} {per_step * 1000:>9.1f} {per_step / base:>8.2f}x {peak / 1024:>13.0f}")


if __name__ == "__main__":
    sys.exit(main())
