"""``job preview --json`` is the request: the body the next step sends, key for key.

Each test runs the real CLI twice, ``job preview --json`` and then ``job
step --oneshot`` against a scripted server, and compares the preview with
the body the server received.
"""

from __future__ import annotations

import pytest

import json

from logist.store.session import JobFiles
from logist.engine.step import step_once
from logist.engine.prepare import SUMMARY_MAX_TOKENS
from logist.store.prompts import builtin
from logist.resources import data_dir
from logist.replay.scripted import Reply, answer

from conftest import CANARY_KEY, logist_cli, write_config


def preview_json(job_id: str, *args: str) -> dict:
    done = logist_cli("job", "preview", job_id, "--json", *args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def step_oneshot(job_id: str, base_url: str) -> None:
    done = logist_cli("job", "step", job_id, "--oneshot", "--base-url", base_url)
    assert done.returncode == 0, done.stderr


def create(*args: str) -> None:
    done = logist_cli("job", "create", *args)
    assert done.returncode == 0, done.stderr


@pytest.mark.wire  # the body as it reaches the endpoint
def test_a_worker_step_sends_exactly_the_previewed_body(jobs, llm):
    create("hello", "--objective", "Write hello.py that prints a greeting")
    body = preview_json("hello")
    llm.add(answer("COMPLETED", "wrote it"))
    step_oneshot("hello", llm.base_url)
    assert body == llm.requests[-1]
    assert list(body) == ["model", "messages", "temperature", "max_tokens", "response_format", "stream",
                          "stream_options"], "every request carries max_tokens and the decoding schema"
    assert body["messages"][1]["content"].startswith("# Job\n\n## Objective\n"), "the prompt does not name the job"
    # The protocol's example writes the file the objective names: a model copying it copies this job's path.
    system = body["messages"][0]["content"]
    assert '{"action": "COMPLETED", "file_changes": [{"path": "hello.py", "content": ...}]' in system
    assert '"evidence_files": ["hello.py"], "summary_for_supervisor": ...}' in system and "WHAT YOU DID" not in system


@pytest.mark.wire  # the body as it reaches the endpoint
def test_a_step_due_for_compaction_sends_the_previewed_summary_call(jobs, llm):
    role = json.loads((data_dir("roles") / "worker.json").read_text())
    role.update(prompt_compression=True, compaction_threshold=2, compaction_retain_recent=1,
                max_tokens=700, response_format={"type": "json_object"})
    (jobs.path / "roles" / "worker.json").write_text(json.dumps(role))
    create("long", "--objective", "A long task")
    job = jobs.job("long")
    llm.add(*[answer("MESSAGE", message=f"note {i}") for i in range(1, 4)])
    for _ in range(3):
        step_once(job, base_url=llm.base_url)

    # Three rounds, threshold two: the next call is the summary call.
    summary_call = preview_json("long")
    llm.add("Rounds 1-2: notes 1 and 2.")
    step_oneshot("long", llm.base_url)
    assert summary_call == llm.requests[-1]
    assert summary_call["messages"][0]["content"] == builtin().render("compaction/system")
    assert summary_call["messages"][1]["content"].startswith("Conversation of the Worker.\n")
    # A summary is prose: no response_format; its max_tokens is the summary's own, not the role's.
    assert "response_format" not in summary_call and summary_call["max_tokens"] == SUMMARY_MAX_TOKENS
    assert JobFiles(job.dir).load_history().interactions[-1].kind == "compaction"

    # Then the role's call, with the role's parameters and the summary in place of rounds 1 and 2.
    role_call = preview_json("long")
    llm.add(answer("MESSAGE", message="note 4"))
    step_oneshot("long", llm.base_url)
    assert role_call == llm.requests[-1]
    assert (role_call["max_tokens"], role_call["response_format"]) == (700, {"type": "json_object"})
    assert "Rounds 1-2: notes 1 and 2." in role_call["messages"][0]["content"]


@pytest.mark.wire
def test_a_planner_step_sends_exactly_the_previewed_body(jobs, llm):
    create("plan", "--objective", "Write notes.md", "--workflow", "planned")
    body = preview_json("plan", "--model", "planner-model")
    assert "--- Role: Planner ---" in body["messages"][0]["content"]
    llm.add(json.dumps({"action": "MESSAGE", "plan": ["write notes.md"], "current_plan_step": 0, "send_to": "Worker",
                        "message": "Write it."}))
    done = logist_cli("job", "step", "plan", "--oneshot", "--base-url", llm.base_url, "--model", "planner-model")
    assert done.returncode == 0, done.stderr
    assert body == llm.requests[-1]
    assert body["model"] == "planner-model"

    # The Worker it sent the work to: the plan and its task are in the request.
    worker = preview_json("plan")
    llm.add(answer("COMPLETED", "wrote notes.md"))
    step_oneshot("plan", llm.base_url)
    assert worker == llm.requests[-1]
    assert "## Your task (from the Planner)\nWrite it." in worker["messages"][1]["content"]


def test_the_text_preview_names_the_resolved_endpoint_and_never_the_key(jobs):
    create("hello", "--objective", "Write hello.py")

    def first_line(*args: str, env: dict | None = None) -> str:
        done = logist_cli("job", "preview", "hello", *args, env={"LOGIST_API_KEY": CANARY_KEY, **(env or {})})
        assert done.returncode == 0, done.stderr
        assert CANARY_KEY not in done.stdout + done.stderr
        return done.stdout.splitlines()[0]

    assert first_line() == "POST https://api.openai.com/v1/chat/completions"
    write_config(jobs, base_url="http://config.invalid/v1")
    assert first_line() == "POST http://config.invalid/v1/chat/completions"
    assert first_line(env={"OPENAI_BASE_URL": "http://openai-env.invalid/v1"}) == "POST http://openai-env.invalid/v1/chat/completions"
    env = {"LOGIST_BASE_URL": "http://logist-env.invalid/v1", "OPENAI_BASE_URL": "http://openai-env.invalid/v1"}
    assert first_line(env=env) == "POST http://logist-env.invalid/v1/chat/completions"
    assert first_line("--base-url", "http://option.invalid/v1", env=env) == "POST http://option.invalid/v1/chat/completions"

    done = logist_cli("job", "preview", "hello")
    body = preview_json("hello")
    assert done.stdout.splitlines()[1:8] == [
        "model: gpt-4o-mini", f"temperature: {body['temperature']}", f"max_tokens: {body['max_tokens']}",
        f"response_format: {json.dumps(body['response_format'], ensure_ascii=False)}", "stream: true",
        'stream_options: {"include_usage": true}', ""]
    assert body["response_format"]["type"] == "json_schema" and body["max_tokens"] == 2048
    assert done.stdout.endswith(body["messages"][-1]["content"] + "\n")


@pytest.mark.wire
def test_a_failed_call_names_the_endpoint_to_the_person_not_to_the_model(jobs, llm):
    write_config(jobs, max_retries=0)
    create("hello", "--objective", "Write hello.py")
    llm.add(Reply(status=400, error_message="the model is down"))
    done = logist_cli("job", "step", "hello", "--oneshot", "--base-url", llm.base_url)
    assert done.returncode == 3
    assert f"needs intervention: LLM call failed after 1 attempt: HTTP 400: the model is down (endpoint {llm.base_url})" in done.stderr
    reason = jobs.job("hello").manifest().reason
    assert reason == "LLM call failed after 1 attempt: HTTP 400: the model is down"

    # Resubmitted, the model is told why the job stopped, and nothing about where it is served from.
    assert logist_cli("job", "resubmit", "hello", "--feedback", "try again").returncode == 0
    body = preview_json("hello")
    assert reason in json.dumps(body) and llm.base_url not in json.dumps(body)
