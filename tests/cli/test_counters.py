"""The counters a person sees agree, through a rewind
and a replay: ``Steps`` in ``job status``, the progress line's ``step N of
MAX`` and the model's ``[Step N of MAX]`` count the answers applied in the
history as it stands (what ``--max-steps`` limits; a rewind gives back the
steps it undoes, a replayed answer is one); ``Calls`` counts the requests
made to a model, ever (a rewound call was made and paid for; a replayed
answer is no call). The real ``logist`` program in this process
(``logist_cli``), a process of its own on a pseudo-terminal for the
progress line, the scripted server."""

from __future__ import annotations

import json
import re

from conftest import logist_cli, run_on_a_terminal
from logist.engine.create import create_job
from logist.replay.scripted import answer


def ok(result, code: int = 0):
    assert result.returncode == code, f"exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    return result


def counters(job_id: str) -> tuple[str, str, dict]:
    """The Steps and Calls lines of ``job status``, and its JSON."""
    text = ok(logist_cli("job", "status", job_id)).stdout.splitlines()
    steps = next(line for line in text if line.startswith("Steps:"))
    calls = next(line for line in text if line.startswith("Calls:"))
    assert not any(line.startswith("Step:") for line in text)  # the entry's number is not called a step
    return steps, calls, json.loads(ok(logist_cli("job", "status", job_id, "--json")).stdout)


def marker(request: dict) -> str:
    return re.search(r"\[Step (\d+) of (\d+)\]", request["messages"][-1]["content"]).group(0)


def test_steps_and_calls_through_a_rewind_and_a_replay(jobs, llm):
    create_job(jobs, "c", "Count to four")
    for n in range(1, 5):
        llm.add(answer("MESSAGE", message=f"counting {n}"))
        ok(logist_cli("job", "step", "c", "--oneshot", "--base-url", llm.base_url))
    assert [marker(r) for r in llm.requests] == [f"[Step {n} of 100]" for n in range(1, 5)]
    steps, calls, data = counters("c")
    assert steps.startswith("Steps:   4 of 100 used") and calls.startswith("Calls:   4 made to a model")

    # Back to the end of entry 3 (create, then two calls): two steps, four calls made.
    ok(logist_cli("job", "restep", "c", "--entry", "3"))
    steps, calls, data = counters("c")
    assert steps.startswith("Steps:   2 of 100 used") and calls.startswith("Calls:   4 made to a model")
    assert (data["steps"], data["totals"]["llm_calls"]) == (2, 4)

    # The next step is step 3: on the progress line and in what the model is sent.
    llm.add(answer("MESSAGE", message="counting 3 again"))
    code, shown = run_on_a_terminal("job", "step", "c", "--oneshot", "--base-url", llm.base_url)
    assert code == 0, shown
    assert "step 3 of 100" in shown
    assert marker(llm.requests[-1]) == "[Step 3 of 100]"
    steps, calls, _ = counters("c")
    assert steps.startswith("Steps:   3 of 100 used") and calls.startswith("Calls:   5 made to a model")

    # A replay applies recorded answers: steps, not calls.
    create_job(jobs, "r", "Count to four")
    replayed = ok(logist_cli("job", "replay", "r", "--history", str(jobs.path / "c" / "jobHistory.json")))
    steps, calls, data = counters("r")
    applied = data["totals"]["replayed"]
    assert applied >= 3, replayed.stderr
    assert steps.startswith(f"Steps:   {applied} of 100 used")
    assert calls.startswith(f"Calls:   0 made to a model (and {applied} replayed answers: no call made)")
    assert (data["steps"], data["totals"]["llm_calls"]) == (applied, 0)


def test_a_call_that_brought_no_answer_is_no_step(jobs, llm):
    """An HTTP 501 (nothing answered) and a stream cut before its answer are
    calls made, not steps: Steps stays 0, and the model's next request
    still says step 1."""
    from conftest import logist_cli
    from logist.replay.scripted import Reply

    (jobs.path / "config.json").write_text(json.dumps({"max_retries": 0}))
    create_job(jobs, "c", "Count to one")
    llm.add(Reply(status=501, error_message="not implemented"),
            Reply(body=b'data: {"choices": [{"index": 0, "delta": {"content": "{"}}]}\n\n',
                  content_type="text/event-stream"))
    logist_cli("job", "step", "c", "--oneshot", "--base-url", llm.base_url)
    steps, calls, data = counters("c")
    assert steps.startswith("Steps:   0 of 100 used"), steps
    assert calls.startswith("Calls:   1 made to a model"), calls
    assert data["steps"] == 0 and data["totals"]["llm_calls"] == 1
    logist_cli("job", "resubmit", "c", "--feedback", "go on")
    logist_cli("job", "step", "c", "--oneshot", "--base-url", llm.base_url)  # the cut stream: the turn is kept
    steps, calls, data = counters("c")
    assert steps.startswith("Steps:   0 of 100 used") and calls.startswith("Calls:   2 made to a model"), (steps, calls)
    llm.add(answer("MESSAGE", message="one"))
    ok(logist_cli("job", "step", "c", "--oneshot", "--base-url", llm.base_url))
    assert marker(llm.requests[-1]) == "[Step 1 of 100]"
    steps, _, _ = counters("c")
    assert steps.startswith("Steps:   1 of 100 used")


def test_job_run_takes_max_steps_as_the_jobs_limit(jobs, llm):
    from conftest import logist_cli

    create_job(jobs, "m", "Count to three")
    llm.add(*[answer("MESSAGE", message=f"counting {n}") for n in range(1, 4)])
    run = logist_cli("job", "run", "m", "--max-steps", "2", "--base-url", llm.base_url)
    assert run.returncode == 4, run.stderr  # stopped at a budget
    assert "max steps reached (2 of 2 steps)" in run.stderr
    steps, _, data = counters("m")
    assert steps.startswith("Steps:   2 of 2 used") and data["max_steps"] == 2
    assert len(llm.requests) == 2
    refused = logist_cli("job", "run", "--all", "--max-steps", "2", "--base-url", llm.base_url)
    assert refused.returncode == 2 and "--max-steps" in refused.stderr


def test_job_status_json_names_steps_and_calls_apart(jobs, llm):
    from conftest import logist_cli
    from logist.replay.scripted import Reply

    (jobs.path / "config.json").write_text(json.dumps({"max_retries": 0}))
    create_job(jobs, "s", "Say hi")
    llm.add(Reply(body=b"data: {}\n\n", content_type="text/event-stream"), answer("MESSAGE", message="hi"))
    logist_cli("job", "step", "s", "--oneshot", "--base-url", llm.base_url)
    ok(logist_cli("job", "step", "s", "--oneshot", "--base-url", llm.base_url))
    _, _, data = counters("s")
    assert (data["steps"], data["model_calls"]) == (1, 2)
    assert data["calls"] == data["steps"], "the deprecated name keeps its old meaning for this release"
    listed = json.loads(ok(logist_cli("job", "list", "--json")).stdout)
    row = next(r for r in (listed["jobs"] if isinstance(listed, dict) else listed) if r["job_id"] == "s")
    assert (row["steps"], row["model_calls"], row["calls"]) == (1, 2, 1)
