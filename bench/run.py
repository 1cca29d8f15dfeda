"""Logist's benchmarks in one run: one table, each figure beside its floor,
the ratio and whether it meets its target, written to
``bench/results.json``, and the table of docs/performance.md made from it
(:func:`logist.docs_pages.write_pages`).

Every time is what a user waits for, measured in this run on this machine:

- floors: ``python -c pass``, ``python -c "import openai"``, ``git add -A``
  plus ``git commit`` of the same change a step commits, a plain fsynced
  append of a history entry's size, and what a command that reads a job's
  file cannot go below with Logist's dependencies: ``import click``, and it
  with one small JSON file read through a pydantic model;
- start-up: ``logist --help`` and ``--version`` as processes against
  ``import click``, ``job status`` against click and one model read, ``job
  list`` (100 and 1,000 jobs) against ``python -c pass`` (and that
  dependencies' floor);
- a step in process: ``Job.call()`` of the Python API (``job step
  --oneshot``) from its entry to its return, in a fresh interpreter, so the
  first step pays the openai import and the client the process keeps; the
  median of the later steps is the step's own time (the endpoint is a local
  server that answers at once), and the same with the in-memory model (no
  socket, no SDK: what LangGraph's row is set against);
- a step as a process: ``logist job step --oneshot`` from the process's
  start to its exit;
- the same step in LangGraph with its SQLite checkpointer plus the same git
  commit (bench/langgraph_step.py; the ``bench`` extra, which
  ``--with-langgraph`` installs into a venv of its own under bench/out/);
- a call through the agent gateway against the same call made directly
  (bench/gateway.py); a job's check run (``job check``) against its command
  run by ``subprocess.run`` alone; the step that runs a job's due check;
- replay: steps per second through the replay server (``job run`` against
  ``logist replay-server``'s server) and posted (``job replay``);
- ``logist demo``, and the test suite with ``--with-suite``;
- the history-size and history-scaling rows (bench/history_size.py,
  bench/history_scaling.py) and concurrency.

Child processes run as after an install: with compiled bytecode (a cache
outside the tree, filled by a first run), whatever ``PYTHONDONTWRITEBYTECODE``
says. Process times are medians of repeated runs.

    python bench/run.py [--quick] [--with-suite] [--with-batch] [--with-live] [--with-langgraph]

Figures only: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_rows as rows  # noqa: E402
from bench_rows import Row, table  # noqa: E402

from logist.docs_pages import write_pages  # noqa: E402
from logist.engine.create import create_job  # noqa: E402
from logist.engine.step import post_answer
from logist.store.jobsdir import JobsDir
from logist.store.session import JobFiles
from logist.replay.scripted import ScriptedLLMServer  # noqa: E402


def child_env(tmp: Path, **extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(PYTHONPYCACHEPREFIX=str(tmp / "pycache"), **extra)
    return env


def median_run(argv: list[str], runs: int, env: dict, cwd: Path) -> float:
    subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # compiles, warms
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def message(i: int, files: bool = True) -> str:
    answer = {"action": "MESSAGE", "message": f"step {i}"}
    if files:
        answer["file_changes"] = [{"path": f"notes/{i % 7}.txt", "content": f"step {i}\n"}]
    return json.dumps(answer)


# -- floors -------------------------------------------------------------------------------------


#: click imported and one small JSON file read through a pydantic model: the
#: least a command that reads a job's file can do with Logist's dependencies.
ONE_MODEL = ("import click, json\nfrom pydantic import BaseModel\n"
             "class Status(BaseModel):\n    job_id: str\n    status: str\n"
             "print(Status.model_validate(json.loads('{\"job_id\": \"j\", \"status\": \"PENDING\"}')).status)\n")


def git_floor(tmp: Path, n: int) -> float:
    """``git add -A`` + ``git commit`` of the change a step makes: the least git work of a commit."""
    repo = tmp / "gitfloor"
    repo.mkdir()
    env = dict(os.environ, GIT_AUTHOR_NAME="b", GIT_AUTHOR_EMAIL="b@b", GIT_COMMITTER_NAME="b", GIT_COMMITTER_EMAIL="b@b")
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True, env=env)
    times = []
    for i in range(n):
        (repo / "notes").mkdir(exist_ok=True)
        (repo / "notes" / f"{i % 7}.txt").write_text(f"step {i}\n")
        started = time.perf_counter()
        subprocess.run(["git", "add", "-A"], cwd=repo, check=True, env=env)
        subprocess.run(["git", "commit", "-q", "--no-verify", "-m", f"step {i}"], cwd=repo, check=True, env=env)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def append_floor(tmp: Path, n: int, size: int = 2000) -> float:
    """Appending one entry-sized line to a file and fsyncing it."""
    line = b"x" * (size - 1) + b"\n"
    times = []
    with open(tmp / "append.jsonl", "ab") as handle:
        for _ in range(n):
            started = time.perf_counter()
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())
            times.append(time.perf_counter() - started)
    return statistics.median(times)


def floors(tmp: Path, runs: int, steps: int) -> dict:
    env = child_env(tmp)
    found = {
        "python": median_run([sys.executable, "-c", "pass"], runs, env, tmp),
        "openai": median_run([sys.executable, "-c", "import openai"], runs, env, tmp),
        # What the start-up commands cannot go below: the CLI library, and it
        # with one file read through a pydantic model (the rule for every file).
        "click": median_run([sys.executable, "-c", "import click"], runs, env, tmp),
        "click_model": median_run([sys.executable, "-c", ONE_MODEL], runs, env, tmp),
        "git": git_floor(tmp, steps),
        "append": append_floor(tmp, steps),
    }
    rows.add(Row("floor: python -c pass", found["python"]))
    rows.add(Row('floor: python -c "import openai"', found["openai"]))
    rows.add(Row('floor: python -c "import click"', found["click"], found["python"], "python"))
    rows.add(Row("floor: import click + one pydantic model read", found["click_model"], found["python"], "python"))
    rows.add(Row("floor: git add -A + git commit of a step's change", found["git"]))
    rows.add(Row("floor: fsynced append of 2 KB", found["append"]))
    return found


# -- start-up -----------------------------------------------------------------------------------


def make_jobs(root: Path, count: int) -> None:
    """A jobs directory of ``count`` jobs: one created, the others copies of it."""
    import shutil

    jobs = JobsDir(root)
    first = create_job(jobs, "job-0", "Measure job list")
    index = jobs.read_index()
    for i in range(1, count):
        job_id = f"job-{i}"
        shutil.copytree(first.dir, root / job_id, ignore=shutil.ignore_patterns("workspace"))
        manifest = JobFiles(root / job_id).manifest_path
        manifest.write_text(manifest.read_text().replace('"job_id": "job-0"', f'"job_id": "{job_id}"'))
        index.jobs[job_id] = job_id
        index.queue.append(job_id)
    jobs.write_index(index)


def bench_startup(tmp: Path, runs: int, floor: dict) -> None:
    env = child_env(tmp)
    logist = [sys.executable, "-m", "logist"]
    for label, argv in (("logist --help", ["--help"]), ("logist --version", ["--version"])):
        t = median_run(logist + argv, runs, env, tmp)
        rows.add(Row(f"start-up: {label}", t, floor["click"], "import click", target=1.5))
    make_jobs(tmp / "jobs100", 100)
    make_jobs(tmp / "jobs1000", 1000)
    status = median_run(logist + ["--jobs-dir", str(tmp / "jobs100"), "job", "status", "job-0"], runs, env, tmp)
    rows.add(Row("start-up: logist job status", status, floor["click_model"], "click + a model", target=1.3))
    list100 = median_run(logist + ["--jobs-dir", str(tmp / "jobs100"), "job", "list"], runs, env, tmp)
    rows.add(Row("start-up: logist job list (100 jobs)", list100, floor["python"], "python", target=4.0))
    rows.add(Row("  job list against its dependencies' floor", list100, floor["click_model"], "click + a model"))
    list1000 = median_run(logist + ["--jobs-dir", str(tmp / "jobs1000"), "job", "list"], max(3, runs // 3), env, tmp)
    rows.add(Row("logist job list (1,000 jobs)", list1000, list100, "100 jobs", target=12.0))


# -- a step -------------------------------------------------------------------------------------


def step_worker(jobs_dir: str, job_id: str, base_url: str, steps: int) -> None:
    """In a fresh interpreter: ``steps`` calls of ``Job.call()`` (``job step
    --oneshot`` through the Python API, whose jobs keep their endpoints'
    clients for the process, as ``job run`` and the batch engines do), timed
    from its entry. ``base_url`` ``memory``: the calls go to the in-memory
    model (:class:`~logist.replay.scripted.ScriptedModel`, the same answers)
    instead of a server, so no socket and no SDK: the step's own work."""
    import logist

    if base_url == "memory":
        from logist.replay.scripted import ScriptedModel

        job = logist.open(jobs_dir, model=ScriptedModel([message(i) for i in range(steps)])).job(job_id)
    else:
        job = logist.open(jobs_dir, base_url=base_url).job(job_id)
    times = []
    for _ in range(steps):
        started = time.perf_counter()
        job.call()
        times.append(time.perf_counter() - started)
    print(json.dumps(times))


def bench_step(tmp: Path, steps: int, process_steps: int, floor: dict) -> None:
    jobs = JobsDir(tmp / "stepjobs")
    create_job(jobs, "steps", "Measure a step", max_steps=steps + process_steps + 10)
    env = child_env(tmp, LOGIST_JOBS_DIR=str(jobs.path))
    with ScriptedLLMServer([message(i) for i in range(steps)]) as server:
        out = subprocess.run([sys.executable, __file__, "--step-worker", str(jobs.path), "steps", server.base_url, str(steps)],
                             env=env, check=True, capture_output=True, text=True).stdout
    times = json.loads(out)
    in_process = statistics.median(times[1:])
    target = 2 * floor["git"] + 0.005
    rows.add(Row(f"step in process, median of {steps - 1}", in_process, floor["git"], "git", target=target, absolute=True,
                 target_text=f"<= 2x git + 5 ms = {target * 1000:.1f} ms"))
    rows.add(Row("first step in a process (openai import, client)", times[0], floor["openai"], "import openai"))
    create_job(jobs, "memory", "Measure a step", max_steps=steps + 10)
    out = subprocess.run([sys.executable, __file__, "--step-worker", str(jobs.path), "memory", "memory", str(steps)],
                         env=env, check=True, capture_output=True, text=True).stdout
    in_memory = statistics.median(json.loads(out)[1:])
    rows.add(Row(f"step in process, in-memory model, median of {steps - 1}", in_memory, in_process,
                 "the same through a local server"))
    with ScriptedLLMServer([message(steps + i) for i in range(process_steps + 1)]) as server:
        argv = [sys.executable, "-m", "logist", "job", "step", "--oneshot", "steps", "--base-url", server.base_url]
        as_process = median_run(argv, process_steps, env, tmp)
    bound = floor["openai"] + in_process
    rows.add(Row(f"step as a process, median of {process_steps}", as_process, bound, "import openai + step",
                 target=1.3))
    return in_process, in_memory


#: The venv ``--with-langgraph`` gives the ``bench`` extra when this interpreter lacks it (bench/out/ is not committed).
LANGGRAPH_VENV = HERE / "out" / "langgraph-venv"


def langgraph_python(install: bool) -> tuple[Optional[str], str]:
    """The interpreter that has LangGraph: this one, else :data:`LANGGRAPH_VENV`
    (made, and the ``bench`` extra installed into it, with ``install``); or
    None and why not."""
    import langgraph_step

    why = langgraph_step.available()
    if why is None:
        return sys.executable, ""
    python = LANGGRAPH_VENV / "bin" / "python"
    probe = [str(python), "-c", "import langgraph.graph, langgraph.checkpoint.sqlite"]
    if python.exists() and subprocess.run(probe, capture_output=True).returncode == 0:
        return str(python), ""
    if not install:
        return None, f"{why}; or --with-langgraph installs it into {LANGGRAPH_VENV.relative_to(HERE.parent)}"
    print(f"installing the bench extra into {LANGGRAPH_VENV}...", file=sys.stderr, flush=True)
    made = subprocess.run([sys.executable, "-m", "venv", str(LANGGRAPH_VENV)], capture_output=True, text=True)
    if made.returncode == 0:
        made = subprocess.run([str(python), "-m", "pip", "install", "-q", "-e", f"{HERE.parent}[bench]"],
                              capture_output=True, text=True)
    if made.returncode != 0 or subprocess.run(probe, capture_output=True).returncode != 0:
        last = (made.stderr or made.stdout).strip().splitlines()[-1:] or ["no output"]
        return None, f"the bench extra could not be installed into {LANGGRAPH_VENV.name}: {last[0]}"
    return str(python), ""


def bench_langgraph(tmp: Path, steps: int, step: float, install: bool) -> None:
    """LangGraph's step (bench/langgraph_step.py, in the interpreter that has
    it) beside Logist's step in process with the in-memory model: LangGraph's
    makes no call either, so both figures are the framework's own work a step
    (the same step through a local server is the row above it)."""
    python, why = langgraph_python(install)
    if python is None:
        rows.add(Row("LangGraph + SqliteSaver + git commit, a step", None, note=why))
        return
    (tmp / "langgraph").mkdir()
    done = subprocess.run([python, str(HERE / "langgraph_step.py"), "--steps", str(steps), "--json", "--root",
                           str(tmp / "langgraph")], capture_output=True, text=True, check=True)
    lg = json.loads(done.stdout.strip().splitlines()[-1])["median"]
    rows.add(Row("LangGraph + SqliteSaver + git commit, a step", lg))
    rows.add(Row("step in process (in-memory model) against LangGraph's", step, lg, "LangGraph", target=1.5))


# -- the agent gateway and the checks ------------------------------------------------------------


def bench_gateway(quick: bool) -> None:
    """bench/gateway.py's cases, 4 pieces sent at once: the gateway's own work per call."""
    import gateway

    for name, direct, through in gateway.measure(30 if quick else 200, 4, 0.0, whole=True):
        bound = 1.1 * direct + 0.005
        rows.add(Row(f"agent gateway: a call, {name}", through, direct, "direct", target=bound, absolute=True,
                     target_text=f"<= 1.1x direct + 5 ms = {bound * 1000:.1f} ms"))


#: The check the check rows run: a command a test runner's size would hide Logist's share in.
CHECK = "grep -c step notes/0.txt"


def _checked_job(jobs: JobsDir, job_id: str):
    """A job with :data:`CHECK`, its workspace holding what the check reads."""
    job = create_job(jobs, job_id, "Measure a check", checks=[CHECK], max_steps=20)
    post_answer(job, message(0))  # notes/0.txt, committed
    return job


def bench_checks(tmp: Path, runs: int, step: float) -> None:
    """A check run (``job check``: the sandboxed run, its entry recorded
    under the lock, the workspace put back) against the same command run
    bare, medians taken in turns; and the step that runs a job's due
    check (the Worker's COMPLETED posted before it) against that bare run
    plus a step in process."""
    from logist.engine.checks import check_job
    from logist.engine.step import step_once
    from logist.replay.scripted import answer

    jobs = JobsDir(tmp / "checkjobs")
    job = _checked_job(jobs, "checked")
    check_job(job)  # warm
    bare_times, run_times = [], []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(CHECK, shell=True, cwd=job.workspace, capture_output=True)
        bare_times.append(time.perf_counter() - started)
        started = time.perf_counter()
        result = check_job(job)
        run_times.append(time.perf_counter() - started)
        if result.error:
            raise SystemExit(f"the check failed: {result.error}")
    bare, ran = statistics.median(bare_times), statistics.median(run_times)
    bound = 1.2 * bare + 0.010
    rows.add(Row("a check run (job check)", ran, bare, "subprocess.run", target=bound, absolute=True,
                 target_text=f"<= 1.2x subprocess.run + 10 ms = {bound * 1000:.1f} ms"))
    done = answer("COMPLETED", "notes/0.txt holds the step.", ["notes/0.txt"])
    times = []
    for n in range(max(3, runs // 2)):
        due = _checked_job(jobs, f"due-{n}")
        post_answer(due, done)  # the Worker's COMPLETED: its check is due
        started = time.perf_counter()
        result = step_once(due)
        times.append(time.perf_counter() - started)
        if result.action != "CHECKS_PASSED":
            raise SystemExit(f"the step did not run the check: {result.action} {result.error}")
    rows.add(Row("a step that runs the job's due check", statistics.median(times), bare + step,
                 "subprocess.run + a step in process"))


# -- replay, demo, suite ------------------------------------------------------------------------


def bench_replay(tmp: Path, steps: int) -> None:
    from logist.engine.loop import run_job
    from logist.replay.apply import read_history_file, replay_history
    from logist.replay.server import ReplayLLMServer

    jobs = JobsDir(tmp / "replayjobs")
    source = create_job(jobs, "source", "Record a history", max_steps=steps)
    for i in range(steps):
        post_answer(source, message(i, files=False))
    history = read_history_file(source.history_path)
    target = create_job(jobs, "posted", "Record a history", max_steps=steps)
    started = time.perf_counter()
    count = replay_history(target, history)
    posted = count / (time.perf_counter() - started)
    served = create_job(jobs, "served", "Record a history", max_steps=steps)
    # The server as ``logist replay-server JOB`` runs it: the recording's folder (its response_formats/ at hand),
    # no request kept (each is the whole turn so far).
    # Its start is measured too: it indexes each recorded call's request as it loads the recording.
    started = time.perf_counter()
    replay_server = ReplayLLMServer(source.history_path.parent, keep_requests=False)
    loaded = time.perf_counter() - started
    with replay_server as server:
        started = time.perf_counter()
        results = run_job(served, base_url=server.base_url)
        elapsed = time.perf_counter() - started
    calls = sum(1 for r in results if r.action == "MESSAGE")
    rows.add(Row(f"replay through the replay server ({calls} MESSAGE steps)", calls / elapsed, unit="steps/s",
                 target=100, higher=True))
    rows.add(Row(f"replay posted, job replay ({count} MESSAGE steps)", posted, unit="steps/s", target=500, higher=True))
    rows.add(Row(f"replay server loading that recording ({server.total} calls)", loaded))


def bench_demo(tmp: Path, runs: int) -> None:
    times = []
    for n in range(runs):
        cwd = tmp / f"demo{n}"
        cwd.mkdir()
        env = child_env(tmp, LOGIST_JOBS_DIR=str(cwd / "jobs"))
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "logist", "demo"], cwd=cwd, env=env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - started)
    rows.add(Row("logist demo", statistics.median(times), target=2.0, target_text="<= 2 s", absolute=True))


def bench_suite(with_suite: bool) -> None:
    if not with_suite:
        rows.add(Row("test suite (python -m pytest)", None, note="not run (--with-suite)"))
        return
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=HERE.parent,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    last = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else f"exit {done.returncode}"
    rows.add(Row("test suite (python -m pytest)", elapsed, target=90.0, target_text="<= 90 s", absolute=True,
                 note=last.strip("= ")))
    # The CPU time of the suite and every process it waited for: on this
    # machine's cores the wall time cannot go below it divided by their number.
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    cores = os.cpu_count() or 1
    rows.add(Row(f"  test suite's CPU time over {cores} cores", cpu / cores, text=f"{cpu:.0f} s CPU",
                 floor_text=f"{cpu / cores:.0f} s wall at the least", ratio_text=""))


def bench_batch(tmp: Path, wanted: bool, quick: bool) -> None:
    if not wanted:
        rows.add(Row("batch per engine (bench/batch.py)", None, note="not run (--with-batch)"))
        return
    from batch import batch_rows

    batch_rows(tmp, 8 if quick else 20, 0.2 if quick else 0.5)


def bench_live(wanted: bool, quick: bool) -> None:
    """bench/live.py's figures (the live extra): Logist's share of a step
    against a real engine, and its token counts against the engine's."""
    if not wanted:
        rows.add(Row("live engine: Logist's share of a step (bench/live.py)", None, note="not run (--with-live)"))
        return
    from live import done_with_failing_check, measure, missing, token_error

    why = missing()
    if why:
        rows.add(Row("live engine: Logist's share of a step (bench/live.py)", None, note=why))
        return
    runs = measure([1] if quick else [1, 2, 3, 4, 5])
    share = sum(r["own_share"] for r in runs) / len(runs)
    approved = sum(r["status"] == "APPROVAL_REQUIRED" for r in runs)
    rows.add(Row("live engine: Logist's own time per step, share of the step", share * 100, target=5.0, unit="%",
                 absolute=True, target_text="at most 5%",
                 note=f"{approved}/{len(runs)} runs to APPROVAL_REQUIRED (SmolLM2-135M, llama-cpp-python)"))
    rows.add(Row("live engine: recorded prompt tokens off the engine's count", token_error(runs) * 100, unit="%",
                 note="the engine's stream sends no usage: counted by its tokenizer"))
    failing, checked = done_with_failing_check(runs)
    rows.add(Row("live engine: jobs with a check presented as done with it failing", failing / checked * 100, unit="%",
                 target=0.0, absolute=True, target_text="0",
                 note=f"{failing}/{checked} fizzbuzz.py jobs at APPROVAL_REQUIRED or SUCCESS with the check failing"))


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--step-worker":
        step_worker(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
        return
    parser = argparse.ArgumentParser(description="Logist's benchmarks: one table of figures, ratios and targets.")
    parser.add_argument("--quick", action="store_true", help="Fewer runs and smaller sizes (a smoke test).")
    parser.add_argument("--with-suite", action="store_true", help="Also time the test suite (minutes).")
    parser.add_argument("--with-batch", action="store_true",
                        help="Also time a batch on each engine (bench/batch.py: about 3 minutes).")
    parser.add_argument("--with-live", action="store_true",
                        help="Also run bench/live.py against a real engine (the live extra; about 10 minutes).")
    parser.add_argument("--with-langgraph", action="store_true",
                        help="Install the bench extra (LangGraph) into bench/out/langgraph-venv if it is missing.")
    parser.add_argument("--only", metavar="SECTIONS",
                        help="Run only these sections (comma-separated, as printed while running: 'a step,replay'), "
                             "and the floors; the results go to bench/out/only.json unless --json says where.")
    parser.add_argument("--json", help="Where to write the results (default: bench/results.json, from which "
                                       "docs/performance.md's table is made).")
    args = parser.parse_args()
    if args.json is None:
        args.json = str(HERE / "out" / "only.json") if args.only else str(HERE / "results.json")
        Path(args.json).parent.mkdir(exist_ok=True)
    quick = args.quick
    started = time.perf_counter()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        sections = [
            ("floors", lambda: floors(tmp, 5 if quick else 21, 20 if quick else 100)),
            ("start-up", lambda: bench_startup(tmp, 5 if quick else 21, found)),
            ("a step", lambda: found.update(zip(("step", "step in memory"),
                                                bench_step(tmp, 20 if quick else 200, 5 if quick else 20, found)))),
            ("LangGraph", lambda: bench_langgraph(tmp, 20 if quick else 200, found["step in memory"],
                                                  args.with_langgraph)),
            ("the agent gateway", lambda: bench_gateway(quick)),
            ("checks", lambda: bench_checks(tmp, 7 if quick else 31, found["step"])),
            ("replay", lambda: bench_replay(tmp, 100 if quick else 1000)),
            ("demo", lambda: bench_demo(tmp, 1 if quick else 5)),
            ("history scaling", lambda: rows.history_scaling(quick)),
            ("history size and a long turn", lambda: rows.history_size(quick)),
            ("concurrency", lambda: rows.concurrency(tmp, child_env(tmp))),
            ("batch", lambda: bench_batch(tmp, args.with_batch, quick)),
            ("live engine", lambda: bench_live(args.with_live, quick)),
            ("test suite", lambda: bench_suite(args.with_suite)),
        ]
        if args.only:
            wanted = {name.strip() for name in args.only.split(",")} | {"floors"}
            if wanted & {"LangGraph", "checks"}:
                wanted.add("a step")  # theirs are read beside the step's
            unknown = wanted - {name for name, _ in sections}
            if unknown:
                parser.error(f"no section named {', '.join(sorted(unknown))}; "
                             f"the sections: {', '.join(name for name, _ in sections)}")
            sections = [(name, run) for name, run in sections if name in wanted]
        found: dict = {}
        for name, run in sections:
            print(f"{name}...", file=sys.stderr, flush=True)
            result = run()
            if name == "floors":
                found.update(result)
    machine = {
        "cpus": os.cpu_count(), "python": sys.version.split()[0], "platform": platform.platform(),
        "load_average_before": round(load_before[0], 2), "load_average_after": round(os.getloadavg()[0], 2),
        "total_seconds": round(time.perf_counter() - started), "quick": quick,
    }
    print(table())
    print(f"\n({machine['total_seconds']} s, {machine['cpus']} CPUs, Python {machine['python']}, "
          f"load average {machine['load_average_before']} before, {machine['load_average_after']} after)")
    Path(args.json).write_text(json.dumps({"machine": machine, "rows": rows.as_data()}, indent=2) + "\n")
    if Path(args.json).resolve() == (HERE / "results.json").resolve():
        # docs/performance.md's table is made from bench/results.json: refreshed with it.
        for page in write_pages(only=("performance",)):
            print(f"wrote {page}", file=sys.stderr)


if __name__ == "__main__":
    main()
