"""A person's answers and feedback are part of the job's memory.

After a review round, a reject, a resubmit or a compaction, a role's next
prompt still holds every question the person answered (with its answer) and
the feedback they gave, read back from the history entries the manifest's
``person_inputs`` name. Driven through the real CLI against a scripted server.
"""

from __future__ import annotations

import pytest

import json

from logist.store.session import JobFiles
from logist.engine.step import step_once
from logist.replay.scripted import answer
from logist.resources import data_dir

from conftest import logist_cli

QUESTION = "Should greet() take a name, or always greet the world?"
ANSWER = "Take a name, default 'world'."


def ok(done):
    assert done.returncode in (0, 3), done.stderr
    return done


def run(job_id: str, base_url: str):
    return ok(logist_cli("job", "run", job_id, "--base-url", base_url))


def user_text(request: dict) -> str:
    return "\n".join(m["content"] for m in request["messages"] if m["role"] == "user")


def ask_and_answer(llm, job_id: str = "greet") -> None:
    ok(logist_cli("job", "create", job_id, "--objective", "Write greet.py"))
    llm.add(answer("ASK", question=QUESTION))
    run(job_id, llm.base_url)
    ok(logist_cli("job", "answer", job_id, ANSWER))


@pytest.mark.wire
def test_a_worker_sent_back_by_the_supervisor_still_has_the_answer(jobs, llm):
    ask_and_answer(llm)
    llm.add(
        answer("COMPLETED", "greet(name='world') written"),
        answer("RETRY", "greet() must print, not return"),
        answer("COMPLETED", "prints now"),
        answer("COMPLETED", "accepted"),
    )
    run("greet", llm.base_url)

    worker_again = llm.requests[3]
    assert worker_again["messages"][0]["content"].count("--- Role: Worker ---") == 1
    text = user_text(worker_again)
    assert len(worker_again["messages"]) == 2, "a fresh turn: its history is not carried over"
    assert f"The Worker asked: {QUESTION}\nThe person answered: {ANSWER}" in text
    assert "greet() must print, not return" in text
    # The Supervisor is told too: the answer may have changed what is asked.
    assert f"The person answered: {ANSWER}" in user_text(llm.requests[2])
    assert json.loads(ok(logist_cli("job", "status", "greet", "--json")).stdout)["status"] == "APPROVAL_REQUIRED"


@pytest.mark.wire
def test_a_reject_and_a_resubmit_keep_earlier_answers_and_feedback(jobs, llm):
    ask_and_answer(llm)
    llm.add(answer("COMPLETED", "done"), answer("COMPLETED", "fine"))
    run("greet", llm.base_url)
    ok(logist_cli("job", "reject", "greet", "--feedback", "Use an f-string."))
    llm.add(answer("STUCK", "cannot decide the punctuation"))
    run("greet", llm.base_url)

    after_reject = user_text(llm.requests[-1])
    assert f"The person answered: {ANSWER}" in after_reject
    assert "A person reviewed the result and rejected it:\nUse an f-string." in after_reject
    assert after_reject.count("Use an f-string.") == 1, "the turn's own feedback is not repeated"

    ok(logist_cli("job", "resubmit", "greet", "--feedback", "End with an exclamation mark."))
    llm.add(answer("COMPLETED", "done"))
    ok(logist_cli("job", "step", "greet", "--oneshot", "--base-url", llm.base_url))
    after_resubmit = user_text(llm.requests[-1])
    assert f"The person answered: {ANSWER}" in after_resubmit
    assert "The person rejected a result, saying: Use an f-string." in after_resubmit
    assert "and resubmitted it:\nEnd with an exclamation mark." in after_resubmit
    assert after_resubmit.count("End with an exclamation mark.") == 1


@pytest.mark.wire  # logist job run, through the CLI
def test_after_a_compaction_the_answer_is_still_word_for_word_in_the_prompt(jobs, llm):
    role = json.loads((data_dir("roles") / "worker.json").read_text())
    role.update(prompt_compression=True, compaction_threshold=2, compaction_retain_recent=0)
    (jobs.path / "roles" / "worker.json").write_text(json.dumps(role))
    ask_and_answer(llm)
    job = jobs.job("greet")
    llm.add(answer("MESSAGE", message="note 1"), answer("MESSAGE", message="note 2"))
    step_once(job, base_url=llm.base_url)
    step_once(job, base_url=llm.base_url)
    llm.add("The Worker asked about names; notes 1 and 2 were written.")
    assert step_once(job, base_url=llm.base_url).action == "COMPACTED"
    llm.add(answer("MESSAGE", message="note 3"))
    step_once(job, base_url=llm.base_url)

    after = llm.requests[-1]
    assert len(after["messages"]) == 2, "every round is summarised"
    assert f"The Worker asked: {QUESTION}\nThe person answered: {ANSWER}" in after["messages"][0]["content"]
    assert [e.kind for e in JobFiles(job.dir).load_history().interactions].count("compaction") == 1


@pytest.mark.wire
def test_the_manifest_points_at_the_entries_and_holds_no_copy(jobs, llm):
    ask_and_answer(llm)
    job = jobs.job("greet")
    manifest = job.manifest()
    (entry,) = [e for e in JobFiles(job.dir).load_history().interactions if e.user_input and e.user_input.action == "answer"]
    assert manifest.person_inputs == [entry.sequence]
    llm.add(answer("MESSAGE", message="noted"))
    step_once(job, base_url=llm.base_url)
    assert ANSWER not in json.dumps(job.manifest().dump()), "the answer lives in the history, not the manifest"
    ok(logist_cli("job", "restep", "greet", "--entry", str(entry.sequence - 1)))
    assert jobs.job("greet").manifest().person_inputs == []
