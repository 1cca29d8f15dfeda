"""Answers as real models send them, through the real ``logist`` (its entry
point, in the test's process: tests/conftest.py) against a real server on
127.0.0.1: the forms the parser reads, one corrective re-ask by default (0
in config or on the job: none), a tool-call answer, and the roles'
``file_changes`` policy with a person's approval."""

from __future__ import annotations

import json

from logist.replay.scripted import Reply, ScriptedLLMServer, answer
from logist.resources import data_dir

from conftest import logist_cli

HELLO = [{"path": "hello.py", "content": "print('Hello')\n"}]


def ok(done, *codes: int):
    assert done.returncode in (codes or (0,)), done.stderr
    assert "Traceback" not in done.stderr
    return done


def create(job_id: str, *options: str) -> None:
    ok(logist_cli("job", "create", job_id, "--objective", "Write hello.py that prints Hello", *options))


def step(job_id: str, base_url: str, *codes: int):
    return ok(logist_cli("job", "step", job_id, "--oneshot", "--base-url", base_url), *codes)


def status(job_id: str) -> dict:
    return json.loads(ok(logist_cli("job", "status", job_id, "--json")).stdout)


def entry(job_id: str, number: int) -> dict:
    return json.loads(ok(logist_cli("job", "history", job_id, "--entry", str(number), "--json")).stdout)


def test_what_real_models_send_is_read_and_noted(jobs, llm):
    create("hello")
    raw = ("<think>The user wants hello.py.</think>\nHere is my answer:\n```json\n"
           + json.dumps({"action": "completed", "evidence_files": ["hello.py"], "summary_for_supervisor": "Wrote it.",
                         "file_changes": HELLO, "confidence": 0.9})
           + "\n```\nLet me know if you need more.")
    llm.add(raw)
    step("hello", llm.base_url)
    assert status("hello")["status"] == "REVIEWING"
    assert (jobs.path / "hello" / "workspace" / "hello.py").read_text() == "print('Hello')\n"
    response = entry("hello", 2)["response"]
    assert response["raw_response"] == raw and response["extra_fields"] == {"confidence": 0.9}
    assert response["notes"] == ["the reasoning block before the answer was set aside",
                                 "the text around the fenced block was ignored",
                                 "action 'completed' read as COMPLETED"]


def test_one_corrective_reask_by_default_and_none_with_format_retries_0(jobs, llm):
    create("again")
    llm.add("Sure! I will write hello.py now.", answer("COMPLETED", "Wrote it.", ["hello.py"], file_changes=HELLO))
    step("again", llm.base_url)
    assert status("again")["status"] == "RUNNING"
    step("again", llm.base_url)
    assert status("again")["status"] == "REVIEWING"
    assert llm.requests[1]["messages"][-1]["content"].startswith(
        "Your last answer was refused: the answer is not valid JSON (Expecting value at line 1 column 1)")

    create("strict", "--format-retries", "0")
    llm.add("Sure!")
    stopped = step("strict", llm.base_url, 3)
    assert status("strict")["status"] == "INTERVENTION_REQUIRED" and "not valid JSON" in stopped.stderr


def test_a_tool_call_answer_is_read_through_the_cli(jobs):
    create("tool")
    done = answer("COMPLETED", "Wrote hello.py.", ["hello.py"], file_changes=HELLO)
    with ScriptedLLMServer([Reply(content=done, tool_call="submit_answer")]) as server:
        step("tool", server.base_url)
    assert status("tool")["status"] == "REVIEWING"
    recorded = entry("tool", 2)
    assert recorded["response"]["raw_response"] == done
    assert "tool 'submit_answer'" in recorded["note"]


def test_the_supervisors_file_changes_follow_its_role_policy(jobs, llm):
    create("refused")
    llm.add(answer("COMPLETED", "Wrote hello.py.", ["hello.py"], file_changes=HELLO),
            answer("COMPLETED", "Fixed it myself.", ["hello.py"], file_changes=[{"path": "hello.py", "content": "x\n"}]))
    step("refused", llm.base_url)
    step("refused", llm.base_url)
    assert status("refused")["status"] == "REVIEWING", "refused, and re-asked"
    assert (jobs.path / "refused" / "workspace" / "hello.py").read_text() == "print('Hello')\n"
    preview = json.loads(ok(logist_cli("job", "preview", "refused", "--json")).stdout)
    assert preview["messages"][-1]["content"].startswith(
        "Your last answer was refused: file_changes: the Supervisor role may not change files")

    role = json.loads((data_dir("roles") / "supervisor.json").read_text())
    role["file_changes"] = "approval"
    (jobs.path / "roles" / "supervisor.json").write_text(json.dumps(role))
    create("held")
    llm.add(answer("COMPLETED", "Wrote hello.py.", ["hello.py"], file_changes=HELLO),
            answer("MESSAGE", message="A small fix.", file_changes=[{"path": "hello.py", "old": "Hello", "new": "Hi"}]))
    step("held", llm.base_url)
    held = step("held", llm.base_url, 3)
    assert "hello.py" in held.stderr and status("held")["status"] == "INPUT_REQUIRED"
    assert (jobs.path / "held" / "workspace" / "hello.py").read_text() == "print('Hello')\n"
    approved = json.loads(ok(logist_cli("job", "approve-command", "held", "--json")).stdout)
    assert approved["status"] == "REVIEWING"
    assert (jobs.path / "held" / "workspace" / "hello.py").read_text() == "print('Hi')\n"


def test_reject_prints_the_new_state_as_json(jobs, llm):
    create("rej")
    llm.add(answer("COMPLETED", "Wrote it.", ["hello.py"], file_changes=HELLO), answer("COMPLETED", "Fine."))
    ok(logist_cli("job", "run", "rej", "--base-url", llm.base_url), 3)
    rejected = ok(logist_cli("job", "reject", "rej", "--feedback", "Print Hi instead", "--json"))
    data = json.loads(rejected.stdout)
    assert data["job_id"] == "rej" and data["status"] != "APPROVAL_REQUIRED" and data["role"] == "Worker"
