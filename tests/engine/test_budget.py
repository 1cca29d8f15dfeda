"""Budgets checked before every call (cost, tokens, wall time, RETRYs in a
row), and totals that come from the history and survive a restart."""

from __future__ import annotations

import json

import pytest

from logist.store.session import JobFiles
from logist import Status
from logist.engine.create import create_job
from logist.engine.decide import user_action
from logist.engine.loop import run_job
from logist.engine.step import step_once
from logist.replay.scripted import Reply
from logist.replay.scripted import answer

from conftest import logist_cli, write_config

PRICED = "priced-model"
FREE = "free-model"
#: $1000 / $2000 per million tokens: 100 in + 50 out = $0.10 + $0.10 = $0.20 a call.
PRICES = {PRICED: {"input_per_million": 1000, "output_per_million": 2000}}
USAGE = {"prompt_tokens": 100, "completion_tokens": 50}
CALL_COST = 0.2




def msg(n: int, usage=USAGE, **kw) -> Reply:
    return Reply(content=answer("MESSAGE", message=f"progress note {n}"), usage=dict(usage), **kw)


def ok(result, code: int = 0):
    assert result.returncode == code, f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert "Traceback" not in result.stderr
    return result


def history_sums(job_dir) -> dict:
    calls = [e for e in JobFiles(job_dir).load_history().interactions if e.kind == "llm_call"]
    return {
        "llm_calls": len(calls),
        "prompt_tokens": sum(e.usage.prompt_tokens or 0 for e in calls),
        "completion_tokens": sum(e.usage.completion_tokens or 0 for e in calls),
        "cost_usd": round(sum(e.usage.cost_usd or 0 for e in calls), 8),
        "unpriced_calls": sum(1 for e in calls if e.usage.cost_usd is None),
    }


def totals_of(data: dict) -> dict:
    return {k: (round(v, 8) if k == "cost_usd" else v) for k, v in data.items() if k in
            ("llm_calls", "prompt_tokens", "completion_tokens", "cost_usd", "unpriced_calls")}


def status_json(job_id: str) -> dict:
    """The job's status as a command reads it (the real program, from fresh caches)."""
    return json.loads(ok(logist_cli("job", "status", job_id, "--json")).stdout)


def assert_totals_match_history(job_dir, job_id):
    sums = history_sums(job_dir)
    on_disk = json.loads((job_dir / "job_manifest.json").read_text())["totals"]
    assert totals_of(on_disk) == sums
    status = status_json(job_id)
    assert totals_of(status["totals"]) == sums
    assert status["totals"]["tokens"] == sums["prompt_tokens"] + sums["completion_tokens"]
    return sums


# Cost ---------------------------------------------------------------------------------


@pytest.mark.wire
def test_cost_budget_stops_before_the_next_call(jobs, llm):
    write_config(jobs, prices=PRICES, max_retries=0)
    ok(logist_cli("job", "create", "pricey", "-o", "Take notes", "--model", PRICED, "--max-cost", "0.5"))
    llm.add(*[msg(n) for n in range(6)])

    run = ok(logist_cli("job", "run", "pricey", "--base-url", llm.base_url), code=4)

    # $0.00, $0.20, $0.40 are under $0.50: three calls; $0.60 is not: no fourth.
    assert len(llm.requests) == 3
    assert llm.remaining == 3
    assert all(r["model"] == PRICED for r in llm.requests)
    assert "cost budget" in run.stderr
    assert "Job 'pricey' stopped at a budget" in run.stderr and "logist job set pricey --max-cost N" in run.stderr

    job_dir = jobs.path / "pricey"
    status = status_json("pricey")
    assert status["status"] == "INTERVENTION_REQUIRED"
    assert "cost budget" in status["reason"]
    assert status["budgets"]["cost_usd"]["limit"] == 0.5
    sums = assert_totals_match_history(job_dir, "pricey")
    assert sums == {"llm_calls": 3, "prompt_tokens": 300, "completion_tokens": 150, "cost_usd": pytest.approx(0.6),
                    "unpriced_calls": 0}
    for entry in JobFiles(job_dir).load_history().interactions:
        if entry.kind == "llm_call":
            assert entry.usage.cost_usd == pytest.approx(CALL_COST)
            assert (entry.usage.prompt_tokens, entry.usage.completion_tokens) == (100, 50)

    text = ok(logist_cli("job", "status", "pricey")).stdout
    assert "$0.6000" in text and "450 tokens" in text and "cost budget" in text

    # Resubmitted, the job is still over budget: it stops again without a call.
    resubmitted = ok(logist_cli("job", "resubmit", "pricey", "--feedback", "go on"))
    assert "Its next step will stop again: cost budget spent" in resubmitted.stderr
    again = ok(logist_cli("job", "step", "pricey", "--oneshot", "--base-url", llm.base_url), code=4)
    assert "cost budget" in again.stderr
    assert len(llm.requests) == 3
    assert status_json("pricey")["status"] == "INTERVENTION_REQUIRED"
    assert_totals_match_history(job_dir, "pricey")


@pytest.mark.parametrize("limit, calls", [(0.4, 2), (0.39, 2), (0.41, 3), (0.2, 1), (0.0, 0)])
def test_cost_budget_boundaries(jobs, llm, limit, calls):
    write_config(jobs, prices=PRICES)
    job = create_job(jobs, "edge", "Take notes", model=PRICED, max_cost_usd=limit)
    llm.add(*[msg(n) for n in range(5)])
    results = run_job(job, endpoints=llm.endpoints)
    assert len(llm.requests) == calls
    assert results[-1].status == Status.INTERVENTION_REQUIRED and "cost budget" in job.manifest().reason
    assert job.manifest().totals.llm_calls == calls
    assert job.manifest().totals.cost_usd == pytest.approx(calls * CALL_COST)


def test_totals_mix_priced_and_unpriced_models(jobs, llm):
    """The Worker's model has a price, the Supervisor's has none."""
    write_config(jobs, prices=PRICES, models={"Worker": PRICED, "Supervisor": FREE})
    job = create_job(jobs, "mixed", "Write a.txt")
    llm.add(
        Reply(content=answer("MESSAGE", message="starting"), usage={"prompt_tokens": 10, "completion_tokens": 20}),
        Reply(content=answer("COMPLETED", file_changes=[{"path": "a.txt", "content": "a\n"}]),
              usage={"prompt_tokens": 1000, "completion_tokens": 300}),
        Reply(content=answer("COMPLETED", summary="fine"), usage={"prompt_tokens": 7000, "completion_tokens": 11}),
    )
    run_job(job, endpoints=llm.endpoints)
    assert [r["model"] for r in llm.requests] == [PRICED, PRICED, FREE]
    assert job.manifest().status == Status.APPROVAL_REQUIRED
    entries = [e for e in JobFiles(job.dir).load_history().interactions if e.kind == "llm_call"]
    assert [e.usage.cost_usd for e in entries] == [
        pytest.approx((10 * 1000 + 20 * 2000) / 1e6), pytest.approx((1000 * 1000 + 300 * 2000) / 1e6), None,
    ]
    sums = assert_totals_match_history(job.dir, "mixed")
    assert sums["prompt_tokens"] == 8010 and sums["completion_tokens"] == 331
    assert sums["cost_usd"] == pytest.approx(0.05 + 1.6)
    assert sums["unpriced_calls"] == 1
    text = ok(logist_cli("job", "status", "mixed")).stdout
    assert "$1.6500" in text and "+1 calls with no price" in text


# Tokens -------------------------------------------------------------------------------------


@pytest.mark.wire
def test_token_budget_stops_a_job_whose_model_has_no_price(jobs, llm):
    write_config(jobs, prices=PRICES)
    ok(logist_cli("job", "create", "free", "-o", "Take notes", "--model", FREE, "--max-tokens", "400"))
    llm.add(*[msg(n) for n in range(6)])

    run = ok(logist_cli("job", "run", "free", "--base-url", llm.base_url), code=4)

    # 0, 150, 300 tokens are under 400: three calls; 450 is not.
    assert len(llm.requests) == 3
    assert "token budget" in run.stderr
    job_dir = jobs.path / "free"
    status = status_json("free")
    assert status["status"] == "INTERVENTION_REQUIRED" and "token budget" in status["reason"]
    entries = [e for e in JobFiles(job_dir).load_history().interactions if e.kind == "llm_call"]
    assert [e.usage.cost_usd for e in entries] == [None, None, None]
    assert [(e.usage.prompt_tokens, e.usage.completion_tokens) for e in entries] == [(100, 50)] * 3
    sums = assert_totals_match_history(job_dir, "free")
    assert sums == {"llm_calls": 3, "prompt_tokens": 300, "completion_tokens": 150, "cost_usd": 0.0, "unpriced_calls": 3}
    assert status["totals"]["tokens"] == 450
    text = ok(logist_cli("job", "status", "free")).stdout
    assert "450 tokens" in text and "cost unknown" in text


def test_cost_budget_does_not_stop_a_job_whose_model_has_no_price(jobs, llm):
    """No price: the cost stays unknown, and the job is not stopped for it."""
    write_config(jobs, prices=PRICES)
    job = create_job(jobs, "nocost", "Take notes", model=FREE, max_cost_usd=0.01)
    llm.add(*[msg(n) for n in range(3)], answer("COMPLETED"), answer("COMPLETED"))
    run_job(job, endpoints=llm.endpoints)
    assert len(llm.requests) == 5
    assert job.manifest().status == Status.APPROVAL_REQUIRED


# Wall time --------------------------------------------------------------------------------------


@pytest.mark.wire  # a slow answer (delay)
def test_wall_time_budget(jobs, llm):
    job = create_job(jobs, "slow", "Take notes", max_wall_seconds=0.0001)
    llm.add(*[msg(n, delay=0.05) for n in range(3)])
    results = run_job(job, base_url=llm.base_url)
    assert len(llm.requests) == 1, "the first call starts at 0 s; none after the budget is spent"
    assert results[-1].status == Status.INTERVENTION_REQUIRED
    manifest = job.manifest()
    assert "time budget" in manifest.reason
    assert manifest.totals.llm_calls == 1
    status = status_json("slow")
    assert status["status"] == "INTERVENTION_REQUIRED" and "time budget" in status["reason"]
    assert status["budgets"]["wall_seconds"]["limit"] == 0.0001
    # The stop is on record, and no call was recorded for it.
    entries = JobFiles(job.dir).load_history().interactions
    assert [e.kind for e in entries].count("llm_call") == 1
    assert "time budget" in (entries[-1].note or "")
    assert entries[-1].state_after == "INTERVENTION_REQUIRED"


def test_wall_time_counts_the_whole_step_not_only_the_call(jobs):
    """A posted answer makes no call, but its step applies and commits: the
    person waited for that, so the wall budget counts it."""
    from logist.engine.step import post_answer
    from logist.engine.budget import limit_reason

    job = create_job(jobs, "posted", "Take notes", max_wall_seconds=0.0001)
    post_answer(job, answer("MESSAGE", message="notes", file_changes=[{"path": "notes.txt", "content": "n\n"}]))
    manifest = job.manifest()
    assert manifest.totals.llm_calls == 0 and manifest.totals.posted == 1
    assert manifest.totals.wall_ms >= 1, "a step that committed took time"
    assert "time budget" in (limit_reason(manifest) or "")


# RETRYs in a row ------------------------------------------------------------------------------


def test_worker_retries_in_a_row(jobs, llm):
    job = create_job(jobs, "retry", "Take notes", max_retries_in_a_row=2)
    llm.add(*[answer("RETRY", summary=f"attempt {n} failed") for n in range(6)])
    results = run_job(job, endpoints=llm.endpoints)
    assert len(llm.requests) == 3, "two RETRYs allowed, the third stops the job"
    assert [r.action for r in results] == ["RETRY", "RETRY", "RETRY"]
    manifest = job.manifest()
    assert manifest.status == Status.INTERVENTION_REQUIRED
    assert "RETRYs in a row" in manifest.reason and "attempt 2 failed" in manifest.reason
    # A person resubmits: the count starts again.
    user_action(job, "resubmit", "try something else")
    llm.add(answer("RETRY", summary="again"))
    assert step_once(job, endpoints=llm.endpoints).status == Status.RUNNING


def test_supervisor_retries_in_a_row(jobs, llm):
    write_config(jobs, max_retries=0)
    job = create_job(jobs, "review", "Write a.txt", max_retries_in_a_row=2)
    for n in range(6):
        llm.add(
            answer("COMPLETED", summary=f"attempt {n}", file_changes=[{"path": "a.txt", "content": f"{n}\n"}]),
            answer("RETRY", summary=f"review {n}: not good enough"),
        )
    run_job(job, endpoints=llm.endpoints)
    manifest = job.manifest()
    assert manifest.status == Status.INTERVENTION_REQUIRED
    assert "RETRYs in a row" in (manifest.reason or ""), manifest.reason
    assert len(llm.requests) == 6, "three reviews sent back in a row; the third stops the job"


def test_a_failed_call_on_a_priced_model_is_not_reported_as_unpriced(jobs, llm):
    write_config(jobs, prices=PRICES, max_retries=0)
    job = create_job(jobs, "failed", "Take notes", model=PRICED)
    llm.add(msg(1), Reply(status=400))
    run_job(job, endpoints=llm.endpoints)
    assert len(llm.requests) == 2
    manifest = job.manifest()
    assert manifest.status == Status.INTERVENTION_REQUIRED and "HTTP 400" in manifest.reason
    assert manifest.totals.llm_calls == 2
    assert manifest.totals.cost_usd == pytest.approx(CALL_COST)
    assert manifest.totals.prompt_tokens == 100 and manifest.totals.completion_tokens == 50
    text = ok(logist_cli("job", "status", "failed")).stdout
    assert "$0.2000" in text
    assert "no price" not in text, text
    assert manifest.totals.unpriced_calls == 0
