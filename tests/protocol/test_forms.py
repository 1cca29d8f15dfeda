"""logist.protocol.forms through parse_answer: the text-tag protocol, the
seeds' answer shapes, and the tags prompt (seed 002's base prompt)."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from logist.protocol.answer import ACTION_RULES, TAGS, Answer, InvalidAnswer, parse_answer
from logist.protocol.prompt_text import protocol_text


def tags(raw: str) -> Answer:
    return parse_answer(raw, "tags")


# --------------------------------------------------------------------------
# The line protocol


@pytest.mark.parametrize(
    "raw, fields",
    [
        ("[CMD] git status --porcelain", {"action": "CMD", "command": "git status --porcelain"}),
        ("[ASK] Commit message?", {"action": "ASK", "question": "Commit message?", "required": True}),
        ("[ASK:optional] Add a tag? (empty to skip)", {"action": "ASK", "question": "Add a tag? (empty to skip)",
                                                       "required": False}),
        ("[MESSAGE] Folder 1 of 3...", {"action": "MESSAGE", "message": "Folder 1 of 3..."}),
        ("[DONE] Committed abc1234.", {"action": "COMPLETED", "summary_for_supervisor": "Committed abc1234.",
                                       "evidence_files": []}),
        ("[RETRY] Wrong approach.", {"action": "RETRY", "summary_for_supervisor": "Wrong approach."}),
        ("[STUCK] I need the password.", {"action": "STUCK", "summary_for_supervisor": "I need the password."}),
        ("[COMPLETED] Done.", {"action": "COMPLETED", "summary_for_supervisor": "Done."}),
        ("[cmd] ls", {"action": "CMD", "command": "ls"}),
        ("  [CMD]ls -la  \n", {"action": "CMD", "command": "ls -la"}),
        ("[CMD] cat > a.txt <<'EOF'\nhello\nEOF", {"action": "CMD", "command": "cat > a.txt <<'EOF'\nhello\nEOF"}),
        ("[DONE] Done.\nChanged 1 file.", {"summary_for_supervisor": "Done.\nChanged 1 file."}),
        ("[MESSAGE]", {"action": "MESSAGE", "message": ""}),
    ],
)
def test_each_tag_reads_as_its_action(raw, fields):
    answer = tags(raw)
    for name, value in fields.items():
        assert getattr(answer, name) == value, name
    assert answer.file_changes == []


def test_every_action_has_a_tag_and_the_seed_002_tags_are_there():
    assert {rule.tag for rule in ACTION_RULES.values()} >= {"CMD", "ASK", "MESSAGE", "DONE"}
    assert all(rule.tag and rule.tag_field in rule.required for rule in ACTION_RULES.values())
    assert TAGS["DONE"] == ("COMPLETED", "summary_for_supervisor")


@pytest.mark.parametrize(
    "raw, command, note",
    [
        ("git status", "git status", "no known tag: the first line was read as a command ([CMD])"),
        ("\n\n  ls -la\nThis lists the files.", "ls -la", "no known tag: the first line was read as a command ([CMD])"),
        ("[RUN] make", "[RUN] make", "no known tag: the first line was read as a command ([CMD])"),
        ("```bash\n[CMD] make test\n```", "make test", None),
        ("Sure, here it is:\n[CMD] make test", "make test", "the text before [CMD] was ignored"),
        ("<think>Run the tests.</think>\n[CMD] make test", "make test",
         "the reasoning block before the answer was set aside"),
    ],
)
def test_what_is_not_a_tag_answer_is_read_as_the_seed_says(raw, command, note):
    answer = tags(raw)
    assert (answer.action, answer.command) == ("CMD", command)
    assert (note is None and answer.notes == []) or note in answer.notes


@pytest.mark.parametrize("raw, match", [
    ("", "empty"), ("  \n ", "empty"), (None, "empty"), ("[CMD]", "command"), ("[ASK]   ", "question"),
    ("[DONE]", "summary_for_supervisor"),
])
def test_a_tag_answer_with_nothing_to_act_on_is_refused(raw, match):
    with pytest.raises(InvalidAnswer, match=match):
        tags(raw)


def test_a_long_done_summary_is_cut_and_noted():
    answer = tags("[DONE] " + "x" * 1500)
    assert len(answer.summary_for_supervisor) == 1000 and answer.summary_for_supervisor.endswith("\u2026")
    assert answer.notes == ["the summary was cut to 1000 characters"]


def test_a_json_answer_in_the_tags_protocol_is_a_command_not_a_guess():
    # The seed's rule, applied as written: no tag, the first line runs (under the command policy).
    answer = tags('{"action": "COMPLETED"}')
    assert (answer.action, answer.command) == ("CMD", '{"action": "COMPLETED"}')


@given(st.text())
def test_any_text_reads_as_an_answer_or_one_clear_refusal(raw):
    try:
        answer = tags(raw)
    except InvalidAnswer as exc:
        assert str(exc)
    else:
        assert answer.action in ACTION_RULES


def test_an_unknown_protocol_is_a_programming_error():
    with pytest.raises(ValueError, match="unknown protocol 'xml'"):
        parse_answer("[CMD] ls", "xml")
    with pytest.raises(ValueError, match="unknown protocol"):
        protocol_text("xml")


# --------------------------------------------------------------------------
# The tags prompt: seed 002's base prompt


def test_the_tags_prompt_is_seed_002s_and_every_tag_it_teaches_is_read():
    from logist.store.prompts import builtin

    text = builtin().render("protocol/tags")
    assert text.startswith("You are a terminal AI assistant executing a multi-step skill.\n\nRESPONSE FORMAT")
    assert text.endswith("- [DONE]: summarize what was accomplished")
    assert "JSON" not in text and "json" not in text and "file_changes" not in text
    taught = re.findall(r"^\d\. (\[[A-Z:a-z]+\]) ", text, re.M)
    assert taught == ["[CMD]", "[ASK]", "[ASK:optional]", "[MESSAGE]", "[DONE]"]
    read = {tag: tags(f"{tag} something") for tag in taught}
    assert [a.action for a in read.values()] == ["CMD", "ASK", "ASK", "MESSAGE", "COMPLETED"]
    assert read["[ASK:optional]"].required is False


def test_only_the_json_protocol_is_generated():
    assert protocol_text() == protocol_text("json")
    with pytest.raises(ValueError, match="protocol/tags prompt template"):
        protocol_text("tags")


# --------------------------------------------------------------------------
# The seeds' shapes (JSON)


def test_seed_004_wrapper_with_a_numbered_plan():
    raw = json.dumps({"response": {
        "thought": "t", "plan": "1. Load the data\n2. Count the words\n3. Report", "current_plan_step": "2. Count the words",
        "send_to": "Worker", "message": "Count the words.", "plan_reasoning": "r", "stop": "InProcess",
    }})
    answer = parse_answer(raw, planner=True)
    assert answer.action == "MESSAGE"
    assert answer.plan == ["Load the data", "Count the words", "Report"]
    assert answer.current_plan_step == 1
    assert (answer.thought, answer.send_to, answer.message) == ("t", "Worker", "Count the words.")
    assert answer.plan_reasoning == "r" and answer.extra == {"stop": "InProcess"}


@pytest.mark.parametrize(
    "stop, action",
    [("Completed", "COMPLETED"), (True, "COMPLETED"), ("Clarification", "ASK"), (None, "ASK"), ("InProcess", "ASK")],
)
def test_a_planner_to_the_user_with_no_action_completes_or_asks(stop, action):
    data = {"plan": ["a"], "current_plan_step": 0, "send_to": "User", "message": "The greeting is written."}
    if stop is not None:
        data["stop"] = stop
    answer = parse_answer(json.dumps(data), planner=True)
    assert answer.action == action
    if action == "COMPLETED":
        assert answer.summary_for_supervisor == "The greeting is written." and answer.evidence_files == []
    else:
        assert answer.question == "The greeting is written."


def test_the_wrapper_and_the_missing_action_are_the_planners_only():
    wrapped = json.dumps({"response": {"send_to": "Worker", "message": "go"}})
    with pytest.raises(InvalidAnswer, match="'action' is a required property"):
        parse_answer(wrapped)
    with pytest.raises(InvalidAnswer, match="needs 'send_to'"):
        parse_answer(json.dumps({"message": "hi"}), planner=True)


@pytest.mark.parametrize("step", ["9. Nowhere", "Something else"])
def test_a_plan_step_that_names_no_step_is_refused(step):
    raw = json.dumps({"plan": ["a", "b"], "current_plan_step": step, "send_to": "Worker", "message": "go"})
    with pytest.raises(InvalidAnswer, match="current_plan_step"):
        parse_answer(raw, planner=True)


def test_keys_in_another_case_are_read():
    answer = parse_answer(json.dumps({"Action": "CMD", "Command": "ls"}))
    assert (answer.action, answer.command) == ("CMD", "ls")


def test_a_json_error_says_at_once():
    """Python ends some messages with "at" ("Invalid control character at"): the reason reads it once."""
    from logist.protocol.forms import Unreadable, read_json_text

    with pytest.raises(Unreadable) as raised:
        read_json_text('{"action": "MESSAGE", "message": "a\x01b" "x"}', [])
    assert "Invalid control character at line 1 column 36" in str(raised.value)
    assert "at at" not in str(raised.value)


def test_a_config_file_with_a_control_character_says_at_once(tmp_path):
    from logist.errors import ConfigError
    from logist.store.config import load_config

    (tmp_path / "config.json").write_text('{"base_url": "http://a\x01b"}')
    with pytest.raises(ConfigError) as raised:
        load_config(tmp_path)
    assert str(raised.value).endswith("Invalid control character") and "at at" not in str(raised.value)


@pytest.mark.parametrize("step, index", [("3. Report", 2), ("Count the words", 1), ("step 1", 0)])
def test_a_later_planner_answer_names_its_step_by_text_from_the_plan_so_far(step, index):
    """The plan came in an earlier answer: the step's text or number is found in it."""
    plan = ["Load the data", "Count the words", "Report"]
    raw = json.dumps({"response": {"thought": "t", "current_plan_step": step, "send_to": "Worker",
                                   "message": "Go on."}})
    answer = parse_answer(raw, planner=True, plan=plan)
    assert answer.current_plan_step == index and answer.plan is None
    assert any(f"read as step {index}" in note for note in answer.notes)


def test_a_step_named_by_text_that_no_plan_holds_is_still_refused():
    from logist.protocol.answer import InvalidAnswer

    raw = json.dumps({"current_plan_step": "Deploy it", "send_to": "Worker", "message": "Go on."})
    with pytest.raises(InvalidAnswer, match="current_plan_step"):
        parse_answer(raw, planner=True, plan=["Load the data"])
