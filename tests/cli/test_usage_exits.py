"""Exit codes as the table in ``logist/cli/app.py`` states them: what a
person typed wrong exits 2 (usage), in one line, changing nothing; a
SUSPENDED job exits 3 like the other states that wait for a person. The real ``logist`` program in this process (``logist_cli``): its
exit status is the one a process of its own exits with."""

from __future__ import annotations

import pytest

from conftest import logist_cli
from logist.cli.app import EXIT_CODES, EXIT_NEEDS_PERSON, EXIT_USAGE
from logist.engine.create import create_job
from logist.engine.decide import user_action
from logist.engine.step import post_answer
from logist.replay.scripted import answer

#: case -> (arguments, what the one line says)
USAGE = {
    "empty objective": (["job", "create", "e", "-o", ""], "a job needs an objective"),
    "blank objective": (["job", "create", "e", "-o", "   "], "a job needs an objective"),
    "no objective": (["job", "create", "e"], "a job needs an objective"),
    "invalid job id": (["job", "create", "bad id!", "-o", "x"], "invalid job id 'bad id!'"),
    "invalid job id, status": (["job", "status", "a..b"], "invalid job id 'a..b'"),
    "no such job": (["job", "status", "nosuch"], "no job 'nosuch'"),
    "no such job, step": (["job", "step", "nosuch"], "no job 'nosuch'"),
    "no such entry, history": (["job", "history", "j", "--entry", "9"], "has no history entry 9"),
    "no such entry, diff": (["job", "diff", "j", "--entry", "9"], "has no history entry 9"),
    "no such entry, restep": (["job", "restep", "j", "--entry", "9"], "has no history entry 9"),
    "no such file": (["job", "create", "f", "-o", "x", "--file", "nosuch.txt"], "--file nosuch.txt: no such file"),
    "no such role": (["job", "create", "r", "-o", "x", "--worker", "Nobody"], "'Nobody' is not defined"),
    "no such skill": (["job", "create", "s", "--skill", "nosuch"], "no skill named 'nosuch'"),
    "param without skill": (["job", "create", "p", "-o", "x", "--param", "a=b"], "--param goes with --skill"),
    "no source repository": (["job", "export", "j", "--branch", "b"], "was not created with --from-repo"),
    "no such template": (["prompts", "show", "nosuch"], "no prompt template named 'nosuch'"),
}


@pytest.mark.parametrize("case", list(USAGE))
def test_what_a_person_typed_wrong_exits_2_in_one_line(jobs, case):
    create_job(jobs, "j", "Say hi")
    args, says = USAGE[case]
    before = sorted(p.name for p in jobs.path.iterdir())
    result = logist_cli(*args)
    assert result.returncode == EXIT_USAGE, f"exit {result.returncode}: {result.stderr}"
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and says in lines[0], result.stderr
    assert result.stdout == ""
    assert sorted(p.name for p in jobs.path.iterdir()) == before


@pytest.mark.parametrize("command", [["job", "step", "s"], ["job", "run", "s"],
                                     ["job", "poststep", "s", "--response-string", answer("MESSAGE", message="hi")]])
def test_a_suspended_job_exits_3_like_the_other_waiting_states(jobs, llm, command):
    job = create_job(jobs, "s", "Say hi")
    post_answer(job, answer("MESSAGE", message="one"))
    user_action(job, "suspend")
    result = logist_cli(*command, *(["--base-url", llm.base_url] if command[1] != "poststep" else []))
    assert result.returncode == EXIT_NEEDS_PERSON, result.stderr
    assert result.stderr.strip().splitlines() == ["Job 's' is SUSPENDED: resume it (logist job resume)."]
    assert llm.requests == []
    assert str(job.manifest().status) == "SUSPENDED"
    assert "SUSPENDED" in dict(EXIT_CODES)[EXIT_NEEDS_PERSON]
    help_text = logist_cli("--help").stdout
    assert "SUSPENDED" in help_text[help_text.index("Exit codes"):]
