"""Issue 29, seed fidelity: roles as seed 003 writes them, the Planner's
answers as seed 004 shows them, and prompt files and settings under the
seeds' names, through the real ``logist`` and a real server on 127.0.0.1
(the requests it receives are what is checked)."""

from __future__ import annotations

import json
import shutil

from logist.resources import data_dir
from logist.store.prompts import BUILTIN_DIR

from conftest import logist_cli


def ok(done, *codes: int):
    assert done.returncode in (codes or (0,)), done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    return done


def system_of(job_id: str) -> str:
    return json.loads(ok(logist_cli("job", "preview", job_id, "--json")).stdout)["messages"][0]["content"]


# Seed 003: roles ----------------------------------------------------------------------------

#: Seed 003's "Core Role Types", pretty-printed as the seed prints it.
CORE_ROLE_TYPES = {
    "Worker": {
        "name": "Worker",
        "description": "Expert software development and implementation agent specializing in code generation, "
                       "debugging, and technical problem-solving",
        "instructions": "You are an expert software engineer...",
        "llm_model": "grok-code-fast-1",
    },
    "Supervisor": {
        "name": "Supervisor",
        "description": "Quality assurance and oversight specialist focused on reviewing outputs, identifying "
                       "issues, and providing constructive feedback",
        "instructions": "You are a senior technical reviewer...",
        "llm_model": "gemini-2.5-flash",
    },
}

WORKER_DONE = json.dumps({"action": "COMPLETED", "evidence_files": [], "summary_for_supervisor": "Nothing to do."})
REVIEW_DONE = json.dumps({"action": "COMPLETED", "evidence_files": [], "summary_for_supervisor": "Checked."})


def test_every_built_in_role_file_has_seed_003s_four_attributes():
    for path in sorted(data_dir("roles").glob("*.json")):
        role = json.loads(path.read_text())
        assert {"name", "description", "llm_model"} <= set(role), path
        # Its instructions are the template the package ships, named, not copied.
        assert "instructions" not in role and (BUILTIN_DIR / role["prompt_file"]).is_file(), path


def test_a_built_in_role_copied_and_renamed_works_as_it_is(jobs, llm):
    copy = json.loads((data_dir("roles") / "worker.json").read_text())
    copy["name"] = "Tagger"
    copy["protocol"] = "tags"  # acceptance 1's tagger
    (jobs.path / "roles" / "tagger.json").write_text(json.dumps(copy, indent=2))
    listing = ok(logist_cli("role", "list"))
    assert "Tagger" in listing.stdout and listing.stderr == ""
    ok(logist_cli("job", "create", "t", "-o", "Nothing to do", "--worker", "Tagger"))
    system = system_of("t")
    # The tags protocol's system message is seed 002's base prompt; the shipped
    # Worker text (it teaches the JSON protocol's fields) is left out of it.
    worker_text = (BUILTIN_DIR / "roles" / "Worker.md").read_text().strip()
    assert system.startswith("You are a terminal AI assistant") and worker_text.splitlines()[0] not in system
    llm.add("[MESSAGE] Looking.", "[DONE] Nothing to do.", REVIEW_DONE)
    ok(logist_cli("job", "run", "t", "--base-url", llm.base_url), 3)
    assert json.loads(ok(logist_cli("job", "status", "t", "--json")).stdout)["status"] in (
        "APPROVAL_REQUIRED", "SUCCESS")
    assert llm.requests[0]["messages"][0]["content"] == system
    assert llm.requests[0]["max_tokens"] == 512 and llm.requests[0]["temperature"] == 0.3, "seed 002's defaults"


def test_a_role_without_instructions_is_refused_when_loaded_and_listed_with_its_error(jobs):
    bare = jobs.path / "roles" / "bare.json"
    bare.write_text(json.dumps({"name": "Bare", "description": "Does things", "llm_model": "m"}))
    listing = ok(logist_cli("role", "list"))
    assert "Bare" not in listing.stdout and "Worker" in listing.stdout
    assert listing.stderr.strip() == (
        f"Not loaded: role manifest {bare}: role 'Bare' has no instructions: give its manifest 'instructions' "
        f"or 'prompt_file', or write {jobs.path / 'prompts'}/roles/Bare.md")
    refused = logist_cli("job", "create", "b", "-o", "x", "--worker", "Bare")
    assert refused.returncode == 1 and "role 'Bare' has no instructions" in refused.stderr
    assert not (jobs.path / "b").exists()


def test_seed_003s_core_role_types_as_roles_json_give_the_roles_job_create_uses(jobs, llm):
    (jobs.path / "roles.json").write_text(json.dumps(CORE_ROLE_TYPES, indent=4))
    listing = ok(logist_cli("role", "list", "--json"))
    by_name = {r["name"]: r for r in json.loads(listing.stdout)}
    assert by_name["Worker"]["llm_model"] == "grok-code-fast-1" and by_name["Planner"]["llm_model"] == "gpt-4o-mini"
    assert by_name["Worker"]["source"] == str(jobs.path / "roles.json") and listing.stderr == ""
    ok(logist_cli("job", "create", "s", "-o", "Nothing to do"))
    llm.add(WORKER_DONE, REVIEW_DONE)
    ok(logist_cli("job", "run", "s", "--base-url", llm.base_url), 3)
    worker, supervisor = llm.requests
    assert worker["model"] == "grok-code-fast-1" and supervisor["model"] == "gemini-2.5-flash"
    assert "--- Role: Worker ---\nYou are an expert software engineer..." in worker["messages"][0]["content"]
    assert "--- Role: Supervisor ---\nYou are a senior technical reviewer..." in supervisor["messages"][0]["content"]


def test_core_role_types_in_a_roles_folder_file_however_indented(jobs):
    for indent in (None, 2, "\t"):
        (jobs.path / "roles" / "team.json").write_text(json.dumps(CORE_ROLE_TYPES, indent=indent))
        by_name = {r["name"]: r for r in json.loads(ok(logist_cli("role", "list", "--json")).stdout)}
        assert by_name["Supervisor"]["llm_model"] == "gemini-2.5-flash"
    mismatched = {"Worker": {**CORE_ROLE_TYPES["Worker"], "name": "Coder"}}
    (jobs.path / "roles" / "team.json").write_text(json.dumps(mismatched, indent=2))
    listing = ok(logist_cli("role", "list"))
    assert "the role under 'Worker' is named 'Coder'" in listing.stderr and "Worker" in listing.stdout


def test_a_roles_file_that_does_not_parse_is_named_and_the_built_in_roles_stay(jobs, llm):
    broken = jobs.path / "roles.json"
    broken.write_text(json.dumps(CORE_ROLE_TYPES, indent=4)[:-3])  # cut short
    listing = ok(logist_cli("role", "list"))
    assert listing.stderr.startswith(f"Not loaded: role manifest {broken}: not valid JSON at line")
    assert all(name in listing.stdout for name in ("Worker", "Supervisor", "Planner"))
    made = ok(logist_cli("job", "create", "k", "-o", "Nothing to do"))
    assert f"Not loaded: role manifest {broken}" in made.stderr
    llm.add(WORKER_DONE)
    ok(logist_cli("job", "step", "k", "--oneshot", "--base-url", llm.base_url))
    assert llm.requests[0]["model"] == "gpt-4o-mini", "the built-in Worker ran"
    shutil.rmtree(jobs.path / "roles")  # no folder at all: roles.json alone still counts
    assert ok(logist_cli("role", "list")).stderr.startswith("Not loaded:")


# Seed 004: the Planner's answers ------------------------------------------------------------


def planner_says(**response) -> str:
    return json.dumps({"response": response})


def test_the_seed_004_answer_alone_routes_through_an_alias_and_ends_with_stop_completed(jobs, llm):
    ok(logist_cli("job", "create", "p", "-o", "Nothing to do", "--workflow", "planned"))
    llm.add(
        planner_says(thought="The worker can check.", message="Check that there is nothing to do.",
                     send_to="CodeInterpreter"),
        WORKER_DONE,
        planner_says(thought="All done.", message="There was nothing to do.", send_to="user", stop="Completed",
                     plan_reasoning="One check is enough."),
    )
    ok(logist_cli("job", "run", "p", "--base-url", llm.base_url), 3)
    shown = json.loads(ok(logist_cli("job", "show", "p", "--json")).stdout)
    assert shown["status"] == "APPROVAL_REQUIRED"
    assert shown["plan"] == [] and shown.get("current_plan_step") is None, "a first answer without a plan: none"
    assert shown["plan_reasoning"] == "One check is enough." and shown["planner_thought"] == "All done."
    worker = llm.requests[1]["messages"]
    assert "--- Role: Worker ---" in worker[0]["content"]
    assert "Check that there is nothing to do." in worker[1]["content"]
    first = json.loads(ok(logist_cli("job", "history", "p", "--entry", "2", "--json")).stdout)["response"]
    assert "send_to 'CodeInterpreter' read as Worker" in first["notes"]
    text = ok(logist_cli("job", "show", "p")).stdout
    assert "Plan reasoning: One check is enough.\n" in text and "Planner's thought: All done.\n" in text


def test_a_seed_004_answer_keeps_the_plan_it_does_not_repeat(jobs, llm):
    ok(logist_cli("job", "create", "p", "-o", "Nothing to do", "--workflow", "planned"))
    llm.add(
        planner_says(thought="Plan first.", plan=["Check", "Report"], current_plan_step=0, message="Check it.",
                     send_to="WORKER"),
        WORKER_DONE,
        planner_says(thought="Now the report.", current_plan_step=1, message="Which report do you want?",
                     send_to="User", stop="Clarification"),
    )
    ok(logist_cli("job", "run", "p", "--base-url", llm.base_url), 3)
    shown = json.loads(ok(logist_cli("job", "show", "p", "--json")).stdout)
    assert shown["status"] == "INPUT_REQUIRED" and shown["question"]["text"] == "Which report do you want?"
    assert shown["plan"] == ["Check", "Report"] and shown["current_plan_step"] == 1


def test_the_planners_prompt_states_every_field_whatever_its_prompt_file(jobs):
    from logist.protocol.answer import Answer, PLANNER_OPTIONAL, PLANNER_REQUIRED

    (jobs.path / "prompts").mkdir()
    (jobs.path / "prompts" / "planner_prompt.yaml").write_text(
        "instruction_template: |-\n  You are the {role}. Route work to the workers.\n")
    ok(logist_cli("job", "create", "p", "-o", "Nothing to do", "--workflow", "planned"))
    system = system_of("p")
    assert "--- Role: Planner ---\nYou are the Planner. Route work to the workers.\n" in system
    for name in (*PLANNER_REQUIRED, *PLANNER_OPTIONAL):
        assert f'"{name}" ({Answer.model_fields[name].description})' in system, name


# Prompt files and settings under the seeds' names ---------------------------------------------


def note(i: int) -> str:
    return json.dumps({"action": "MESSAGE", "message": f"progress note {i}"})


def test_seed_004s_prompt_files_in_the_prompts_folder_change_the_texts_sent(jobs, llm):
    prompts = jobs.path / "prompts"
    prompts.mkdir()
    (prompts / "planner_prompt.yaml").write_text(
        "version: 0.2\ninstruction_template: |-\n  You are the {role} of this seed. Plan, then route.\n")
    (prompts / "compaction_prompt.yml").write_text("content: Fold the old rounds into five lines.\n")
    worker = json.loads((data_dir("roles") / "worker.json").read_text())
    worker.update(prompt_compression=True, compaction_threshold=1, compaction_retain_recent=0)
    (jobs.path / "roles" / "worker.json").write_text(json.dumps(worker))

    ok(logist_cli("job", "create", "p", "-o", "Nothing to do", "--workflow", "planned"))
    llm.add(planner_says(thought="Go.", message="Do nothing, twice.", send_to="Worker"), note(1), note(2),
            "Rounds 1-2: two progress notes.")
    for _ in range(4):
        ok(logist_cli("job", "step", "p", "--oneshot", "--base-url", llm.base_url))
    planner_system = llm.requests[0]["messages"][0]["content"]
    assert "--- Role: Planner ---\nYou are the Planner of this seed. Plan, then route.\n" in planner_system
    summary_call = llm.requests[3]["messages"]
    assert summary_call[0] == {"role": "system", "content": "Fold the old rounds into five lines."}

    listing = json.loads(ok(logist_cli("prompts", "list", "--json")).stdout)
    rows = {row["name"]: row for row in listing["templates"]}
    assert rows["roles/Planner"]["path"] == str(prompts / "planner_prompt.yaml")
    assert rows["compaction/system"]["path"] == str(prompts / "compaction_prompt.yml")
    assert listing["unused_files"] == []
    text = ok(logist_cli("prompts", "list")).stdout
    assert f"jobs directory: {prompts / 'planner_prompt.yaml'}" in text


def test_seed_002s_prompts_json_changes_the_texts_sent(jobs, llm):
    base = "You are a terminal AI assistant executing a multi-step skill.\n\nRESPONSE FORMAT: [CMD], [ASK], [DONE]."
    (jobs.path / "prompts.json").write_text(json.dumps(
        {"SKILL_SYSTEM_PROMPT_WITH_ASK": base, "messages/continue": "Go on.", "NOT_A_PROMPT": "x"}, indent=2))
    tagger = json.loads((data_dir("roles") / "worker.json").read_text())
    (jobs.path / "roles" / "tagger.json").write_text(json.dumps({**tagger, "name": "Tagger", "protocol": "tags"}))
    ok(logist_cli("job", "create", "t", "-o", "Nothing to do", "--worker", "Tagger"))
    llm.add("[MESSAGE] Looking.", "[DONE] Nothing to do.")
    ok(logist_cli("job", "step", "t", "--oneshot", "--base-url", llm.base_url))
    ok(logist_cli("job", "step", "t", "--oneshot", "--base-url", llm.base_url))
    first, second = llm.requests
    assert first["messages"][0]["content"].startswith(base), "the seed's base prompt: the tags protocol's system text"
    assert second["messages"][-1]["content"].startswith("Go on.")

    listed = ok(logist_cli("prompts", "list"))
    lines = {line.split()[0]: line.split(None, 1)[1] for line in listed.stdout.splitlines()}
    assert lines["protocol/tags"] == f"prompts.json: {jobs.path / 'prompts.json'}, key SKILL_SYSTEM_PROMPT_WITH_ASK"
    assert lines["messages/continue"] == f"prompts.json: {jobs.path / 'prompts.json'}, key messages/continue"
    assert f"Not used: {jobs.path / 'prompts.json'} key NOT_A_PROMPT is not the name of a template." in listed.stderr

    (jobs.path / "prompts.json").write_text('{"SKILL_SYSTEM_PROMPT_WITH_ASK": 3}')
    refused = logist_cli("job", "preview", "t")
    assert refused.returncode == 1 and refused.stderr.count("\n") == 1
    assert "prompts.json: key SKILL_SYSTEM_PROMPT_WITH_ASK: expected the prompt's text, got int" in refused.stderr


def test_seed_002s_endpoint_variable_and_model_key_are_read_after_logists_own(jobs, llm, monkeypatch):
    (jobs.path / "config.json").write_text(json.dumps({"AI_MODEL": "CHEAP", "model_aliases": {"CHEAP": "small-1"}}))
    monkeypatch.setenv("AI_KOSMOS_MODEL_BASE_URL", llm.base_url)
    ok(logist_cli("job", "create", "k", "-o", "Nothing to do"))
    llm.add(WORKER_DONE)
    ok(logist_cli("job", "step", "k", "--oneshot"))
    assert llm.requests[0]["model"] == "small-1"
    doctor = json.loads(ok(logist_cli("doctor", "--json")).stdout)
    assert doctor["endpoint_from"] == "AI_KOSMOS_MODEL_BASE_URL"
    assert doctor["roles"]["Worker"]["model_from"] == "config.json AI_MODEL"
    text = ok(logist_cli("doctor")).stdout
    assert "(from AI_KOSMOS_MODEL_BASE_URL)" in text and text.split("Worker: small-1 (")[1].splitlines()[0].endswith("), named by config.json AI_MODEL")

    # Logist's own names come first.
    (jobs.path / "config.json").write_text(json.dumps({"AI_MODEL": "small-1", "default_model": "big-2"}))
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    doctor = json.loads(logist_cli("doctor", "--json").stdout)
    assert doctor["endpoint_from"] == "OPENAI_BASE_URL"
    assert (doctor["roles"]["Worker"]["model"], doctor["roles"]["Worker"]["model_from"]) == (
        "big-2", "config.json default_model")
