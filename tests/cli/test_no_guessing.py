"""The command line never makes a person guess (issue 32, point 6): why a
command was held, a line while a model's command runs, the output of a
command approve-command ran, what Ctrl-C kept and how to go on, and the
real cause of INTERVENTION_REQUIRED. Each on a real ``logist`` process
against the suite's scripted server; a pseudo-terminal where the point is
what a terminal shows."""

from __future__ import annotations

import json

from logist.engine.create import create_job
from logist.engine.step import post_answer
from logist.replay.scripted import answer

from conftest import logist_process

# -- why a command was held ----------------------------------------------------------------------

PIPED = "echo piped 2>&1 | tail -n 1"


def test_a_command_with_shell_operators_is_held_and_the_rule_is_named(jobs, llm):
    """``--allow 'echo*'`` does not let ``echo piped 2>&1 | tail -n 1`` run:
    every place that shows the held command says which rule held it."""
    job = create_job(jobs, "held", "Run it", allowed_commands=["echo*"])
    llm.add(answer("CMD", command=PIPED))
    step = logist_process("job", "step", "held", "--oneshot", "--base-url", llm.base_url)
    assert step.returncode == 3, step.stderr
    rule = ("it holds shell operators ('>', '&', '|'): a command with a shell operator runs without asking only "
            "when an --allow pattern is that exact command ('echo*' would match it otherwise)")
    assert f"Job 'held' is INPUT_REQUIRED: its command is held because {rule}; decide on its held command" \
        in step.stderr, step.stderr
    assert job.manifest().pending_command == PIPED

    status = logist_process("job", "status", "held")
    assert f"Held:    because {rule}" in status.stdout.splitlines(), status.stdout
    assert json.loads(logist_process("job", "status", "held", "--json").stdout)["held_because"] == rule
    assert f"Held because: {rule}" in logist_process("job", "show", "held").stdout

    # --json of the step says it too.
    again = create_job(jobs, "held2", "Run it", allowed_commands=["echo*"])
    llm.add(answer("CMD", command=PIPED))
    as_json = logist_process("job", "step", "held2", "--oneshot", "--json", "--base-url", llm.base_url)
    assert as_json.returncode == 3 and json.loads(as_json.stdout)[-1]["held_because"] == rule
    assert again.manifest().pending_command == PIPED


def test_an_exact_pattern_lets_a_command_with_shell_operators_run(jobs, llm):
    """The way to allow such a command on purpose: a pattern that is that exact command."""
    job = create_job(jobs, "exact", "Run it", allowed_commands=["echo*", PIPED])
    llm.add(answer("CMD", command=PIPED), answer("MESSAGE", message="ok"))
    step = logist_process("job", "step", "exact", "--oneshot", "--base-url", llm.base_url)
    assert step.returncode == 0, step.stderr
    assert job.manifest().pending_command is None
    assert "   | piped" in step.stderr.splitlines(), step.stderr


def test_the_policy_ask_and_a_pattern_that_does_not_match_are_named(jobs, llm):
    create_job(jobs, "ask", "Run it", command_policy="ask")
    create_job(jobs, "nomatch", "Run it", allowed_commands=["pytest*"])
    llm.add(answer("CMD", command="ls -la"), answer("CMD", command="ls -la"))
    ask = logist_process("job", "step", "ask", "--oneshot", "--base-url", llm.base_url)
    assert "its command is held because the job's command policy is ask: every command waits for a person" \
        in ask.stderr, ask.stderr
    nomatch = logist_process("job", "step", "nomatch", "--oneshot", "--base-url", llm.base_url)
    assert "its command is held because no --allow pattern matches it (--allow 'pytest*')" in nomatch.stderr


# -- the real cause of INTERVENTION_REQUIRED -------------------------------------------------------


def test_intervention_names_its_cause_and_suggests_a_budget_only_when_one_stopped_the_job(jobs, llm):
    create_job(jobs, "stuck", "Write hello.py")
    llm.add(answer("STUCK", summary="the spec names no file"))
    step = logist_process("job", "step", "stuck", "--base-url", llm.base_url)
    assert step.returncode == 3, step.stderr
    line = step.stderr.strip().splitlines()[-1]
    assert line == ("Job 'stuck' needs intervention: Worker is STUCK: the spec names no file; look at the reason "
                    "(logist job status) and resubmit it (logist job resubmit --feedback TEXT)."), line
    again = logist_process("job", "run", "stuck")  # refused: the job waits; the same line
    assert again.returncode == 3 and again.stderr.strip().splitlines()[-1] == line

    create_job(jobs, "invalid", "Write hello.py", format_retries=0)
    llm.add("this is not an answer")
    invalid = logist_process("job", "step", "invalid", "--base-url", llm.base_url)
    line = invalid.stderr.strip().splitlines()[-1]
    assert line.startswith("Job 'invalid' needs intervention: invalid answer from Worker: "), line
    assert "budget" not in line and "--max-steps" not in line

    budget = create_job(jobs, "spent", "Write hello.py", max_steps=1)
    post_answer(budget, answer("MESSAGE", message="hi"))
    spent = logist_process("job", "step", "spent", "--base-url", llm.base_url)
    assert spent.returncode == 4, spent.stderr
    assert spent.stderr.strip().splitlines()[-1] == (
        "Job 'spent' stopped at a budget: max steps reached (1 calls of 1); raise it: logist job set spent --max-steps N")
    refused = logist_process("job", "approve", "spent")
    assert "raise the budget that stopped it" in refused.stderr, refused.stderr
    refused = logist_process("job", "approve", "stuck")
    assert "resubmit" in refused.stderr and "budget" not in refused.stderr, refused.stderr
