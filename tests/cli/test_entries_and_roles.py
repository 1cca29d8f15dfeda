"""Naming entries and who acted: one option, ``--entry
N``, names a history entry in ``job history``, ``job diff`` and ``job
restep`` (the old ``--step`` and ``--to`` still work for a release, with a
notice); the history's role column shows ``person`` for a person's
commands. The real ``logist`` program, run in this process (``logist_cli``)."""

from __future__ import annotations

import json

from conftest import logist_cli
from logist.engine.create import create_job
from logist.engine.step import post_answer
from logist.replay.scripted import answer

ASK = json.dumps({"action": "ASK", "question": "Which colour?", "required": True})
ONE = answer("MESSAGE", message="one", file_changes=[{"path": "a.txt", "content": "a\n"}])
TWO = answer("MESSAGE", message="two", file_changes=[{"path": "b.txt", "content": "b\n"}])


def ok(result, code: int = 0):
    assert result.returncode == code, f"exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    return result


def test_one_option_names_an_entry_and_the_old_names_say_so(jobs):
    job = create_job(jobs, "e", "Write two files")
    post_answer(job, ONE)
    post_answer(job, TWO)
    for command in (["job", "history", "e"], ["job", "diff", "e"], ["job", "restep", "e"]):
        text = ok(logist_cli(*command, "--help")).stdout
        assert "--entry N" in text and "--step" not in text and "--to" not in text

    shown = ok(logist_cli("job", "history", "e", "--entry", "3"))
    assert shown.stdout.startswith("Entry 3: llm_call") or shown.stdout.startswith("Entry 3: poststep")
    diff = ok(logist_cli("job", "diff", "e", "--entry", "3"))
    assert "+b" in diff.stdout and "a.txt" not in diff.stdout and diff.stderr == ""

    old = ok(logist_cli("job", "diff", "e", "--step", "3"))
    assert old.stdout == diff.stdout
    assert old.stderr.strip().splitlines() == ["logist: --step is now --entry; --step goes away in the next release"]
    both = ok(logist_cli("job", "diff", "e", "--step", "3", "--entry", "3"), code=2)
    assert "give --entry once" in both.stderr

    rewound = ok(logist_cli("job", "restep", "e", "--to", "2"))
    assert "logist: --to is now --entry" in rewound.stderr
    assert job.manifest().last_sequence == 4 and not (job.workspace / "b.txt").exists()
    ok(logist_cli("job", "restep", "e", "--entry", "1"))
    assert not (job.workspace / "a.txt").exists()


def test_the_role_column_shows_person_for_a_persons_commands(jobs):
    job = create_job(jobs, "p", "Pick a colour")
    post_answer(job, ASK)  # the Worker asks
    ok(logist_cli("job", "answer", "p", "blue"))
    post_answer(job, answer("COMPLETED", "Chose blue."))  # the Worker
    post_answer(job, answer("COMPLETED", "Looks right."))  # the Supervisor: APPROVAL_REQUIRED
    ok(logist_cli("job", "reject", "p", "--feedback", "Make it green"))
    ok(logist_cli("job", "restep", "p"))

    table = ok(logist_cli("job", "history", "p", env={"COLUMNS": "300"})).stdout.splitlines()
    assert table[0].split()[3] == "role"
    rows = [line.split()[2:4] for line in table[1:]]
    assert rows == [["person", "create"], ["Worker", "ASK"], ["person", "answer"], ["Worker", "COMPLETED"],
                    ["Supervisor", "COMPLETED"], ["person", "reject"], ["person", "rewind"]]
    entry = ok(logist_cli("job", "history", "p", "--entry", "6")).stdout
    assert entry.startswith("Entry 6: user_action, APPROVAL_REQUIRED -> PENDING, person, ")
