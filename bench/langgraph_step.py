"""The same step in LangGraph: a checkpointed graph (SqliteSaver) doing the
state write a Logist step does, plus a git commit of the same change.

Each step is one ``graph.invoke`` on one thread: its node writes the file
change into a git workspace, commits it (``git add -A``, ``git commit``,
as Logist does), and returns the step's record (an entry of the size of a
Logist history entry) and the job's small state, which the checkpointer
stores in SQLite. No model is called on either side: the figure is the
framework's own cost per step. LangGraph is in the ``bench`` extra
(``pip install -e '.[bench]'``, or ``python bench/run.py --with-langgraph``,
which installs it into a venv of its own), never a dependency of Logist.

    python bench/langgraph_step.py [--steps 200] [--json] [--root DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Optional, TypedDict

GIT_ENV = {"GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@b"}


def available() -> Optional[str]:
    """None when LangGraph and its SQLite checkpointer can be imported, else why not."""
    try:
        import langgraph.checkpoint.sqlite  # noqa: F401
        import langgraph.graph  # noqa: F401  (both, or the row says what is missing)
    except ImportError as exc:
        return f"not installed ({exc.name}): pip install -e '.[bench]'"
    return None


class StepState(TypedDict):
    step: int
    status: str
    role: str
    workspace_commit: str
    entry: dict


def entry_for(step: int, answer: str) -> dict:
    """A record of the size and shape of a Logist history entry for one MESSAGE step."""
    return {
        "sequence": step, "kind": "llm_call", "role": "Worker",
        "request": {"added": [{"role": "user", "content": f"Step {step - 1} done. Go on."}], "continues": step - 1,
                    "metadata": {"model": "bench", "temperature": 0.2, "max_tokens": 4096}},
        "response": {"status": "SUCCESS", "actions": ["MESSAGE"], "raw_response": answer, "files_changed": ["notes.txt"]},
        "usage": {"prompt_tokens": 900, "completion_tokens": 60, "cost_usd": None},
        "state": {"status": "RUNNING", "role": "Worker", "calls": step, "totals": {"llm_calls": step, "wall_ms": 0}},
    }


def build(workspace: Path, database: Path):
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.graph import END, START, StateGraph

    env = dict(os.environ, **GIT_ENV)

    def apply(state: StepState) -> dict:
        step = state["step"] + 1
        answer = json.dumps({"action": "MESSAGE", "message": f"step {step}",
                             "file_changes": [{"path": f"notes/{step % 7}.txt", "content": f"step {step}\n"}]})
        (workspace / "notes").mkdir(exist_ok=True)
        (workspace / "notes" / f"{step % 7}.txt").write_text(f"step {step}\n")
        subprocess.run(["git", "add", "-A"], cwd=workspace, env=env, check=True)
        subprocess.run(["git", "commit", "-q", "--no-verify", "-m", f"step {step}"], cwd=workspace, env=env, check=True)
        head = (workspace / ".git" / "refs" / "heads" / "main").read_text().strip()
        return {"step": step, "status": "RUNNING", "role": "Worker", "workspace_commit": head, "entry": entry_for(step, answer)}

    graph = StateGraph(StepState)
    graph.add_node("apply", apply)
    graph.add_edge(START, "apply")
    graph.add_edge("apply", END)
    saver = SqliteSaver(sqlite3.connect(str(database), check_same_thread=False))
    return graph.compile(checkpointer=saver)


def measure(root: Path, steps: int) -> dict:
    """Median and first step time (seconds) of ``steps`` checkpointed steps."""
    workspace = root / "lg-workspace"
    workspace.mkdir()
    env = dict(os.environ, **GIT_ENV)
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=workspace, check=True, env=env)
    subprocess.run(["git", "commit", "-q", "--allow-empty", "-m", "baseline"], cwd=workspace, check=True, env=env)
    app = build(workspace, root / "checkpoints.sqlite")
    config = {"configurable": {"thread_id": "bench"}}
    times = []
    state: dict = {}
    for i in range(steps):
        started = time.perf_counter()
        state = app.invoke({"step": i}, config)
        times.append(time.perf_counter() - started)
    assert state["step"] == steps and app.get_state(config).values["entry"]["sequence"] == steps
    return {"median": statistics.median(times[1:]), "first": times[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--json", action="store_true", help="Print the figures (seconds) as JSON.")
    parser.add_argument("--root", type=Path, help="An empty folder to work in (default: a temporary one).")
    args = parser.parse_args()
    why = available()
    if why:
        raise SystemExit(why)
    with tempfile.TemporaryDirectory() as tmp:
        result = measure(args.root or Path(tmp), args.steps)
    if args.json:
        print(json.dumps(result))
        return
    print(f"LangGraph + SqliteSaver + git commit: {result['median'] * 1000:.1f} ms a step (first {result['first'] * 1000:.1f} ms)")


if __name__ == "__main__":
    main()
