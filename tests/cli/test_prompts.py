"""``logist prompts`` and prompt overrides seen through ``job preview --json``;
model aliases from config.json."""

from __future__ import annotations

import json

from logist.engine.step import step_once
from logist.replay.scripted import answer
from logist.resources import data_dir
from logist.store.prompts import BUILTIN_DIR

from conftest import logist_cli, write_config


def ok(done):
    assert done.returncode == 0, done.stderr
    return done


def preview(job_id: str) -> dict:
    return json.loads(ok(logist_cli("job", "preview", job_id, "--json")).stdout)


def write(path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_list_shows_each_template_and_where_it_comes_from(jobs):
    write(jobs.path / "prompts" / "compaction" / "system.md", "Summarise.\n")
    write(jobs.path / "prompts" / "compation.md", "a typo\n")
    listing = json.loads(ok(logist_cli("prompts", "list", "--json")).stdout)
    rows = {row["name"]: row for row in listing["templates"]}
    assert rows["compaction/system"]["origin"] == "jobs directory"
    assert rows["compaction/system"]["path"] == str(jobs.path / "prompts" / "compaction" / "system.md")
    assert rows["roles/Worker"] == {**rows["roles/Worker"], "origin": "built-in",
                                    "path": str(BUILTIN_DIR / "roles" / "Worker.md")}
    assert listing["unused_files"] == [str(jobs.path / "prompts" / "compation.md")]

    text = ok(logist_cli("prompts", "list"))
    lines = {line.split()[0]: line.split(None, 1)[1] for line in text.stdout.splitlines()}
    assert lines["compaction/system"] == f"jobs directory: {jobs.path / 'prompts' / 'compaction' / 'system.md'}"
    assert lines["roles/Worker"] == "built-in"
    assert "compation.md is not the name of a template" in text.stderr


def test_show_prints_the_text_in_effect(jobs):
    builtin_text = ok(logist_cli("prompts", "show", "roles/Worker")).stdout
    assert builtin_text == (BUILTIN_DIR / "roles" / "Worker.md").read_text()
    write(jobs.path / "prompts" / "roles" / "Worker.md", "Work carefully, {role}.\n")
    assert ok(logist_cli("prompts", "show", "roles/Worker")).stdout == "Work carefully, {role}.\n"
    assert ok(logist_cli("prompts", "show", "roles/Worker", "--builtin")).stdout == builtin_text
    shown = json.loads(ok(logist_cli("prompts", "show", "messages/answered", "--json")).stdout)
    assert (shown["text"], shown["placeholders"], shown["origin"]) == ("User response: {answer}", ["answer"], "built-in")


def test_show_of_an_unknown_template_is_one_line(jobs):
    done = logist_cli("prompts", "show", "nosuch")
    assert done.returncode == 2
    assert done.stderr.strip() == "Error: no prompt template named 'nosuch' (logist prompts list shows them)"


def test_overrides_change_exactly_their_text_in_the_preview_and_removing_them_restores_it(jobs, llm):
    role = json.loads((data_dir("roles") / "worker.json").read_text())
    role.update(prompt_compression=True, compaction_threshold=1, compaction_retain_recent=0)
    write(jobs.path / "roles" / "worker.json", json.dumps(role))
    ok(logist_cli("job", "create", "long", "--objective", "A long task"))
    job = jobs.job("long")
    llm.add(answer("MESSAGE", message="note 1"), answer("MESSAGE", message="note 2"))
    step_once(job, base_url=llm.base_url)
    step_once(job, base_url=llm.base_url)

    summary_call = preview("long")  # due for compaction
    instructions = (BUILTIN_DIR / "roles" / "Worker.md").read_text().rstrip("\n")
    compaction = (BUILTIN_DIR / "compaction" / "system.md").read_text().rstrip("\n")
    assert summary_call["messages"][0]["content"] == compaction

    write(jobs.path / "prompts" / "compaction" / "system.md", "Summarise in three lines.\n")
    write(jobs.path / "prompts" / "roles" / "Worker.md", "You are the {role}. Be brief.\n")
    changed = preview("long")
    assert changed["messages"][0]["content"] == "Summarise in three lines."
    assert changed["messages"][1:] == summary_call["messages"][1:], "nothing else changed"

    llm.add("Notes 1 and 2 were written.")
    step_once(job, base_url=llm.base_url)
    role_call = preview("long")
    system = role_call["messages"][0]["content"]
    assert "--- Role: Worker ---\nYou are the Worker. Be brief.\n\n--- This turn so far ---" in system
    assert instructions not in system

    (jobs.path / "prompts" / "roles" / "Worker.md").unlink()
    restored = preview("long")
    assert restored["messages"][0]["content"] == system.replace("You are the Worker. Be brief.", instructions)
    assert restored["messages"][1:] == role_call["messages"][1:]


def test_a_template_with_an_unknown_placeholder_stops_the_step_before_any_call(jobs, llm):
    ok(logist_cli("job", "create", "hello", "--objective", "Write hello.py"))
    write(jobs.path / "prompts" / "job.md", "Do {objective} for {customer}.\n")
    done = logist_cli("job", "step", "hello", "--base-url", llm.base_url)
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and str(jobs.path / "prompts" / "job.md") in done.stderr
    assert "{customer}" in done.stderr
    assert llm.requests == [] and jobs.job("hello").manifest().calls == 0


def test_model_aliases_resolve_through_config(jobs, llm):
    write_config(jobs, model_aliases={"CHEAP": "small-model", "SMART": "big-model"})
    role = json.loads((data_dir("roles") / "supervisor.json").read_text())
    del role["llm_model"]
    role["llm_alias"] = "SMART"
    write(jobs.path / "roles" / "supervisor.json", json.dumps(role))
    ok(logist_cli("job", "create", "a", "--objective", "Write a.py", "--no-current"))
    ok(logist_cli("job", "create", "b", "--objective", "Write b.py", "--llm-alias", "CHEAP", "--no-current"))
    assert preview("a")["model"] == "gpt-4o-mini"
    assert preview("b")["model"] == "small-model"
    assert json.loads(ok(logist_cli("job", "preview", "a", "--json", "--model", "CHEAP")).stdout)["model"] == "small-model"
    llm.add(answer("COMPLETED", "wrote a.py"), answer("COMPLETED", "fine"))
    ran = logist_cli("job", "run", "a", "--base-url", llm.base_url)
    assert ran.returncode == 3 and "APPROVAL_REQUIRED" in ran.stderr, ran.stderr  # a person approves now
    assert [r["model"] for r in llm.requests] == ["gpt-4o-mini", "big-model"]
    history = json.loads(ok(logist_cli("job", "history", "a", "--entry", "3", "--json")).stdout)
    assert history["request"]["metadata"]["model"] == "big-model"


def test_an_unknown_alias_is_one_clear_error_before_any_call(jobs, llm):
    write_config(jobs, model_aliases={"CHEAP": "small-model"})
    done = logist_cli("job", "create", "c", "--objective", "x", "--llm-alias", "FAST")
    assert done.returncode == 1 and "model alias 'FAST'" in done.stderr and "CHEAP" in done.stderr
    assert not (jobs.path / "c").exists()

    role = json.loads((data_dir("roles") / "worker.json").read_text())
    role["llm_alias"] = "FAST"
    write(jobs.path / "roles" / "worker.json", json.dumps(role))
    ok(logist_cli("job", "create", "d", "--objective", "x"))
    done = logist_cli("job", "step", "d", "--base-url", llm.base_url)
    assert done.returncode == 1 and done.stderr.count("\n") == 1
    assert "role 'Worker'" in done.stderr and "model alias 'FAST'" in done.stderr
    assert llm.requests == [] and jobs.job("d").manifest().calls == 0
