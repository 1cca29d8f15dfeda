"""Peak memory of ``logist job report`` and ``logist job transcript --rebuild`` on a long history.

Builds a job whose ``jobHistory.json`` holds about ``--size-mb`` MB (default
1,024) of format 2 entries, written in the exact bytes ``append_entry``
produces: turns of ``--rounds`` calls (default 50) whose first call sends
its whole prompt (a system prompt and an opening message, about 8 KB) and
whose later calls continue the one before with what they added (a command's
output or a note, a few KB), answers with file changes of a few KB, and a
workspace commit every fifth call (real commits, made with ``git
fast-import``, so the report's diffs are real). Then runs each command as
its own process and prints its peak resident memory (VmHWM, read by the
process itself as it exits) and wall time against the history's size, with ``logist job
list`` as the floor (Python, the libraries, Logist's imports, a manifest).

    python bench/views_memory.py [--size-mb 1024] [--rounds 50] [--keep DIR]

Target (issue 13): at most 200 MB on a 1 GB history. Figures only.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from logist.engine.create import create_job
from logist.store.jobsdir import JobsDir
from logist.store.history import TAIL, header, layout

COMMITS = 400
COMMIT_EVERY = 5


def text_block(seed: int, size: int) -> str:
    """``size`` characters of varied, code-like lines."""
    lines, total, n = [], 0, 0
    while total < size:
        line = f"def f_{seed}_{n}(x, y={n % 7}):  # {seed * 31 + n} <b>\"quoted\"</b>\treturn x * {n}"
        lines.append(line)
        total += len(line) + 1
        n += 1
    return "\n".join(lines)[:size]


def make_commits(workspace: Path, count: int) -> list[str]:
    """``count`` commits, each changing one module, made in one git process."""
    stream = []
    for i in range(count):
        content = text_block(i, 3000).encode()
        message = f"step {i}".encode()
        stream.append(
            b"commit refs/heads/bench\nmark :%d\ncommitter Bench <bench@localhost> 1700000000 +0000\n" % (i + 1)
            + b"data %d\n%s\n" % (len(message), message)
            + (b"from :%d\n" % i if i else b"")
            + b"M 100644 inline src/mod%d.py\ndata %d\n%s\n" % (i % 10, len(content), content)
        )
    marks = workspace / ".git" / "bench-marks"
    subprocess.run(["git", "fast-import", "--quiet", f"--export-marks={marks}"], cwd=workspace,
                   input=b"".join(stream), check=True)
    by_mark = dict(line.split() for line in marks.read_text().splitlines())
    marks.unlink()
    return [by_mark[f":{i + 1}"] for i in range(count)]


def command_output(seq: int) -> str:
    return "Command output:\n$ ls -R src\n--- stdout ---\n" + text_block(seq, 2500) + "\nExit code: 0"


def call_entry(seq: int, turn_start: int, calls: int, commit: str, workspace: str) -> dict:
    """A Worker call: the first of a turn sends its prompt in full, a later
    one continues the call before it."""
    at = seq - turn_start
    if at == 0:
        request = {"prompt": [
            {"role": "system", "content": "You are the Worker.\n" + text_block(seq, 3000)},
            {"role": "user", "content": "# Job\n\n## Objective\nWrite the modules.\n\n" + text_block(seq + 1, 5000)
             + f"\n\n[Step {calls} of 1000000]"},
        ]}
    else:
        # After a command (every third call), its output, as the call before recorded it.
        added = command_output(seq - 1) if at % 3 == 1 else "[Continue after informational message]"
        request = {"continues": seq - 1, "added": [{"role": "user", "content": f"{added}\n\n[Step {calls} of 1000000]"}]}
    request |= {"files_context": [], "metadata": {"role": "Worker", "phase": "RUNNING", "model": "bench-model",
                                                   "temperature": 0.2}}
    if at % 3 == 0:
        answer = {"action": "CMD", "command": "ls -R src"}
    else:
        answer = {"action": "MESSAGE", "message": f"writing module {at}",
                  "file_changes": [{"path": f"src/mod{at % 10}.py", "content": text_block(seq + 2, 2500)}]}
    entry = {
        "sequence": seq, "kind": "llm_call", "timestamp": "2026-11-23T10:04:05Z", "duration_ms": 812,
        "state_before": "RUNNING", "state_after": "RUNNING", "role": "Worker", "workspace_path": workspace,
        "request": request,
        "response": {"status": "SUCCESS", "actions": [answer["action"]], "evidence_files": [],
                     "raw_response": json.dumps(answer), "files_changed": [c["path"] for c in answer.get("file_changes", [])]},
        "usage": {"prompt_tokens": 2000 + 10 * at, "completion_tokens": 700, "cost_usd": 0.0005},
        "workspace_commit": commit,
        "state": {"status": "RUNNING", "updated_at": "2026-11-23T10:04:05Z", "last_sequence": seq,
                  "workspace_commit": commit, "calls": calls,
                  "totals": {"llm_calls": calls, "prompt_tokens": 2000 * calls, "completion_tokens": 700 * calls},
                  "turn": {"rounds": at + 1, "first_call": turn_start, "last_call": seq, "prompt_call": turn_start}},
    }
    if answer["action"] == "CMD":
        entry["command"] = {"command": "ls -R src", "decision": "run", "exit_code": 0, "duration_ms": 5,
                            "output": command_output(seq)}
    return entry


def build(root: Path, size_mb: int, rounds: int, entries: int = 0):
    """The job ``bench`` in ``root/jobs``, its history ``size_mb`` MB (or,
    with ``entries``, that many entries); (jobs, job, entries)."""
    jobs = JobsDir(root / "jobs")
    job = create_job(jobs, "bench", "Write the modules, again and again", max_steps=1_000_000)
    commits = make_commits(job.workspace, COMMITS)
    first = next(job.entry_data())
    path = job.history_path
    target = size_mb * 1_000_000
    with open(path, "wb") as out:
        out.write(header("bench") + layout(first))
        written, seq, turn_start = out.tell(), 1, 2
        while (seq < entries) if entries else (written < target):
            seq += 1
            if (seq - turn_start) == rounds:
                turn_start = seq
            commit = commits[(seq // COMMIT_EVERY) % COMMITS]
            chunk = b"," + layout(call_entry(seq, turn_start, seq - 1, commit, str(job.workspace)))
            out.write(chunk)
            written += len(chunk)
        out.write(TAIL)
    last = call_entry(seq, turn_start, seq - 1, commit, str(job.workspace))
    job.session.write_manifest(job.read_manifest().with_state(last["state"]))
    return jobs, job, seq


#: Runs ``python -m logist ARGS`` and, at exit, writes the process's peak
#: resident memory (VmHWM, in KB) to $BENCH_PEAK_FILE. Not wait4's
#: ru_maxrss: Linux counts in it the memory of the process that forked the
#: child (this benchmark, with the job built in it) before the exec.
MEASURED = """
import atexit, os, runpy, sys
def report():
    with open("/proc/self/status") as status:
        peak = next(line.split()[1] for line in status if line.startswith("VmHWM:"))
    with open(os.environ["BENCH_PEAK_FILE"], "w") as out:
        out.write(peak)
atexit.register(report)
sys.argv[0] = "logist"
runpy.run_module("logist", run_name="__main__", alter_sys=True)
"""


def run_measured(args: list[str]) -> tuple[float, float]:
    """Peak resident MB and wall seconds of ``logist ARGS`` as its own process (stdout discarded)."""
    with tempfile.NamedTemporaryFile("r", suffix=".peak") as peak:
        started = time.perf_counter()
        result = subprocess.run([sys.executable, "-c", MEASURED, *args], stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, env={**os.environ, "BENCH_PEAK_FILE": peak.name})
        elapsed = time.perf_counter() - started
        if result.returncode != 0:
            raise SystemExit(f"logist {' '.join(args)} failed: {result.stderr.decode()[-2000:]}")
        return int(peak.read()) / 1024, elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--keep", help="Build the job in this directory and keep it.")
    args = parser.parse_args()
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="logist-bench-"))
    try:
        started = time.perf_counter()
        jobs, job, entries = build(root, args.size_mb, args.rounds)
        size = job.history_path.stat().st_size / 1e6
        print(f"built jobHistory.json: {size:.0f} MB, {entries} entries ({size * 1e3 / entries:.1f} KB each), "
              f"{COMMITS} real commits, in {time.perf_counter() - started:.0f} s", flush=True)
        base = ["--jobs-dir", str(jobs.path)]
        floor, _ = run_measured(base + ["job", "list"])
        print(f"floor: logist job list peaks at {floor:.0f} MB", flush=True)
        for name, argv, output in (
            ("job report", ["job", "report", "bench"], job.report_path),
            ("job transcript --rebuild", ["job", "transcript", "bench", "--rebuild"], job.transcript_path),
        ):
            peak, seconds = run_measured(base + argv)
            print(f"{name}: peak {peak:.0f} MB ({peak / size:.3f}x the history, {peak / floor:.1f}x the floor; "
                  f"target <= 200 MB), {seconds:.0f} s, wrote {output.name} of {output.stat().st_size / 1e6:.0f} MB",
                  flush=True)
        if args.keep:
            print(f"kept: {job.dir}")
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
