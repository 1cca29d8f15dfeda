"""Logist against a real inference engine.

For each seed, a fresh engine (llama-cpp-python's server with
SmolLM2-135M-Instruct, tests/live/liveserver.py; the ``live`` extra) and a
fresh job of the built-in roles, unchanged: "Write hello.py that prints
hello", run to rest a step at a time; then, on the same engine, a job the
model gets wrong, fizzbuzz.py with a check that fails on its work
(``liveserver.FIZZBUZZ_CHECK``, ``--max-retries-in-a-row 1``). Printed per
run and in all:

- where the job rested, whether every answer was valid at the first try,
  and what ``python hello.py`` printed;
- Logist's own time per step as a share of the step's wall time (the step's
  time outside its call: prompt, parse, apply, git, history; target at most
  5%);
- each call's prompt tokens as Logist recorded them (the engine's stream
  sends no usage: the tokenizer's count, marked estimated) against the
  engine's own count of the same request (sent again, not streamed, with
  max_tokens 1);
- where the checked job rested, and whether its check, run again here on
  its final workspace, passes: over all the checked jobs, the share
  presented as done (APPROVAL_REQUIRED or SUCCESS) with a failing check,
  which must be 0.

    python bench/live.py [--seeds 1,2,3,4,5]

It needs the ``live`` extra only (``pip install -e '.[live]'``), not
pytest. Figures only: nothing here asserts.
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
import urllib.error
import urllib.request
from pathlib import Path
from typing import Optional

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "live"))

from liveserver import FIZZBUZZ, FIZZBUZZ_CHECK, MODEL, LiveEngine, missing  # noqa: E402

from logist.engine.create import create_job  # noqa: E402
from logist.store.jobsdir import JobsDir  # noqa: E402
from logist.engine.step import step_once  # noqa: E402
from logist.engine.workflow import STEPPABLE  # noqa: E402

OBJECTIVE = "Write hello.py that prints hello"
#: Where a job is presented as done.
DONE = ("APPROVAL_REQUIRED", "SUCCESS")


def engine_count(engine: LiveEngine, body: dict) -> Optional[int]:
    """The engine's own prompt tokens for ``body`` (asked again, not streamed, one token)."""
    plain = {k: v for k, v in body.items() if k not in ("stream", "stream_options")}
    plain["max_tokens"] = 1
    if (plain.get("response_format") or {}).get("type") == "json_schema":
        plain["response_format"] = {"type": "json_object", "schema": plain["response_format"]["json_schema"]["schema"]}
    request = urllib.request.Request(f"{engine.direct_url}/chat/completions", data=json.dumps(plain).encode(),
                                     headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=600) as answer:
            return json.load(answer)["usage"]["prompt_tokens"]
    except urllib.error.HTTPError as exc:  # the engine refused the request sent again: no count, and why
        print(f"    the engine would not count a request again: HTTP {exc.code}: "
              f"{exc.read()[:200].decode('utf-8', 'replace')}", file=sys.stderr)
        return None


def to_rest(job) -> tuple[list[float], list[float]]:
    """Step ``job`` until it rests; each step's wall time and Logist's own part of it."""
    walls, owns = [], []
    while True:
        started = time.perf_counter()
        result = step_once(job)
        wall = time.perf_counter() - started
        walls.append(wall)
        owns.append(max(0.0, wall - result.duration_ms / 1000))
        if result.status not in STEPPABLE or result.interrupted:
            return walls, owns


def checked_run(jobs: JobsDir) -> dict:
    """The job the model gets wrong, with its check: where it rested, and
    whether the check, run again here on its final workspace, passes."""
    job = create_job(jobs, "fizzbuzz", FIZZBUZZ, checks=[FIZZBUZZ_CHECK], max_retries_in_a_row=1)
    to_rest(job)
    status = str(job.manifest().status)
    entries = job.load_history().interactions
    again = subprocess.run(["sh", "-c", FIZZBUZZ_CHECK], cwd=job.workspace, capture_output=True, text=True, timeout=60)
    return {
        "status": status,
        "check_runs": sum(e.kind == "check" for e in entries),
        "calls": sum(e.kind == "llm_call" for e in entries),
        "check_passes": again.returncode == 0,
        "done_with_failing_check": status in DONE and again.returncode != 0,
        "reason": job.manifest().reason or "",
    }


def one_run(seed: int, workdir: Path) -> dict:
    jobs = JobsDir(workdir / f"jobs-{seed}")
    jobs.init()
    with LiveEngine(n_ctx=2048, seed=seed, log=workdir / f"engine-{seed}.log") as engine:
        (jobs.path / "config.json").write_text(json.dumps({"base_url": engine.base_url, "default_model": MODEL}))
        job = create_job(jobs, "hello", OBJECTIVE)
        walls, owns = to_rest(job)
        entries = [e for e in job.load_history().interactions if e.kind == "llm_call"]
        reader = job.reader()
        counts = []
        for entry in entries:
            body = job.recorded_body(entry.dump(), reader.messages(entry.sequence))
            counts.append((entry.usage.prompt_tokens, engine_count(engine, body)))
        hello = job.workspace / "hello.py"
        printed, greets = "", False
        if hello.exists():
            ran = subprocess.run([sys.executable, "hello.py"], cwd=job.workspace, capture_output=True, text=True,
                                 timeout=30)
            printed = (ran.stdout + ran.stderr).strip()
            greets = ran.returncode == 0 and "hello" in ran.stdout.lower()
        checked = checked_run(jobs)
        return {
            "seed": seed,
            "status": str(job.manifest().status),
            "calls": len(entries),
            "valid_first_try": all(e.response.status == "SUCCESS" for e in entries),
            "printed": printed[:60],
            "greets": greets,
            "own_share": sum(owns) / sum(walls),
            "own_ms_median": statistics.median(owns) * 1000,
            "wall_s_median": statistics.median(walls),
            "tokens": counts,
            "refused": [e.response.error for e in entries if e.response.status != "SUCCESS"],
            "checked": checked,
        }


def measure(seeds: list[int]) -> list[dict]:
    """One run per seed (see the module's doc), each printed as it ends."""
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in seeds:
            run = one_run(seed, Path(tmp))
            runs.append(run)
            tokens = ", ".join(f"{ours}/{theirs}" for ours, theirs in run["tokens"])
            print(f"seed {seed}: {run['status']:<22} calls {run['calls']}  valid at first try {run['valid_first_try']!s:<5}  "
                  f"hello.py -> {run['printed']!r}  Logist's share {run['own_share']:.1%} "
                  f"(median {run['own_ms_median']:.0f} ms of {run['wall_s_median']:.2f} s a step)  "
                  f"prompt tokens recorded/engine: {tokens}", file=sys.stderr)
            for reason in run["refused"]:
                print(f"    refused: {reason}", file=sys.stderr)
            checked = run["checked"]
            print(f"    fizzbuzz.py with a check: {checked['status']}, {checked['calls']} calls, {checked['check_runs']} "
                  f"runs of the check, passes now {checked['check_passes']}; {checked['reason']}", file=sys.stderr)
    return runs


def token_error(runs: list[dict]) -> float:
    """The largest relative difference between a recorded prompt count and the engine's."""
    pairs = [(ours, theirs) for r in runs for ours, theirs in r["tokens"] if theirs]
    return max(abs(ours - theirs) / theirs for ours, theirs in pairs) if pairs else 0.0


def done_with_failing_check(runs: list[dict]) -> tuple[int, int]:
    """Of the checked jobs, how many were presented as done with a failing check, and how many there were."""
    return sum(r["checked"]["done_with_failing_check"] for r in runs), len(runs)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="1,2,3,4,5")
    args = parser.parse_args(argv)
    why = missing()
    if why:
        print(f"no live engine: {why}", file=sys.stderr)
        return 1
    os.environ.pop("LOGIST_BASE_URL", None)
    os.environ.pop("OPENAI_BASE_URL", None)
    runs = measure([int(s) for s in args.seeds.split(",")])
    approved = sum(r["status"] == "APPROVAL_REQUIRED" for r in runs)
    valid = sum(r["valid_first_try"] for r in runs)
    greets = sum(r["greets"] for r in runs)
    share = sum(r["own_share"] for r in runs) / len(runs)
    pairs = [p for r in runs for p in r["tokens"] if p[1]]
    off = token_error(runs)
    failing, checked = done_with_failing_check(runs)
    stopped = sum(r["checked"]["status"] == "INTERVENTION_REQUIRED" for r in runs)
    print(f"\n{len(runs)} runs: APPROVAL_REQUIRED {approved}/{len(runs)} (target 4), every answer valid at the first try "
          f"{valid}/{len(runs)}, hello.py greets {greets}/{len(runs)} (target 3); Logist's own time {share:.1%} of a "
          f"step's wall time (target at most 5%); recorded prompt tokens within {off:.1%} of the engine's count "
          f"over {len(pairs)} calls; jobs with a check presented as done with it failing: {failing}/{checked} "
          f"({failing / checked:.0%}, target 0), at INTERVENTION_REQUIRED {stopped}/{checked}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
