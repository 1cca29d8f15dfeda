"""All of Logist's benchmarks in one run, printed as one table.

Each figure is printed with the floor it is compared with, measured in the
same run on the same machine, and the target from the project's issues:

- start-up: ``logist --help`` and ``logist job status`` against
  ``python -c pass`` (median wall time of repeated runs);
- step overhead: Logist's own time per step (wall time minus the LLM call's
  own duration, against an instant local server), in process over 200 steps
  and as a ``logist job step --oneshot`` process, against ``git add -A &&
  git commit`` of the same change;
- history scaling: own time and peak memory per step with 10, 1,000 and
  10,000 earlier interactions of about 20 KB each (bench/history_scaling.py);
- history size: ``jobHistory.json`` after 40 command round-trips, and a
  1,000-round turn's history against the messages exchanged and its step
  own time late against early (bench/history_size.py);
- replay throughput: steps per second of ``job replay`` over a 1,000-step
  history;
- concurrency: 8 jobs stepped by 8 processes at once, and 8 processes on one
  job; total time and whether any entry was lost.

    python bench/run.py [--quick]

Figures only: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from logist import JobsDir, create_job, load_history, post_answer  # noqa: E402
from logist.replay.scripted import ScriptedLLMServer  # noqa: E402

ROWS: list[tuple[str, str, str, str, str]] = []


def row(name: str, figure: str, floor: str = "", ratio: str = "", target: str = "") -> None:
    ROWS.append((name, figure, floor, ratio, target))
    print(f"  {name}: {figure}" + (f" (floor {floor}, {ratio})" if floor else ""), file=sys.stderr, flush=True)


def median_run(argv: list[str], runs: int, env: dict, cwd: Path) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def message(i: int) -> str:
    return json.dumps({"action": "MESSAGE", "message": f"step {i}",
                       "file_changes": [{"path": f"notes/{i % 7}.txt", "content": f"step {i}\n"}]})


def bench_startup(tmp: Path, runs: int) -> None:
    env = dict(os.environ, LOGIST_JOBS_DIR=str(tmp / "jobs"))
    jobs = JobsDir(tmp / "jobs")
    create_job(jobs, "status", "Measure start-up")
    floor = median_run([sys.executable, "-c", "pass"], runs, env, tmp)
    for label, argv, target in (("start-up: logist --help", ["--help"], 1.5),
                                ("start-up: logist job status", ["job", "status", "status"], 2.0)):
        t = median_run([sys.executable, "-m", "logist", *argv], runs, env, tmp)
        row(label, f"{t * 1000:.0f} ms", f"{floor * 1000:.0f} ms", f"{t / floor:.2f}x", f"<= {target}x")


def git_floor(tmp: Path, n: int) -> float:
    repo = tmp / "gitfloor"
    repo.mkdir()
    env = dict(os.environ, GIT_AUTHOR_NAME="b", GIT_AUTHOR_EMAIL="b@b", GIT_COMMITTER_NAME="b", GIT_COMMITTER_EMAIL="b@b")
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True, env=env)
    times = []
    for i in range(n):
        (repo / "notes").mkdir(exist_ok=True)
        (repo / "notes" / f"{i % 7}.txt").write_text(f"step {i}\n")
        started = time.perf_counter()
        subprocess.run("git add -A && git commit -q -m step", shell=True, cwd=repo, check=True, env=env)
        times.append(time.perf_counter() - started)
    return statistics.median(times)




def bench_step(tmp: Path, steps: int, process_steps: int) -> None:
    floor = git_floor(tmp, steps)
    jobs = JobsDir(tmp / "stepjobs")
    job = create_job(jobs, "steps", "Measure step overhead", max_steps=steps + process_steps + 10)
    with ScriptedLLMServer([message(i) for i in range(steps)]) as server:
        per_step = []
        for _ in range(steps):
            started = time.perf_counter()
            from logist import step_once

            step_once(job, base_url=server.base_url)
            per_step.append(time.perf_counter() - started)
    entries = [e for e in load_history(job.dir).interactions if e.kind == "llm_call"][-steps:]
    own = statistics.median(w - e.duration_ms / 1000 for w, e in zip(per_step, entries))
    target = 2 * floor + 0.015
    row(f"step overhead, in process ({steps} steps)", f"{own * 1000:.1f} ms", f"git {floor * 1000:.1f} ms",
        f"{own / floor:.2f}x", f"<= 2x git + 15 ms = {target * 1000:.1f} ms")

    env = dict(os.environ, LOGIST_JOBS_DIR=str(jobs.path))
    with ScriptedLLMServer([message(steps + i) for i in range(process_steps)]) as server:
        walls = []
        for _ in range(process_steps):
            started = time.perf_counter()
            subprocess.run([sys.executable, "-m", "logist", "job", "step", "--oneshot", "steps", "--base-url", server.base_url],
                           env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            walls.append(time.perf_counter() - started)
    entries = [e for e in load_history(job.dir).interactions if e.kind == "llm_call"][-process_steps:]
    own = statistics.median(w - e.duration_ms / 1000 for w, e in zip(walls, entries))
    row(f"step overhead, as a process ({process_steps} steps)", f"{own * 1000:.1f} ms", f"git {floor * 1000:.1f} ms",
        f"{own / floor:.2f}x", "(includes start-up)")


def bench_history(quick: bool) -> None:
    import history_scaling

    sizes = [10, 1000] if quick else [10, 1000, 10000]
    with tempfile.TemporaryDirectory() as tmp:
        results = []
        for size in sizes:
            job = history_scaling.build_job(Path(tmp), size)
            results.append((size, *history_scaling.measure(job, 15)))
    base_time, base_peak = results[0][1], results[0][2]
    for size, per_step, peak in results:
        row(f"history scaling: step with {size:,} earlier entries", f"{per_step * 1000:.1f} ms, peak {peak / 1024:.0f} KB",
            f"{base_time * 1000:.1f} ms at {sizes[0]}", f"{per_step / base_time:.2f}x time, {peak / base_peak:.2f}x memory",
            "<= 1.2x" if size == sizes[-1] else "")


def bench_history_size(quick: bool) -> None:
    import history_size

    rounds = 100 if quick else 1000
    with tempfile.TemporaryDirectory() as tmp:
        run = history_size.command_figures(Path(tmp))
        size = run["history_bytes"]
        row("history size: 40 command round-trips", f"{size / 1000:,.0f} KB", "",
            f"{size / history_size.COMMANDS_TARGET_BYTES:.2f}x the target", "< 500 KB")
        run = history_size.turn_figures(Path(tmp), rounds)
    size, exchanged, w = run["history_bytes"], run["exchanged"], run["window"]
    row(f"history size: {rounds:,}-round turn", f"{size / 1e6:,.2f} MB", f"{exchanged / 1e6:,.2f} MB exchanged",
        f"{size / exchanged:.2f}x", f"<= {history_size.HISTORY_TO_EXCHANGED_TARGET:g}x the messages exchanged")
    early, late = run["own_early"], run["own_late"]
    row(f"step own time at rounds {rounds - w + 1:,}-{rounds:,} of a turn", f"{late * 1000:.1f} ms",
        f"{early * 1000:.1f} ms at rounds 1-{w}", f"{late / early:.2f}x", f"<= {history_size.LATE_TO_EARLY_TARGET:g}x")


def bench_replay(tmp: Path, steps: int) -> None:
    jobs = JobsDir(tmp / "replayjobs")
    source = create_job(jobs, "source", "Record a long history", max_steps=steps + 5)
    for i in range(steps):
        post_answer(source, message(i))
    target = create_job(jobs, "target", "Replay it", max_steps=steps + 5)
    from logist.replay.apply import read_history_file, replay_history

    history = read_history_file(source.history_path)
    started = time.perf_counter()
    count = replay_history(target, history)
    elapsed = time.perf_counter() - started
    row(f"replay throughput ({count:,} steps)", f"{count / elapsed:.1f} steps/s", "", "", "")


def bench_concurrency(tmp: Path) -> None:
    jobs = JobsDir(tmp / "concurrent")
    for n in range(8):
        create_job(jobs, f"c{n}", "Step me")
    create_job(jobs, "shared", "Step me together", max_steps=50)
    env = dict(os.environ, LOGIST_JOBS_DIR=str(jobs.path))
    with ScriptedLLMServer([message(i) for i in range(16)]) as server:
        def launch(job_id: str, wait: bool) -> subprocess.Popen:
            argv = [sys.executable, "-m", "logist", "job", "step", "--oneshot", job_id, "--base-url", server.base_url]
            if wait:
                argv += ["--wait", "120"]
            return subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        for label, ids in (("8 jobs, 8 processes", [f"c{n}" for n in range(8)]), ("1 job, 8 processes", ["shared"] * 8)):
            started = time.perf_counter()
            procs = [launch(job_id, wait=True) for job_id in ids]
            codes = [p.wait() for p in procs]
            elapsed = time.perf_counter() - started
            lost = 0
            for job_id in set(ids):
                seqs = [e.sequence for e in load_history(jobs.job(job_id).dir).interactions]
                lost += int(seqs != list(range(1, len(seqs) + 1)))
            calls = sum(len([e for e in load_history(jobs.job(j).dir).interactions if e.kind == "llm_call"]) for j in set(ids))
            row(f"concurrency: {label}", f"{elapsed:.2f} s total", "", "",
                f"{codes.count(0)}/8 ok, {calls} calls recorded, {lost} histories with gaps")


def main() -> None:
    parser = argparse.ArgumentParser(description="Logist's benchmarks: one table of figures.")
    parser.add_argument("--quick", action="store_true", help="Fewer runs and smaller sizes (a smoke test).")
    args = parser.parse_args()
    quick = args.quick
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        print("start-up...", file=sys.stderr)
        bench_startup(tmp, 5 if quick else 21)
        print("step overhead...", file=sys.stderr)
        bench_step(tmp, 20 if quick else 200, 5 if quick else 20)
        print("history scaling...", file=sys.stderr)
        bench_history(quick)
        print("history size and a long turn...", file=sys.stderr)
        bench_history_size(quick)
        print("replay throughput...", file=sys.stderr)
        bench_replay(tmp, 100 if quick else 1000)
        print("concurrency...", file=sys.stderr)
        bench_concurrency(tmp)
    widths = [max(len(r[i]) for r in ROWS + [("figure", "value", "floor", "ratio", "target")]) for i in range(5)]
    header = ("figure", "value", "floor", "ratio", "target")
    print(" | ".join(h.ljust(w) for h, w in zip(header, widths)))
    print("-|-".join("-" * w for w in widths))
    for r in ROWS:
        print(" | ".join(c.ljust(w) for c, w in zip(r, widths)))
    print(f"\n(total {time.perf_counter() - started:.0f} s, {os.cpu_count()} CPUs, Python {sys.version.split()[0]})")


if __name__ == "__main__":
    main()
