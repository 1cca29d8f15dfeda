"""The replay server serves many jobs at once: a queue per job (named by the
``X-Logist-Job`` header), a ledger of the calls served, repeats answered
only when asked for, and a latency for benchmarks."""

from __future__ import annotations

import json
import time
import urllib.request

import openai
import pytest

from logist import Status
from logist.engine.loop import run_job
from logist.model.client import JOB_HEADER
from logist.replay.fixtures import create_from_fixture

from replay.test_server import WORDCOUNT, body_of, recorded_calls


def ask(server, call, job=None):
    client = openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)
    headers = {JOB_HEADER: job} if job else {}
    return client.chat.completions.create(**body_of(call), extra_headers=headers).choices[0].message.content


def test_each_job_replays_the_whole_recording_on_its_own_queue(replay_llm):
    server = replay_llm(WORDCOUNT)
    calls = recorded_calls(server.history)
    for job in ("a", "b"):  # the same requests, told apart by the header only
        for call in calls:
            assert ask(server, call, job) == call.response.raw_response
    assert server.remaining == 0 and server.mismatches == []
    with pytest.raises(openai.BadRequestError, match="no call left: all 4 were answered"):
        ask(server, calls[0], "a")
    assert [(e["job"], e["sequence"], e["repeat"]) for e in server.ledger] == [
        (job, c.sequence, False) for job in ("a", "b") for c in calls]
    ledger = json.loads(urllib.request.urlopen(server.base_url + "/ledger").read())
    assert ledger["ledger"] == server.ledger and ledger["jobs"] == 2 and ledger["recorded_calls"] == 4


def test_a_repeat_is_answered_again_and_marked_when_asked_for(jobs):
    from logist.replay.server import ReplayLLMServer

    with ReplayLLMServer(WORDCOUNT, repeats=True) as server:
        calls = recorded_calls(server.history)
        first = ask(server, calls[0], "a")
        assert ask(server, calls[0], "a") == first, "the answer its job got (a client that crashed asks again)"
        assert ask(server, calls[0], "b") == first
        assert [(e["job"], e["repeat"]) for e in server.ledger] == [("a", False), ("a", True), ("b", False)]
        assert server.mismatches == []


def test_jobs_created_from_one_recording_run_at_once_against_one_server(jobs):
    import threading

    from logist.replay.server import ReplayLLMServer

    created = [create_from_fixture(jobs, WORDCOUNT, f"wc-{n}") for n in range(3)]
    with ReplayLLMServer(WORDCOUNT, latency=0.2) as server:
        ends = {}
        threads = [threading.Thread(target=lambda j=j: ends.update({j.id: run_job(j, base_url=server.base_url,
                                                                                     model="gpt-4o-mini")[-1]}))
                   for j in created]
        started = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        took = time.monotonic() - started
    assert {j: r.status for j, r in ends.items()} == {j.id: Status.APPROVAL_REQUIRED for j in created}
    assert sorted(e["job"] for e in server.ledger) == sorted([j.id for j in created] * 4)
    assert server.mismatches == [] and server.remaining == 0
    assert took >= 0.8, "each answer waited the latency"
