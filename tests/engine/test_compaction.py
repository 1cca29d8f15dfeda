"""Context compaction: older rounds summarised by a separate, recorded call."""

from __future__ import annotations

import pytest

import json
import os
import signal
import time

from logist.store.session import JobFiles
from logist import Status
from logist.engine.create import create_job
from logist.engine.step import step_once
from logist.store.prompts import builtin
from logist.resources import data_dir
from logist.replay.scripted import Reply

from conftest import logist_cli, write_config


def compacting_worker(jobs, threshold=4, retain=2):
    role = json.loads((data_dir("roles") / "worker.json").read_text())
    role.update(prompt_compression=True, compaction_threshold=threshold, compaction_retain_recent=retain)
    (jobs.path / "roles" / "worker.json").write_text(json.dumps(role))


def note(i: int) -> str:
    return json.dumps({"action": "MESSAGE", "message": f"progress note {i}"})


def is_summary_call(request: dict) -> bool:
    return request["messages"][0]["content"] == builtin().render("compaction/system")


def test_summary_replaces_old_rounds_and_recent_ones_stay_whole(jobs, llm, normalise, snapshot):
    compacting_worker(jobs)
    job = create_job(jobs, "long", "A long task")
    llm.add(*[note(i) for i in range(1, 6)])
    for _ in range(5):
        step_once(job, endpoints=llm.endpoints)
    assert job.manifest().turn.rounds == 5
    llm.add("Rounds 1-3: the Worker sent progress notes 1 to 3.")
    summary_step = step_once(job, endpoints=llm.endpoints)
    assert summary_step.action == "COMPACTED" and summary_step.status == Status.RUNNING
    assert summary_step.turn == "summarise", "the compaction row: job step goes on with the turn"
    request = llm.requests[5]
    assert is_summary_call(request)
    assert "### Round 3" in request["messages"][1]["content"] and "### Round 4" not in request["messages"][1]["content"]

    llm.add(note(6))
    step_once(job, endpoints=llm.endpoints)
    prompt = llm.requests[6]["messages"]
    # system (with the opening message and the summary) + round 4 + answer 4 + round 5 + answer 5 + the new message
    assert [m["role"] for m in prompt] == ["system", "user", "assistant", "user", "assistant", "user"]
    system = prompt[0]["content"]
    assert "--- This turn so far ---\nThe turn opened with this message:\n# Job\n\n## Objective\nA long task" in system
    assert "Summary of rounds 1 to 3 (the rounds after it follow as they were):\nRounds 1-3" in system
    assert prompt[1]["content"] == llm.requests[3]["messages"][-1]["content"], "round 4 as it was sent"
    assert "progress note 3" not in json.dumps(prompt) and "progress note 4" in prompt[2]["content"]
    assert normalise(prompt) == snapshot

    entries = JobFiles(job.dir).load_history().interactions
    compactions = [e for e in entries if e.kind == "compaction"]
    assert len(compactions) == 1 and compactions[0].response.raw_response.startswith("Rounds 1-3")
    assert compactions[0].request.prompt[0].content == builtin().render("compaction/system")
    m = job.manifest()
    assert (m.turn.summarised_rounds, m.calls, m.totals.llm_calls) == (3, 6, 7)


def test_summary_is_updated_not_restarted(jobs, llm):
    compacting_worker(jobs)
    job = create_job(jobs, "long", "A long task")
    script = [note(i) for i in range(1, 6)] + ["S1"] + [note(i) for i in range(6, 9)] + ["S2"] + [note(9)]
    llm.add(*script)
    for _ in range(len(script)):
        step_once(job, endpoints=llm.endpoints)
    summaries = [r for r in llm.requests if is_summary_call(r)]
    assert len(summaries) == 2
    second = summaries[1]["messages"][1]["content"]
    assert "Summary so far (rounds 1 to 3):\nS1" in second and "Rounds to fold in (4 to 6)" in second
    assert job.manifest().turn.summarised_rounds == 6
    # The prompt stays bounded: the summary plus at most threshold rounds.
    assert len(llm.requests[-1]["messages"]) == 1 + 2 * 2 + 1


@pytest.mark.wire
def test_a_restart_does_not_redo_the_summary(jobs, llm):
    compacting_worker(jobs)
    create_job(jobs, "long", "A long task")
    llm.add(*[note(i) for i in range(1, 6)], "the summary")
    for _ in range(6):  # in this process: only the killed step needs a process of its own
        result = logist_cli("job", "step", "--oneshot", "long", "--base-url", llm.base_url)
        assert result.returncode == 0, result.stderr
    # A step killed while waiting for its answer, after the summary was made.
    llm.add(Reply(content=note(6), delay=30))
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-m", "logist", "job", "step", "--oneshot", "long",
                              "--base-url", llm.base_url], env=dict(os.environ))
    deadline = time.monotonic() + 30
    while len(llm.requests) < 7 and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    llm.add(note(6))
    result = logist_cli("job", "step", "--oneshot", "long", "--base-url", llm.base_url)
    assert result.returncode == 0, result.stderr
    assert [is_summary_call(r) for r in llm.requests] == [False] * 5 + [True] + [False, False]
    assert "Summary of rounds 1 to 3" in llm.requests[-1]["messages"][0]["content"]


def test_failed_summary_falls_back_to_the_full_history(jobs, llm):
    compacting_worker(jobs)
    write_config(jobs, max_retries=0)
    job = create_job(jobs, "long", "A long task")
    llm.add(*[note(i) for i in range(1, 6)], Reply(status=500), note(6))
    for _ in range(5):
        step_once(job, endpoints=llm.endpoints)
    failed = step_once(job, endpoints=llm.endpoints)
    assert failed.action == "COMPACTION_FAILED" and failed.status == Status.RUNNING
    assert failed.turn == "summarise", "the compaction row: the turn goes on whole"
    step_once(job, endpoints=llm.endpoints)
    full = llm.requests[-1]["messages"]
    assert len(full) == 1 + 2 * 5 + 1 and "progress note 1" in full[2]["content"]
    assert job.manifest().status == Status.RUNNING
    entry = [e for e in JobFiles(job.dir).load_history().interactions if e.kind == "compaction"][0]
    assert entry.response.status == "FAILED" and "HTTP 500" in entry.response.error


def test_preview_shows_the_compacted_prompt(jobs, llm):
    compacting_worker(jobs)
    job = create_job(jobs, "long", "A long task")
    llm.add(*[note(i) for i in range(1, 6)], "the summary")
    for _ in range(6):
        step_once(job, endpoints=llm.endpoints)
    preview = logist_cli("job", "preview", "long", "--json")
    assert preview.returncode == 0, preview.stderr
    messages = json.loads(preview.stdout)["messages"]
    llm.add(note(6))
    step_once(job, endpoints=llm.endpoints)
    assert messages == llm.requests[-1]["messages"]
