"""The seeds' shapes through the real ``logist`` (its entry point, in the
test's process: tests/conftest.py), against a real server on 127.0.0.1: the
text-tag protocol (seed 002) run, answered and replayed; seed 004's Planner
wrapper and ``planner_prompt.yaml``; seed 003's exit command; noisy command
output cleaned for the model and kept raw in the history; ``job preview``
with no placeholder left unfilled."""

from __future__ import annotations

import json
import re

from logist.replay.scripted import answer
from logist.resources import data_dir
from logist.store.prompts import TEMPLATES

from conftest import logist_cli

HELLO = [{"path": "hello.py", "content": "print('Hello')\n"}]


def ok(done, *codes: int):
    assert done.returncode in (codes or (0,)), done.stderr
    assert "Traceback" not in done.stderr
    return done


def role_file(jobs, name: str, **changes) -> None:
    """A jobs directory's copy of a built-in role, with ``changes``."""
    role = json.loads((data_dir("roles") / f"{name.lower()}.json").read_text())
    role.update(changes)
    (jobs.path / "roles" / f"{name.lower()}.json").write_text(json.dumps(role))


def status(job_id: str) -> str:
    return json.loads(ok(logist_cli("job", "status", job_id, "--json")).stdout)["status"]


def entry(job_id: str, number: int) -> dict:
    return json.loads(ok(logist_cli("job", "history", job_id, "--entry", str(number), "--json")).stdout)


# Seed 002: the text-tag protocol ------------------------------------------------------------


def test_a_tags_role_runs_answers_and_replays_through_the_cli(jobs, llm, tmp_path):
    role_file(jobs, "Worker", protocol="tags")
    role_file(jobs, "Supervisor", protocol="tags")
    ok(logist_cli("job", "create", "tags", "--objective", "Write hello.txt", "--command-policy", "allow",
                  "--allow", "ls*", "--allow", "echo Hello > hello.txt"))
    system = json.loads(ok(logist_cli("job", "preview", "tags", "--json")).stdout)["messages"][0]["content"]
    assert "[DONE]" in system and "[ASK:optional]" in system, "the prompt teaches the tags"

    llm.add("[CMD] ls", "[MESSAGE] Looking around first.", "[ASK] Which greeting should it print?")
    asked = ok(logist_cli("job", "run", "tags", "--base-url", llm.base_url), 3)
    assert "INPUT_REQUIRED" in asked.stderr and status("tags") == "INPUT_REQUIRED"
    ok(logist_cli("job", "answer", "tags", "Hello"))
    llm.add("echo Hello > hello.txt\nThat writes the file.", "[DONE] Wrote hello.txt with Hello.",
            "[DONE] hello.txt says Hello.")
    ok(logist_cli("job", "run", "tags", "--base-url", llm.base_url), 3)
    assert status("tags") == "APPROVAL_REQUIRED"
    assert (jobs.path / "tags" / "workspace" / "hello.txt").read_text() == "Hello\n"

    untagged = entry("tags", 6)
    assert untagged["response"]["notes"] == ["no known tag: the first line was read as a command ([CMD])"]
    assert untagged["command"]["command"] == "echo Hello > hello.txt" and untagged["command"]["decision"] == "run"
    assert llm.requests[3]["messages"][-1]["content"].startswith("User response: Hello")

    # Replay of the recorded history in another jobs directory, with no model.
    other = tmp_path / "other"
    env = {"LOGIST_JOBS_DIR": str(other)}
    ok(logist_cli("init", env=env))
    (other / "roles").mkdir(exist_ok=True)
    for name in ("worker.json", "supervisor.json"):
        (other / "roles" / name).write_text((jobs.path / "roles" / name).read_text())
    ok(logist_cli("job", "create", "tags", "--objective", "Write hello.txt", "--command-policy", "allow",
                  "--allow", "ls*", "--allow", "echo Hello > hello.txt", env=env))
    replayed = logist_cli("job", "replay", "tags", "--history", str(jobs.path / "tags" / "jobHistory.json"), env=env)
    assert replayed.returncode == 3, replayed.stderr
    assert (other / "tags" / "workspace" / "hello.txt").read_text() == "Hello\n"
    shown = json.loads(ok(logist_cli("job", "status", "tags", "--json", env=env)).stdout)
    assert shown["status"] == "APPROVAL_REQUIRED"


def test_an_untagged_answer_waits_under_the_ask_policy(jobs, llm):
    role_file(jobs, "Worker", protocol="tags")
    ok(logist_cli("job", "create", "tags", "--objective", "Clean up"))  # command policy ask
    llm.add("rm -rf build")
    held = ok(logist_cli("job", "step", "tags", "--oneshot", "--base-url", llm.base_url), 3)
    assert "rm -rf build" in held.stderr
    shown = json.loads(ok(logist_cli("job", "status", "tags", "--json")).stdout)
    assert shown["pending_command"] == "rm -rf build"


# Seed 004: the Planner's wrapper and prompt file; seed 003: the exit command ----------------


PLANNER_PROMPT_YAML = """\
version: 0.2
instruction_template: |-
  You are the {role} who can coordinate Workers to finish the user task.
  Break the task into steps and send each to a worker.
response_json_schema: |-
  {"type": "object"}
"""


def test_a_yaml_prompt_file_gives_the_text_under_its_prompt_key(jobs):
    (jobs.path / "roles" / "planner_prompt.yaml").write_text(PLANNER_PROMPT_YAML)
    role_file(jobs, "Planner", prompt_file_path="planner_prompt.yaml")
    manifest = json.loads((jobs.path / "roles" / "planner.json").read_text())
    manifest.pop("prompt_file")  # the built-in's, which prompt_file_path replaces
    (jobs.path / "roles" / "planner.json").write_text(json.dumps(manifest))
    ok(logist_cli("job", "create", "plan", "--objective", "Write hello.py", "--workflow", "planned"))
    system = json.loads(ok(logist_cli("job", "preview", "plan", "--json")).stdout)["messages"][0]["content"]
    assert ("--- Role: Planner ---\nYou are the Planner who can coordinate Workers to finish the user task.\n"
            "Break the task into steps and send each to a worker.\n") in system
    assert "instruction_template" not in system and "version: 0.2" not in system
    shown = ok(logist_cli("prompts", "show", "roles/Planner")).stdout
    assert shown.startswith("You are the {role} who can coordinate Workers")

    (jobs.path / "roles" / "planner_prompt.yaml").write_text("version: 0.2\nresponse_json_schema: x\n")
    broken = logist_cli("job", "preview", "plan")
    assert broken.returncode == 1 and broken.stderr.count("\n") == 1, broken.stderr
    assert str(jobs.path / "roles" / "planner_prompt.yaml") in broken.stderr
    assert "instruction_template" in broken.stderr and "version, response_json_schema" in broken.stderr

    (jobs.path / "roles" / "planner_prompt.yaml").write_text("instruction_template: [unclosed\n")
    broken = logist_cli("job", "preview", "plan")
    assert broken.returncode == 1 and broken.stderr.count("\n") == 1, broken.stderr
    assert "planner_prompt.yaml line" in broken.stderr and "not valid YAML" in broken.stderr


def test_the_seed_004_wrapper_drives_a_planned_job_through_the_cli(jobs, llm):
    ok(logist_cli("job", "create", "plan", "--objective", "Write hello.py", "--workflow", "planned"))
    delegate = {"response": {"thought": "One file, then done.", "plan": "1. Write hello.py\n2. Check it",
                             "current_plan_step": "1. Write hello.py", "plan_reasoning": "A small task.",
                             "send_to": "Worker", "message": "Write hello.py that prints Hello.", "stop": "InProcess"}}
    done = {"response": {"thought": "Done.", "plan": ["Write hello.py", "Check it"], "current_plan_step": 1,
                         "send_to": "User", "message": "hello.py prints Hello.", "stop": "Completed"}}
    llm.add(json.dumps(delegate), answer("COMPLETED", "Wrote hello.py.", ["hello.py"], file_changes=HELLO),
            json.dumps(done))
    ran = logist_cli("job", "run", "plan", "--base-url", llm.base_url, "--json")
    assert ran.returncode == 3, ran.stderr
    shown = json.loads(ok(logist_cli("job", "status", "plan", "--json")).stdout)
    assert shown["status"] == "APPROVAL_REQUIRED"
    assert (jobs.path / "plan" / "workspace" / "hello.py").read_text() == "print('Hello')\n"
    first = entry("plan", 2)["response"]
    assert first["extra_fields"] == {"stop": "InProcess"}


def test_the_seed_003_exit_command_drives_a_job_through_the_cli(jobs, llm):
    ok(logist_cli("job", "create", "hello", "--objective", "Write hello.py"))
    exit_command = {"action": "COMPLETED", "evidence_files": ["hello.py"], "file_changes": HELLO,
                    "summary_for_supervisor": "Implemented hello.py, which prints a greeting.",
                    "job_manifest_url": "file:///jobs/hello/job_manifest.json"}
    llm.add(json.dumps(exit_command, indent=2), answer("COMPLETED", "It prints a greeting."))
    ok(logist_cli("job", "run", "hello", "--base-url", llm.base_url), 3)
    assert status("hello") == "APPROVAL_REQUIRED"
    worker = entry("hello", 2)["response"]
    assert worker["summary_for_supervisor"] == exit_command["summary_for_supervisor"]
    assert worker["extra_fields"] == {"job_manifest_url": exit_command["job_manifest_url"]}
    assert "Implemented hello.py" in llm.requests[1]["messages"][1]["content"]


# Seed 002: command output cleaned for the model, raw in the history --------------------------

NOISY = r'''
import sys
print("Microsoft Windows [Version 10.0.19045.3803]")
print("(c) Microsoft Corporation. All rights reserved.")
print()
print("\x1b[1;32mPASSED\x1b[0m in colour\x1b]0;a title\x07")
sys.stdout.write("\n" * 300)
for i in range(11_000):
    sys.stdout.write(f"line {i:06d} " + "y" * 80 + "\n")
print("THE END")
'''


def test_noisy_output_reaches_the_model_cleaned_and_cut_and_the_history_keeps_it_raw(jobs, llm, tmp_path):
    (tmp_path / "noisy.py").write_text(NOISY)
    ok(logist_cli("job", "create", "noisy", "--objective", "Run noisy.py", "--file", str(tmp_path / "noisy.py"),
                  "--command-policy", "allow", "--allow", "python3 noisy.py"))
    llm.add(answer("CMD", command="python3 noisy.py"), answer("MESSAGE", message="seen"))
    ok(logist_cli("job", "step", "noisy", "--oneshot", "--base-url", llm.base_url))
    ok(logist_cli("job", "step", "noisy", "--oneshot", "--base-url", llm.base_url))

    shown = llm.requests[1]["messages"][-1]["content"]
    assert "\x1b" not in shown and "\x07" not in shown and "Microsoft" not in shown
    assert "PASSED in colour\nline 000000 " in shown, "the blank lines are removed"
    size = 11_000 * 93  # bytes the command printed, but for a few lines
    cut = re.search(r"\[\.\.\. (\d+) characters cut from the middle \.\.\.\]", shown)
    assert cut, shown[:300]
    assert int(cut.group(1)) > size - 25_000, "the note counts the whole cut, read or not"
    assert len(shown) < 22_000 and "THE END" in shown

    command = entry("noisy", 2)["command"]
    assert command["output"] in shown
    raw = command["raw_stdout"]
    assert raw.startswith("Microsoft Windows [Version 10.0.19045.3803]\n(c) Microsoft Corporation.")
    assert "\x1b[1;32mPASSED\x1b[0m" in raw and "\n" * 300 in raw
    assert raw.endswith("THE END\n") and "bytes of output not read" in raw
    # What the model sees is kept once: the raw text only where cleaning changed it.
    assert "raw_stderr" not in command


def test_output_that_cleaning_leaves_alone_is_not_kept_twice(jobs, llm):
    ok(logist_cli("job", "create", "quiet", "--objective", "Say hi", "--command-policy", "allow",
                  "--allow", "echo hi"))
    llm.add(answer("CMD", command="echo hi"))
    ok(logist_cli("job", "step", "quiet", "--oneshot", "--base-url", llm.base_url))
    command = entry("quiet", 2)["command"]
    assert "hi" in command["output"] and "raw_stdout" not in command and "raw_stderr" not in command


# job preview ---------------------------------------------------------------------------------

PLACEHOLDER = re.compile(r"\{(" + "|".join(sorted({p for t in TEMPLATES.values() for p in t.placeholders} | {
    "role", "base_url", "model", "api_key"})) + r")\}")


def test_preview_never_shows_an_unfilled_placeholder(jobs, llm):
    ok(logist_cli("job", "create", "plain", "--objective", "Write hello.py", "--acceptance", "it prints Hello"))
    ok(logist_cli("job", "create", "plan", "--objective", "Write hello.py", "--workflow", "planned"))
    ok(logist_cli("job", "create", "cmd", "--objective", "List files", "--command-policy", "allow", "--allow", "ls*"))
    llm.add(answer("CMD", command="ls"))
    ok(logist_cli("job", "step", "cmd", "--oneshot", "--base-url", llm.base_url))
    for job_id in ("plain", "plan", "cmd"):
        for args in ((), ("--json",), ("--base-url", llm.base_url)):
            shown = ok(logist_cli("job", "preview", job_id, *args))
            assert not PLACEHOLDER.search(shown.stdout), (job_id, args, PLACEHOLDER.search(shown.stdout).group(0))
        text = ok(logist_cli("job", "preview", job_id, "--base-url", llm.base_url)).stdout
        assert text.startswith(f"POST {llm.base_url}/chat/completions")


def test_preview_with_no_endpoint_says_a_step_would_stop(jobs):
    ok(logist_cli("job", "create", "hello", "--objective", "Write hello.py"))
    shown = ok(logist_cli("job", "preview", "hello"))
    assert not PLACEHOLDER.search(shown.stdout)
    assert "a step would stop before any call: no model endpoint is configured" in shown.stderr
    assert "--base-url" in shown.stderr


def test_a_yaml_prompt_file_in_roles_is_neither_loaded_as_a_role_nor_warned_about(jobs):
    """A role's prompt_file naming a YAML file beside it in roles/ makes that
    file its prompt, not another role: no role of its name, no "Not loaded"."""
    (jobs.path / "roles" / "planner_prompt.yaml").write_text(PLANNER_PROMPT_YAML)
    role_file(jobs, "Planner", prompt_file_path="planner_prompt.yaml")
    manifest = json.loads((jobs.path / "roles" / "planner.json").read_text())
    manifest.pop("prompt_file")
    (jobs.path / "roles" / "planner.json").write_text(json.dumps(manifest))
    created = ok(logist_cli("job", "create", "plan", "--objective", "Write hello.py", "--workflow", "planned"))
    assert "Not loaded" not in created.stderr, created.stderr
    listed = ok(logist_cli("role", "list", "--json")).stdout
    assert "planner_prompt" not in listed
    assert "Not loaded" not in ok(logist_cli("role", "list")).stderr
    # A YAML file no role names is still read as a role file (and said when it is not one).
    (jobs.path / "roles" / "stray.yaml").write_text(PLANNER_PROMPT_YAML)
    assert "Not loaded" in logist_cli("job", "create", "other", "--objective", "Write hi.py").stderr
