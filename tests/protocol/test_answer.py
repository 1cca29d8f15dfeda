"""logist.protocol.answer: parsing one answer of the model and the shape rules for paths."""

from __future__ import annotations

import json
import math
import os
import re
import string
import subprocess
import sys
from pathlib import PurePosixPath

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from logist.protocol.answer import (
    ACTION_RULES,
    ACTIONS,
    EXAMPLE_ANSWER,
    EXIT_ACTIONS,
    FILE_CHANGES_MAX,
    PATH_RULE,
    PLACEHOLDER_CONTENT,
    PLACEHOLDER_PATH,
    PLACEHOLDER_SUMMARY,
    Answer,
    DeleteFile,
    InvalidAnswer,
    ReplaceInFile,
    WriteFile,
    answer_json,
    check_relative_path,
    is_git_name,
    parse_answer,
    response_schema,
)
from logist.protocol.paths import named_path
from logist.protocol.prompt_text import protocol_text
from logist.replay.scripted import answer

REQUIRED = {
    "COMPLETED": {"evidence_files": ["hello.py"], "summary_for_supervisor": "Wrote hello.py."},
    "STUCK": {"evidence_files": [], "summary_for_supervisor": "I need the database password."},
    "RETRY": {"evidence_files": ["a/b.txt"], "summary_for_supervisor": "Start over."},
    "CMD": {"command": "python hello.py"},
    "ASK": {"question": "Which greeting?"},
    "MESSAGE": {"message": "Reading the code first."},
}


def dumps(action: str, **fields) -> str:
    return json.dumps({"action": action, **fields})


def refused(raw, match: str | None = None) -> str:
    with pytest.raises(InvalidAnswer) as info:
        parse_answer(raw)
    if match is not None:
        assert match in str(info.value)
    return str(info.value)


# --------------------------------------------------------------------------
# Actions and their required fields


def test_action_table_matches_spec():
    assert set(ACTIONS) == set(REQUIRED)
    assert set(EXIT_ACTIONS) == {"COMPLETED", "STUCK", "RETRY"}


@pytest.mark.parametrize("action", sorted(REQUIRED))
def test_each_action_with_its_required_fields(action):
    fields = REQUIRED[action]
    answer = parse_answer(dumps(action, **fields))
    assert isinstance(answer, Answer)
    assert answer.action == action
    for name, value in fields.items():
        assert getattr(answer, name) == value
    assert answer.is_exit == (action in EXIT_ACTIONS)
    assert answer.file_changes == []


@pytest.mark.parametrize(
    "action, missing",
    [(action, name) for action in sorted(REQUIRED) for name in sorted(REQUIRED[action])],
)
def test_each_missing_required_field_is_refused(action, missing):
    fields = {k: v for k, v in REQUIRED[action].items() if k != missing}
    refused(dumps(action, **fields), f"'{missing}' is a required property")


@pytest.mark.parametrize(
    "action, field",
    [("COMPLETED", "summary_for_supervisor"), ("CMD", "command"), ("ASK", "question")],
)
def test_empty_required_text_is_refused(action, field):
    fields = dict(REQUIRED[action], **{field: ""})
    refused(dumps(action, **fields), field)


@pytest.mark.parametrize("data", [{"message": "hi"}, {}, {"command": "ls"}])
def test_missing_action_is_refused(data):
    refused(json.dumps(data), "schema violation")


def test_missing_action_error_names_action():
    refused(json.dumps({"message": "hi"}), "'action' is a required property")


@pytest.mark.parametrize("action", ["LAUNCH", "", None, 3, "message please"])
def test_unknown_action_is_refused(action):
    refused(json.dumps({"action": action, "message": "x"}), "action")


@pytest.mark.parametrize("spelling", ["message", "Message", " MESSAGE ", "mEsSaGe"])
def test_an_action_in_another_case_is_read_and_noted(spelling):
    answer = parse_answer(json.dumps({"action": spelling, "message": "x"}))
    assert answer.action == "MESSAGE"
    assert answer.notes == [f"action '{spelling}' read as MESSAGE"]


def test_ask_required_defaults_true_and_can_be_false():
    assert parse_answer(dumps("ASK", question="Q?")).required is True
    assert parse_answer(dumps("ASK", question="Q?", required=False)).required is False
    refused(dumps("ASK", question="Q?", required="no"), "required")


def test_planner_fields_are_accepted():
    answer = parse_answer(
        dumps("MESSAGE", message="Worker, write it.", plan=["write", "test"], current_plan_step=1, send_to="Worker",
              thought="plan first")
    )
    assert (answer.plan, answer.current_plan_step, answer.send_to, answer.thought) == (
        ["write", "test"], 1, "Worker", "plan first",
    )
    refused(dumps("MESSAGE", message="x", current_plan_step=-1), "current_plan_step")
    refused(dumps("MESSAGE", message="x", plan=[""]), "plan")


def test_summary_length_limit_is_1000_characters():
    ok = parse_answer(dumps("COMPLETED", evidence_files=[], summary_for_supervisor="é" * 1000))
    assert len(ok.summary_for_supervisor) == 1000
    # Longer is cut, with a note (the decoding schema has no maxLength: see logist/protocol/decoding.py).
    for action, text in (("COMPLETED", "x" * 1001), ("STUCK", "é" * 5000)):
        cut = parse_answer(dumps(action, evidence_files=[], summary_for_supervisor=text))
        assert cut.summary_for_supervisor == text[:999] + "\u2026"
        assert "the summary was cut to 1000 characters" in cut.notes


@pytest.mark.parametrize(
    "data, extra",
    [
        ({"action": "MESSAGE", "message": "x", "confidence": 0.9}, {"confidence": 0.9}),
        ({"action": "CMD", "command": "ls", "cwd": "/", "why": {"a": [1]}}, {"cwd": "/", "why": {"a": [1]}}),
    ],
    ids=["top-level", "cmd-extra"],
)
def test_unknown_top_level_fields_are_kept_apart_never_acted_on(data, extra):
    answer = parse_answer(json.dumps(data))
    assert answer.extra == extra
    assert answer.notes == []
    assert not set(extra) & set(answer.model_dump())


def test_an_unknown_field_inside_a_file_change_is_refused():
    # An unknown key there could change what the change means (a mode, an append): refused, not guessed at.
    refused(dumps("MESSAGE", message="x", file_changes=[{"path": "a", "content": "x", "mode": "755"}]), "file_changes/0")


# --------------------------------------------------------------------------
# Fences and surrounding text

BODY = dumps("MESSAGE", message="hello")


@pytest.mark.parametrize(
    "raw",
    [
        BODY,
        f"  \n{BODY}\n\n",
        f"```json\n{BODY}\n```",
        f"```JSON\n{BODY}\n```",
        f"```\n{BODY}\n```",
        f"```json\r\n{BODY}\r\n```",
        f"\n  ```json\n{BODY}\n```  \n",
        "```json\n" + json.dumps({"action": "MESSAGE", "message": "hello"}, indent=2) + "\n```",
    ],
    ids=["bare", "whitespace", "json-fence", "JSON-fence", "plain-fence", "crlf-fence", "fence-padded", "indented"],
)
def test_fences_are_tolerated(raw):
    answer = parse_answer(raw)
    assert (answer.action, answer.message) == ("MESSAGE", "hello")


@pytest.mark.parametrize(
    "raw, note",
    [
        (f"Here is my answer: {BODY}", "the text around the JSON object was ignored"),
        (f"{BODY}\nHope that helps!", "the text around the JSON object was ignored"),
        (f"Sure.\n```json\n{BODY}\n```", "the text around the fenced block was ignored"),
        (f"```json\n{BODY}\n```\nDone.", "the text around the fenced block was ignored"),
        (f"```python\n{BODY}\n```", None),
        (f"```json\n{BODY}", "the text around the JSON object was ignored"),
        (f"I think {{braces}} matter. {BODY} {{not json}}", "the text around the JSON object was ignored"),
    ],
    ids=["prefix", "suffix", "text-before-fence", "text-after-fence", "other-fence-lang", "unclosed-fence",
         "braces-in-prose"],
)
def test_prose_around_one_json_object_is_read_and_noted(raw, note):
    answer = parse_answer(raw)
    assert (answer.action, answer.message) == ("MESSAGE", "hello")
    assert note is None or answer.notes == [note]


@pytest.mark.parametrize(
    "raw, match",
    [
        (f"{BODY}{BODY}", "holds 2 JSON objects"),
        (f"First {BODY}, or maybe {BODY}", "holds 2 JSON objects"),
        ("Sure! Here is my answer: done.", "not valid JSON"),
        ('Here: {"action": "MESSAGE", "message": "hello",}', "not valid JSON"),
    ],
    ids=["two-objects", "two-in-prose", "prose", "broken-object"],
)
def test_no_single_json_object_is_refused(raw, match):
    refused(raw, match)


@pytest.mark.parametrize(
    "raw",
    [
        f"<think>The user wants a greeting. {{maybe}} I'll say hello.</think>\n{BODY}",
        f"<think>\nmulti\nline\n</think>\n\n```json\n{BODY}\n```",
        f"<THINKING>x</THINKING>{BODY}",
        f"reasoning the server left without its opening tag</think>\n{BODY}",
    ],
    ids=["think", "think-then-fence", "thinking", "lone-close"],
)
def test_a_reasoning_block_before_the_answer_is_set_aside(raw):
    answer = parse_answer(raw)
    assert (answer.action, answer.message) == ("MESSAGE", "hello")
    assert answer.notes[0] == "the reasoning block before the answer was set aside"


def test_a_reasoning_block_alone_is_refused():
    refused("<think>I should answer.</think>", "only a reasoning block")


def test_not_json_error_says_so():
    message = refused("Sure! Here is my answer: done.", "not valid JSON")
    assert "line 1 column 1" in message


@pytest.mark.parametrize("raw", ["", "   \n\t", None])
def test_empty_answer_is_refused(raw):
    refused(raw, "empty")


@pytest.mark.parametrize("raw, kind", [("[]", "list"), ('"COMPLETED"', "str"), ("42", "int"), ("null", "NoneType")])
def test_json_that_is_not_an_object_is_refused(raw, kind):
    refused(raw, f"not an object (got {kind})")


def nested(depth: int) -> str:
    return '{"action": "MESSAGE", "message": "x", "deep": ' + "[" * depth + "]" * depth + "}"


@pytest.mark.parametrize("raw, reason", [
    # Deeper than 64: refused whether the parser manages it (100) or would run out of stack (100,000).
    (nested(100), "the answer is nested deeper than 64 levels"),
    (nested(100_000), "the answer is nested deeper than 64 levels"),
    ('{"action": "MESSAGE", "message": "x", "n": ' + "1" * 101 + "}", "a number longer than 100 digits"),
    ('{"action": "MESSAGE", "message": "x", "n": 0.' + "1" * 100 + "}", "a number longer than 100 digits"),
    ('{"action": "MESSAGE", "message": "x", "n": NaN}', "holds NaN, which is not JSON"),
    ('{"action": "MESSAGE", "message": "x", "n": Infinity}', "holds Infinity, which is not JSON"),
    ('{"action": "MESSAGE", "message": "x", "n": -1e400}', "holds the number -1e400, beyond the range"),
    ('{"action": "MESSAGE", "message": "x", "\\udc80": 1}', "\\udc80 (the key): holds a lone surrogate"),
    # Found in prose too, and not looked past for another object.
    ('Here: {"n": NaN} {"action": "MESSAGE", "message": "x"}', "holds NaN"),
    ("```json\n" + nested(200) + "\n```", "nested deeper than 64"),
])
def test_what_no_answer_needs_is_refused_with_the_reason(raw, reason):
    refused(raw, reason)


def test_an_answer_at_the_bounds_is_read():
    ok = parse_answer('{"action": "MESSAGE", "message": "x", "n": ' + "1" * 100 + ", \"thought\": \"\\ud83d\\ude00\"}")
    assert ok.extra == {"n": int("1" * 100)} and ok.thought == "\U0001f600"  # a surrogate pair is a character
    assert parse_answer(nested(62)).action == "MESSAGE"  # the object, the list around and 62 lists: 64 levels


# --------------------------------------------------------------------------
# file_changes


def test_the_three_file_change_shapes():
    answer = parse_answer(
        dumps(
            "MESSAGE",
            message="x",
            file_changes=[
                {"path": "src/new.py", "content": "print(1)\n"},
                {"path": "old.txt", "delete": True},
                {"path": "README.md", "old": "Hi", "new": ""},
            ],
        )
    )
    write, delete, replace = answer.file_changes
    assert isinstance(write, WriteFile) and (write.path, write.content) == ("src/new.py", "print(1)\n")
    assert isinstance(delete, DeleteFile) and (delete.path, delete.delete) == ("old.txt", True)
    assert isinstance(replace, ReplaceInFile) and (replace.path, replace.old, replace.new) == ("README.md", "Hi", "")


def test_empty_content_is_a_valid_write():
    (change,) = parse_answer(dumps("MESSAGE", message="x", file_changes=[{"path": "empty.txt", "content": ""}])).file_changes
    assert isinstance(change, WriteFile) and change.content == ""


@pytest.mark.parametrize(
    "change",
    [
        {"path": "a.txt"},
        {"content": "x"},
        {"path": "a.txt", "delete": False},
        {"path": "a.txt", "delete": "true"},
        {"path": "a.txt", "delete": 1},
        {"path": "a.txt", "content": "x", "delete": True},
        {"path": "a.txt", "old": "x"},
        {"path": "a.txt", "new": "x"},
        {"path": "a.txt", "old": "", "new": "y"},
        {"path": "a.txt", "old": "x", "new": "y", "content": "z"},
        {"path": "", "content": "x"},
        {"path": 7, "content": "x"},
        {"path": "a.txt", "content": 5},
        {"path": "a.txt", "content": None},
        "a.txt",
        ["a.txt", "x"],
        None,
    ],
    ids=lambda c: json.dumps(c),
)
def test_malformed_file_changes_are_refused(change):
    refused(dumps("MESSAGE", message="x", file_changes=[{"path": "ok.txt", "content": "fine"}, change]), "file_changes/1")


def test_file_changes_must_be_a_list():
    refused(dumps("MESSAGE", message="x", file_changes={"path": "a", "content": "x"}), "file_changes")


BAD_PATHS = {
    "../outside.txt": "leaves the workspace",
    "a/../../b": "leaves the workspace",
    "a/..": "leaves the workspace",
    "/etc/passwd": "is absolute",
    "//server/share": "is absolute",
    "C:/Windows/x": "is absolute",
    "c:x": "is absolute",
    ".git/config": "inside .git",
    ".git": "inside .git",
    "./.git/hooks/pre-commit": "inside .git",
    # .git in any case, at any depth, as a file name, and its aliases on macOS and Windows.
    ".GIT/hooks/pre-commit": "inside .git",
    ".Git/config": "inside .git",
    "sub/.git/hooks/post-commit": "inside .git",
    "a/b/.gIt": "inside .git",
    "sub/.git": "inside .git",
    ".git./config": "inside .git",
    ".git . ./config": "inside .git",
    ".git::$INDEX_ALLOCATION/config": "inside .git",
    "GIT~1/config": "inside .git",
    "sub/git~2/hooks/x": "inside .git",
    ".g\u200cit/config": "inside .git",
    ".\ufeffgit/hooks/x": "inside .git",
    "a\\..\\..\\b": "backslashes",
    "nul\x00byte": "holds a NUL byte",
    # Past Linux's NAME_MAX (255 bytes a name) and PATH_MAX (4096 bytes), counted in UTF-8.
    "a" * 256: "has a name of 256 bytes; a name may have at most 255",
    "d/" + "\u00e9" * 128: "has a name of 256 bytes",
    "/".join(["\u00e9" * 120] * 18): "has 4,337 bytes; a path may have at most 4096",
    "a\ud800b": "holds a lone surrogate",
    ".": "names the workspace itself",
    "./": "names the workspace itself",
}


@pytest.mark.parametrize("path, reason", sorted(BAD_PATHS.items()))
def test_bad_file_change_paths_are_refused(path, reason):
    refused(dumps("MESSAGE", message="x", file_changes=[{"path": path, "content": "x"}]), reason)
    refused(dumps("MESSAGE", message="x", file_changes=[{"path": path, "delete": True}]), reason)
    refused(dumps("MESSAGE", message="x", file_changes=[{"path": path, "old": "a", "new": "b"}]), reason)


@pytest.mark.parametrize("path, reason", sorted(BAD_PATHS.items()))
def test_bad_evidence_paths_are_refused(path, reason):
    refused(dumps("COMPLETED", evidence_files=["ok.txt", path], summary_for_supervisor="done"), reason)


def test_paths_are_normalised():
    answer = parse_answer(
        dumps(
            "COMPLETED",
            evidence_files=["./hello.py", "docs//notes.md", "a/./b/"],
            summary_for_supervisor="done",
            file_changes=[{"path": "./src/./x.py", "content": ""}],
        )
    )
    assert answer.evidence_files == ["hello.py", "docs/notes.md", "a/b"]
    assert answer.file_changes[0].path == "src/x.py"


@pytest.mark.parametrize("path", [".gitignore", ".github/workflows/ci.yml", "a/.git-notes", "...", ".gitx", "git",
                                  "a/git~x", "git~1x", "x.git", "a b/c d.txt", "日本/語.txt"])
def test_ordinary_paths_are_accepted(path):
    assert check_relative_path(path) == path


def test_evidence_files_must_be_strings():
    refused(dumps("COMPLETED", evidence_files=[1], summary_for_supervisor="done"), "evidence_files")
    refused(dumps("COMPLETED", evidence_files="hello.py", summary_for_supervisor="done"), "evidence_files")


@pytest.mark.parametrize("value", ["1e300", "9.3e18"])
def test_huge_integral_float_plan_step_gives_invalid_answer_not_a_crash(value):
    raw = '{"action": "CMD", "command": "ls", "current_plan_step": ' + value + "}"
    try:
        parse_answer(raw)
    except InvalidAnswer:
        pass


# --------------------------------------------------------------------------
# The one definition: the action table, the prompt text, the example, answer()


def test_exit_actions_and_the_action_list_come_from_the_table():
    assert ACTIONS == tuple(ACTION_RULES)
    assert EXIT_ACTIONS == tuple(name for name, rule in ACTION_RULES.items() if rule.exit)
    assert set(Answer.model_fields["action"].annotation.__args__) == set(ACTIONS)
    for name, rule in ACTION_RULES.items():
        assert set(rule.required) == set(REQUIRED[name]), name
        assert set(rule.required + rule.optional) <= set(Answer.model_fields), name


def test_every_field_has_a_description():
    for model in (Answer, WriteFile, ReplaceInFile, DeleteFile):
        assert model.__doc__, model
        for name, info in model.model_fields.items():
            assert info.description, f"{model.__name__}.{name}"


@pytest.mark.parametrize("action, missing", [(a, n) for a in sorted(REQUIRED) for n in sorted(REQUIRED[a])])
def test_the_model_itself_requires_the_fields_of_its_action(action, missing):
    fields = {k: v for k, v in REQUIRED[action].items() if k != missing}
    with pytest.raises(ValidationError, match=f"'{missing}' is a required property for action {action}"):
        Answer(action=action, **fields)
    assert Answer(action=action, **REQUIRED[action]).action == action


def test_null_reads_as_an_absent_field():
    # Many models send every field, null where unused: that is a field not used.
    assert parse_answer(dumps("CMD", command="ls", question=None, plan=None)).command == "ls"
    refused(dumps("COMPLETED", evidence_files=[], summary_for_supervisor=None), "'summary_for_supervisor' is a required")
    with pytest.raises(ValidationError):
        Answer(action="CMD", command=None)


def test_the_example_answer_has_the_protocols_shape_and_cannot_be_copied():
    text = answer_json(EXAMPLE_ANSWER)
    assert Answer.model_validate(json.loads(text), strict=True) == EXAMPLE_ANSWER  # the schema's shape
    assert "):\n" + text in protocol_text()
    # No path or summary a real job could take for its own: a copy of it is refused, with the reason.
    refused(text, "protocol example's placeholder")
    refused(dumps("COMPLETED", evidence_files=[], summary_for_supervisor=PLACEHOLDER_SUMMARY.lower()),
            "protocol example's placeholder")
    assert "hello" not in protocol_text() and "dir/file.py" not in protocol_text()


@pytest.mark.parametrize("texts, named", [
    (["Write hello.py that prints hello"], "hello.py"),
    (["Fix the loop in `src/app.js`, e.g. its bound."], "src/app.js"),
    (["Write fizzbuzz.py."], "fizzbuzz.py"),
    (["Use version 1.5, not v2.0", "", "then edit ./notes.md"], "notes.md"),
    (["See https://example.com/page.html for how"], None),
    (["Write a README"], None),
    (["Leave ../secret.txt alone and write out.txt"], "out.txt"),
])
def test_the_path_a_job_names(texts, named):
    assert named_path(*texts) == named


def test_a_job_that_names_a_file_gets_an_example_writing_it_with_nothing_to_copy():
    text = protocol_text(path="hello.py")
    assert ('{"action": "COMPLETED", "file_changes": [{"path": "hello.py", "content": ...}], "evidence_files": '
            '["hello.py"], "summary_for_supervisor": ...}') in text
    for placeholder in (PLACEHOLDER_CONTENT, PLACEHOLDER_SUMMARY):
        assert placeholder not in text
    # The file change forms keep the placeholder path (a copied deletion form must not name the job's file).
    assert '- {"path": "RELATIVE/PATH", "delete": true} to delete a file' in text and '"hello.py", "delete"' not in text
    assert protocol_text() != text and PLACEHOLDER_PATH in protocol_text().rsplit("\n\n", 1)[1]
    # The placeholder content of the example without a path is refused like its path and summary.
    refused(dumps("COMPLETED", evidence_files=[], summary_for_supervisor="Wrote it.",
                  file_changes=[{"path": "hello.py", "content": PLACEHOLDER_CONTENT}]),
            "content of hello.py is the protocol example's placeholder")
    # So are the ... of the example with a path, quoted.
    refused(dumps("COMPLETED", evidence_files=[], summary_for_supervisor="Wrote it.",
                  file_changes=[{"path": "hello.py", "content": "..."}]), "content of hello.py is the protocol example")
    refused(dumps("COMPLETED", evidence_files=["hello.py"], summary_for_supervisor=" ... "),
            "summary_for_supervisor is the protocol example's placeholder")


def test_file_changes_are_bounded_and_each_file_changed_once():
    write = {"path": "a.py", "content": "x"}
    refused(dumps("COMPLETED", evidence_files=[], summary_for_supervisor="s", file_changes=[write, write]),
            "the same change to a.py is given twice")
    refused(dumps("COMPLETED", evidence_files=[], summary_for_supervisor="s",
                  file_changes=[write, {"path": "a.py", "delete": True}]), "a.py is written or deleted twice")
    two_edits = [{"path": "a.py", "old": "x", "new": "y"}, {"path": "a.py", "old": "z", "new": "w"}]
    assert len(parse_answer(dumps("MESSAGE", message="m", file_changes=two_edits)).file_changes) == 2
    many = [{"path": f"f{i}.py", "content": ""} for i in range(FILE_CHANGES_MAX + 1)]
    refused(dumps("MESSAGE", message="m", file_changes=many), "file_changes")
    assert len(parse_answer(dumps("MESSAGE", message="m", file_changes=many[:-1])).file_changes) == FILE_CHANGES_MAX
    assert response_schema()["properties"]["file_changes"]["maxItems"] == FILE_CHANGES_MAX


def test_a_raw_newline_or_tab_in_a_string_is_read_and_noted():
    raw = '{"action": "MESSAGE", "message": "first line' + "\n" + 'second' + "\t" + 'column"}'
    answer = parse_answer(raw)
    assert answer.message == "first line\nsecond\tcolumn"
    assert any("raw newline or tab" in note for note in answer.notes)
    fenced = parse_answer("```json\n" + raw + "\n```")
    assert fenced.message == answer.message and any("raw newline" in n for n in fenced.notes)
    assert parse_answer('{"action": "MESSAGE", "message": "one line"}').notes == []


def test_protocol_text_states_each_action_with_its_required_fields():
    text = protocol_text()
    lines = {line.split('"')[1]: line for line in text.splitlines() if line.startswith('- "')}
    assert list(lines) == list(ACTIONS)
    for name, rule in ACTION_RULES.items():
        assert rule.meaning in lines[name]
        required = lines[name].split("Required: ", 1)[1]
        for field in rule.required:
            assert f'"{field}"' in required, (name, field)
    # Each field is explained once, where it first appears.
    for field in ("evidence_files", "summary_for_supervisor", "command", "question", "required", "message"):
        assert text.count(f'"{field}" ({Answer.model_fields[field].description})') == 1, field
    assert PATH_RULE in text


@pytest.mark.parametrize("model", [WriteFile, ReplaceInFile, DeleteFile])
def test_each_file_change_form_of_the_prompt_is_valid(model):
    (example,) = model.model_config["json_schema_extra"]["examples"]
    assert json.dumps(example) in protocol_text()
    assert type(model.model_validate(example, strict=True)) is model  # the form's shape is the model's
    # Its path is a placeholder no job has: a copy is refused with the reason; the same form with a real path is read.
    refused(dumps("MESSAGE", message="x", file_changes=[example]), "protocol example's placeholder")
    real = {**example, "path": "src/a.py"}
    if model is WriteFile:  # its content, "...", is a placeholder too
        refused(dumps("MESSAGE", message="x", file_changes=[real]), "content of src/a.py is the protocol example's")
        real["content"] = "x = 1\n"
    (change,) = parse_answer(dumps("MESSAGE", message="x", file_changes=[real])).file_changes
    assert type(change) is model


def test_the_prompt_uses_the_generated_protocol_text():
    from logist.engine.prompt import system_prompt
    from logist.store.roles import RoleManifest

    role = RoleManifest(name="Worker", description="does the work", instructions="Do it.", llm_model="m")
    assert protocol_text() in system_prompt(role, None)
    assert system_prompt(role, None).endswith(protocol_text() + "\n\n--- Role: Worker ---\nDo it.")


def test_answer_helper_builds_valid_answers_in_the_callers_order():
    raw = answer("MESSAGE", message="hi", file_changes=[{"path": "a.txt", "old": "x", "new": "y"}])
    assert list(json.loads(raw)) == ["action", "message", "file_changes"]
    assert parse_answer(raw).file_changes == [ReplaceInFile(path="a.txt", old="x", new="y")]
    assert json.loads(answer("STUCK", "Need a key.")) == {
        "action": "STUCK", "evidence_files": [], "summary_for_supervisor": "Need a key.",
    }


@pytest.mark.parametrize(
    "args, fields, match",
    [
        (("CMD",), {}, "'command' is a required property"),
        (("MESSAGE",), {"message": "x", "file_changes": [{"path": "a", "delete": False}]}, "file_changes"),
        (("COMPLETED", "x" * 1001), {}, "summary_for_supervisor"),
        (("LAUNCH",), {}, "action"),
        (("MESSAGE",), {"message": "x", "confidence": 0.9}, "confidence"),
    ],
)
def test_answer_helper_refuses_what_the_protocol_refuses(args, fields, match):
    with pytest.raises(ValueError, match=match):
        answer(*args, **fields)


def test_the_protocol_module_is_pure():
    import logist.protocol.answer

    # The package under test, wherever the test runs from. Its __init__ (the
    # library's front door, which imports the whole core) is left out: what
    # is measured is what the protocol module itself needs.
    root = str(PurePosixPath(logist.protocol.answer.__file__).parent.parent.parent)
    code = (
        f"import sys, types; package = types.ModuleType('logist'); package.__path__ = [{root + '/logist'!r}]; "
        "sys.modules['logist'] = package; "
        "import logist.protocol.answer as p; p.parse_answer('{\"action\": \"MESSAGE\", \"message\": \"x\"}'); "
        "print(sorted(m for m in sys.modules if m.startswith('logist')))"
    )
    env = dict(os.environ, PYTHONPATH=root)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout
    assert json.loads(out.replace("'", '"')) == [
        "logist", "logist.errors", "logist.protocol", "logist.protocol.actions", "logist.protocol.answer",
        "logist.protocol.file_changes", "logist.protocol.forms", "logist.protocol.paths"]


# --------------------------------------------------------------------------
# Properties

json_leaves = st.none() | st.booleans() | st.integers() | st.floats() | st.text()
json_values = st.recursive(
    json_leaves,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=10), children, max_size=5),
    max_leaves=25,
)

FIELDS = [
    "action", "evidence_files", "summary_for_supervisor", "command", "question", "required", "message",
    "file_changes", "thought", "plan", "current_plan_step", "send_to",
]

# Floats in the schema-aware strategy stay below 2**63: larger integral floats
# hit the known bug covered by test_huge_integral_float_plan_step_gives_invalid_answer_not_a_crash.
bounded_leaves = (
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(min_value=-1e18, max_value=1e18) | st.sampled_from([math.nan, math.inf, -math.inf])
    | st.text(max_size=20) | st.sampled_from(["", "a.txt", "../x", ".git/config", "/abs", "x" * 1001])
)
bounded_values = st.recursive(
    bounded_leaves,
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.sampled_from(["path", "content", "delete", "old", "new", "x"]), children, max_size=4),
    max_leaves=15,
)
schema_shaped = st.fixed_dictionaries(
    {"action": st.sampled_from(list(ACTIONS) + ["NOPE"])},
    optional={name: bounded_values for name in FIELDS[1:] + ["extra"]},
)


def never_raises_but_invalid(raw) -> None:
    try:
        answer = parse_answer(raw)
    except InvalidAnswer as exc:
        assert str(exc)
    else:
        assert isinstance(answer, Answer)


@given(st.text())
def test_arbitrary_text_only_ever_raises_invalid_answer(raw):
    never_raises_but_invalid(raw)


@given(json_values)
def test_arbitrary_json_only_ever_raises_invalid_answer(value):
    never_raises_but_invalid(json.dumps(value))


@settings(max_examples=300)
@given(schema_shaped)
def test_schema_shaped_json_only_ever_raises_invalid_answer(value):
    never_raises_but_invalid(json.dumps(value))


@given(json_values, st.sampled_from(["```json\n{}\n```", "```\n{}\n```", "x{}", "{}x"]))
def test_arbitrary_json_in_fences_and_prose_only_ever_raises_invalid_answer(value, template):
    never_raises_but_invalid(template.replace("{}", json.dumps(value), 1))


# A valid answer, built to round-trip exactly (paths are already normal).
segment = st.text(alphabet=string.ascii_letters + string.digits + "_-. ", min_size=1, max_size=8).filter(
    lambda s: s not in (".", "..")
)
paths = st.lists(segment, min_size=1, max_size=4).filter(lambda parts: not any(is_git_name(p) for p in parts)).map("/".join)
text1 = st.text(min_size=1, max_size=50)
#: A command a shell can be given: no NUL byte, and UTF-8 (no lone surrogate, which the protocol refuses).
command_text = st.text(st.characters(exclude_characters="\x00", exclude_categories=("Cs",)), min_size=1, max_size=50)
file_change = st.one_of(
    st.fixed_dictionaries({"path": paths, "content": st.text(max_size=50)}),
    st.fixed_dictionaries({"path": paths, "delete": st.just(True)}),
    st.fixed_dictionaries({"path": paths, "old": text1, "new": st.text(max_size=50)}),
)
OPTIONAL = {
    # One change per file (the answer check refuses a file written twice, or the same change repeated).
    "file_changes": st.lists(file_change, max_size=4, unique_by=lambda change: change["path"]),
    "thought": st.text(max_size=50),
    "plan": st.lists(text1, max_size=4),
    "current_plan_step": st.integers(min_value=0, max_value=100_000),
    "send_to": text1,
}


@st.composite
def valid_answers(draw):
    action = draw(st.sampled_from(ACTIONS))
    data = {"action": action}
    if action in EXIT_ACTIONS:
        data["evidence_files"] = draw(st.lists(paths, max_size=4))
        data["summary_for_supervisor"] = draw(st.text(min_size=1, max_size=1000))
    elif action == "CMD":
        data["command"] = draw(command_text)
    elif action == "ASK":
        data["question"] = draw(text1)
        if draw(st.booleans()):
            data["required"] = draw(st.booleans())
    else:
        data["message"] = draw(st.text(max_size=50))
    for name in draw(st.lists(st.sampled_from(sorted(OPTIONAL)), unique=True)):
        data[name] = draw(OPTIONAL[name])
    return data


SHAPES = {"content": WriteFile, "delete": DeleteFile, "old": ReplaceInFile}


@given(valid_answers(), st.booleans(), st.sampled_from([None, 2]), st.sampled_from(["", "```json\n", "```JSON\n", "```\n"]))
def test_valid_answers_round_trip(data, ascii_only, indent, fence):
    raw = json.dumps(data, ensure_ascii=ascii_only, indent=indent)
    if fence:
        raw = f"{fence}{raw}\n```"
    answer = parse_answer(raw)
    assert answer.action == data["action"]
    for name, value in data.items():
        if name == "file_changes":
            assert [c.model_dump() for c in answer.file_changes] == value
            for change, sent in zip(answer.file_changes, value):
                shape = next(k for k in SHAPES if k in sent)
                assert type(change) is SHAPES[shape]
        else:
            assert getattr(answer, name) == value, name
    for name in set(FIELDS) - set(data):
        default = Answer.model_fields[name].default
        assert getattr(answer, name) == default, name


path_like = st.lists(
    st.sampled_from(["a", "b c", "..", ".", "", ".git", ".GIT", ".git.", "GIT~1", ".gitx", "\\", "C:", "~", "\x00", "é"]), max_size=6
).map("/".join) | st.text()


@given(st.one_of(st.text(), path_like))
def test_check_relative_path_refuses_or_returns_a_safe_path(path):
    try:
        result = check_relative_path(path)
    except InvalidAnswer as exc:
        assert str(exc)
        return
    assert result and not os.path.isabs(result) and not PurePosixPath(result).is_absolute()
    parts = result.split("/")
    assert ".." not in parts and "." not in parts and "" not in parts
    assert not any(is_git_name(part) for part in parts)
    assert "\\" not in result and "\x00" not in result
    root = "/srv/workspace"
    joined = os.path.normpath(os.path.join(root, result))
    assert joined.startswith(root + os.sep)
    assert os.path.normpath(os.path.join(root, path)) == joined, "the normal form names the same file"


DRIVE = re.compile(r"^[A-Za-z]:")


@given(st.one_of(st.text(), path_like))
def test_normalising_is_idempotent(path):
    try:
        result = check_relative_path(path)
    except InvalidAnswer:
        return
    # A normal form starting with a drive letter is the known bug of
    # test_drive_letter_behind_dot_segment_is_refused.
    assume(not DRIVE.match(result))
    assert check_relative_path(result) == result


@pytest.mark.parametrize("path", ["./C:/Windows/x", ".//c:x"])
def test_drive_letter_behind_dot_segment_is_refused(path):
    with pytest.raises(InvalidAnswer, match="is absolute"):
        check_relative_path(path)


def test_a_valid_answer_is_taken_without_jsonschema_and_a_refusal_quotes_the_schema():
    """The model in strict mode takes what the schema takes (the verdicts
    agree: tests/test_schemas.py), so an answer in the protocol's shape needs
    no jsonschema (imported only to word a refusal)."""
    import subprocess
    import sys

    probe = ("import sys\nfrom logist.protocol.answer import validate_answer, InvalidAnswer\n"
             "validate_answer({'action': 'MESSAGE', 'message': 'x', 'current_plan_step': 2,\n"
             "                 'file_changes': [{'path': 'a.txt', 'delete': True}, {'path': 'b', 'content': ''}]})\n"
             "print('jsonschema' in sys.modules)\n"
             "try:\n    validate_answer({'action': 'MESSAGE', 'message': 'x', 'file_changes': [{'path': 'a', 'delete': 1}]})\n"
             "except InvalidAnswer as exc:\n    print(exc)\n"
             "print('jsonschema' in sys.modules)\n")
    seen = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.splitlines()
    assert seen[0] == "False" and seen[2] == "True"
    assert seen[1].startswith("schema violation: file_changes/0: a file change is ")
