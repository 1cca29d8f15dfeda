"""Prompt size per round over 50 rounds, with compaction off and on.

A Worker answers 50 MESSAGE rounds (each answer about 600 characters)
against a scripted local server; with compaction on (threshold 10, retain 3)
the server also answers the summary calls with a 1,200-character summary.
Prints the size of the role's prompt (characters of all messages) at each
round, and the largest, for both runs.

    python bench/compaction.py [--rounds 50]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from logist.engine.create import create_job
from logist.engine.step import step_once
from logist.store.jobsdir import JobsDir
from logist.engine.compaction import due
from logist.store.prompts import builtin
from logist.store.roles import load_roles
from logist.resources import data_dir
from logist.replay.scripted import ScriptedLLMServer

COMPACTION_PROMPT = builtin().render("compaction/system")


def run(rounds: int, compress: bool) -> list[int]:
    with tempfile.TemporaryDirectory() as tmp:
        jobs = JobsDir(Path(tmp) / "jobs")
        jobs.init()
        role = json.loads((data_dir("roles") / "worker.json").read_text())
        role.update(prompt_compression=compress, compaction_threshold=10, compaction_retain_recent=3)
        (jobs.path / "roles" / "worker.json").write_text(json.dumps(role))
        job = create_job(jobs, "bench", "A long task", max_steps=rounds + 10)
        sizes: list[int] = []
        worker = load_roles(jobs.path)["Worker"]
        with ScriptedLLMServer() as server:
            while len(sizes) < rounds:
                if due(job.manifest().turn, worker) is not None:
                    server.add("summary " + "s" * 1200)
                else:
                    server.add(json.dumps({"action": "MESSAGE", "message": f"round {len(sizes) + 1}: " + "w" * 600}))
                before = len(server.requests)
                step_once(job, base_url=server.base_url)
                request = server.requests[before]
                if request["messages"][0]["content"] != COMPACTION_PROMPT:
                    sizes.append(sum(len(m["content"]) for m in request["messages"]))
        return sizes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=50)
    args = parser.parse_args()
    off, on = run(args.rounds, False), run(args.rounds, True)
    print(f"{'round':>5} {'prompt chars, off':>18} {'prompt chars, on':>17}")
    for i in range(args.rounds):
        if i == 0 or (i + 1) % 5 == 0:
            print(f"{i + 1:>5} {off[i]:>18,} {on[i]:>17,}")
    print(f"{'max':>5} {max(off):>18,} {max(on):>17,}")
    print(f"compaction on keeps the prompt bounded: max over rounds 26-50 = {max(on[25:]):,} "
          f"vs rounds 11-25 = {max(on[10:25]):,}")


if __name__ == "__main__":
    main()
