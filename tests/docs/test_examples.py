"""Every runnable example of README.md and docs/**/*.md runs as the page shows it.

The contract (which blocks run, how, what is compared) is in
tests/docs/runnable.py's docstring. This file declares what the model answers
for each example NAME (:data:`MODELS`) and runs each page's examples: a shell
example's commands against a real scripted or replaying OpenAI-compatible
server on 127.0.0.1, the real ``logist`` program in a real bash, in a fresh
directory; a config or role example validated against its schema. An example
NAME this file does not know fails, and so does a README without a ``tour``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from logist.replay.scripted import answer

from conftest import REPO_ROOT
from runnable import SCHEMAS, Example, Model, Scripted, matches, parse, run_example, validate_json

#: The pages whose examples run.
PAGES = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").rglob("*.md"))]
#: The ``logist`` a command runs: this interpreter's (the test venv's bin).
BIN = Path(sys.executable).parent

#: What the model answers for each example NAME, call by call.
MODELS: dict[str, Model] = {
    # job create, preview, step --oneshot (the Worker asks which greeting),
    # answer, step (the Worker writes hello.py: COMPLETED), run (the Supervisor
    # approves: APPROVAL_REQUIRED, exit 3), status, approve.
    "tour": Scripted(tuple(json.dumps(a) for a in (
        {"action": "ASK", "question": "Which greeting should hello.py print?",
         "summary_for_supervisor": "Asked which greeting."},
        {"action": "COMPLETED", "summary_for_supervisor": "Wrote hello.py; it prints Hello, world.",
         "evidence_files": ["hello.py"], "file_changes": [{"path": "hello.py", "content": "print('Hello, world')\n"}]},
        {"action": "COMPLETED", "summary_for_supervisor": "hello.py prints Hello, world, as asked.",
         "evidence_files": ["hello.py"]},
    ))),
    # job create, then job run (exit 3: APPROVAL_REQUIRED) and what the exit code leads to.
    "exit-codes": Scripted((
        answer("COMPLETED", "Wrote hello.py.", ["hello.py"],
               file_changes=[{"path": "hello.py", "content": "print('Hello')\n"}]),
        answer("COMPLETED", "It prints Hello.", ["hello.py"]),
    )),
    # logist demo (its own replay server) and job replay: no call reaches the model.
    "replay": Scripted(()),
}


def _examples() -> tuple[list[Example], list[str]]:
    examples: list[Example] = []
    problems: list[str] = []
    for page in PAGES:
        found, wrong = parse(page)
        examples += found
        problems += wrong
    return examples, problems


EXAMPLES, MARKER_PROBLEMS = _examples()


def test_every_marker_is_right_before_its_fence():
    assert not MARKER_PROBLEMS, "\n".join(MARKER_PROBLEMS)


def test_the_readme_has_the_tour():
    assert any(e.path == REPO_ROOT / "README.md" and e.name == "tour" and e.commands for e in EXAMPLES), \
        "README.md has no runnable tour: <!-- example: tour --> right before a ```console block of $ commands"


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda e: e.id)
def test_example(example: Example, tmp_path):
    if example.name in SCHEMAS:
        problems = validate_json(example, REPO_ROOT / "schemas")
    else:
        assert example.name in MODELS, (
            f"{example.id} (line {example.line}): tests/docs/test_examples.py declares no model for example "
            f"{example.name!r}; MODELS knows {sorted(MODELS)}")
        assert example.commands, f"{example.id} (line {example.line}): the example has no $ command"
        problems = run_example(example, MODELS[example.name], tmp_path, BIN)
    assert not problems, "\n\n".join(problems)


# -- the runner can fail -------------------------------------------------------

_BROKEN_PAGE = """\
# A page with a broken example

<!-- example: quickstart -->
```console
$ logist job create hello --objective "Write hello.py that prints a greeting"
...
$ logist job run
#2 Worker COMPLETED -> REVIEWING [hello.py]  Wrote hello.py; python hello.py prints Hello.
...
$ logist job status
Job:     hello
Status:  SUCCESS
...
$ logist job approve --no-such-option
```

<!-- example: config -->
```json
{"request_timeout": "soon", "modles": {}}
```
"""


#: hello.py, written by the Worker and approved by the Supervisor in one turn each.
_HELLO_IN_ONE_TURN = Scripted((
    answer("COMPLETED", "Wrote hello.py; python hello.py prints Hello.", ["hello.py"],
           file_changes=[{"path": "hello.py", "content": "print('Hello')\n"}]),
    answer("COMPLETED", "hello.py prints Hello, as asked.", ["hello.py"]),
))


def test_the_runner_reports_a_wrong_output_and_a_failing_command(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(_BROKEN_PAGE, encoding="utf-8")
    (quickstart, config), problems = parse(page)
    assert problems == []
    assert [c.line for c in quickstart.commands] == [5, 7, 10, 14]
    found = run_example(quickstart, _HELLO_IN_ONE_TURN, tmp_path, BIN)
    text = "\n\n".join(found)
    assert len(found) == 2, text
    wrong_output, failed = found
    # The status line differs: the page's file:line, the command, the diff.
    assert wrong_output.startswith(f"{page}:10: `logist job status` printed other output than the page shows")
    assert "-Status:  SUCCESS\n+Status:  APPROVAL_REQUIRED" in wrong_output
    # The usage error: exit 2, and what it printed.
    assert failed.startswith(f"{page}:14: `logist job approve --no-such-option` failed (exit 2); it printed:")
    assert failed.endswith("\n    | Error: No such option '--no-such-option'. (see 'logist job approve --help')")
    # The config example: each field the schema refuses, named.
    refused = validate_json(config, REPO_ROOT / "schemas")
    assert [p.split(" at ", 1)[1].split(":", 1)[0] for p in refused] == ["(the top level)", "request_timeout"], refused
    assert all(p.startswith(f"{page}:19: the config example does not match schemas/config.schema.json") for p in refused)


def test_the_runner_reports_a_script_the_commands_did_not_use(tmp_path):
    page = tmp_path / "page.md"
    page.write_text('<!-- example: tour -->\n```console\n$ logist job create hello -o "Say hello"\n```\n', encoding="utf-8")
    (tour,), _ = parse(page)
    found = run_example(tour, MODELS["tour"], tmp_path, BIN)
    assert found == [f"{page}:1: example 'tour': the test scripts 3 model answers for it, and its commands asked "
                     "for 0 (the page's commands and the test's script disagree)"]


def test_a_marker_away_from_its_fence_is_named(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("<!-- example: tour -->\n\n```console\n$ true\n```\n<!-- example: config -->\n```console\n```\n",
                    encoding="utf-8")
    examples, problems = parse(page)
    assert examples == []
    assert problems == [
        f"{page}:1: <!-- example: tour --> must be the line right before a ```console fence; the next line is ''",
        f"{page}:6: <!-- example: config --> must be the line right before a ```json fence; the next line is '```console'",
    ]


def test_a_marker_shown_inside_another_block_is_text(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("How to mark one:\n\n````markdown\n<!-- example: tour -->\n```console\n$ false\n```\n````\n\n"
                    "<!-- example: replay -->\n```console\n$ true\n```\n", encoding="utf-8")
    examples, problems = parse(page)
    assert problems == []
    assert [(e.name, [c.text for c in e.commands]) for e in examples] == [("replay", ["true"])]


@pytest.mark.parametrize(("expected", "got", "same"), [
    (["a", "...", "d"], ["a", "b", "c", "d"], True),
    (["a", "...", "d"], ["a", "d"], True),
    (["...", "c"], ["a", "b", "c"], True),
    (["a", "..."], ["a"], True),
    (["a", "...", "d"], ["a", "b", "c"], False),
    (["a", "b"], ["a", "b", "c"], False),
    (["a", "c"], ["a", "b", "c"], False),
])
def test_an_ellipsis_line_stands_for_any_lines(expected, got, same):
    assert matches(expected, got) is same
