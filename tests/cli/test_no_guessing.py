"""The command line never makes a person guess: why a
command was held, a line while a model's command runs, the output of a
command approve-command ran, what Ctrl-C kept and how to go on, and the
real cause of INTERVENTION_REQUIRED. Each runs the real ``logist`` program
against the suite's scripted server: in this process (``logist_cli``), and
as a process of its own on a pseudo-terminal where the point is what a
terminal shows, or what Ctrl-C leaves."""

from __future__ import annotations

import json
import re

from logist.store.session import JobFiles
from logist.engine.create import create_job
from logist.engine.step import post_answer
from logist.replay.scripted import Reply, answer

from conftest import logist_cli, logist_process, run_on_a_terminal
from test_terminal import screen, shows

#: A duration as a command's line gives it.
SECONDS = re.compile(r"\d+\.\d s\)")

# -- why a command was held ----------------------------------------------------------------------

PIPED = "echo piped 2>&1 | tail -n 1"


def test_a_command_with_shell_operators_is_held_and_the_rule_is_named(jobs, llm):
    """``--allow 'echo*'`` does not let ``echo piped 2>&1 | tail -n 1`` run:
    every place that shows the held command says which rule held it."""
    job = create_job(jobs, "held", "Run it", allowed_commands=["echo*"])
    llm.add(answer("CMD", command=PIPED))
    step = logist_cli("job", "step", "held", "--oneshot", "--base-url", llm.base_url)
    assert step.returncode == 3, step.stderr
    rule = ("it holds shell operators ('>', '&', '|'): a command with a shell operator runs without asking only "
            "when an --allow pattern is that exact command ('echo*' would match it otherwise)")
    assert f"Job 'held' is INPUT_REQUIRED: its command is held because {rule}; decide on its held command" \
        in step.stderr, step.stderr
    assert job.manifest().pending_command == PIPED

    status = logist_cli("job", "status", "held")
    assert f"Held:    because {rule}" in status.stdout.splitlines(), status.stdout
    assert json.loads(logist_cli("job", "status", "held", "--json").stdout)["held_because"] == rule
    assert f"Held because: {rule}" in logist_cli("job", "show", "held").stdout

    # --json of the step says it too.
    again = create_job(jobs, "held2", "Run it", allowed_commands=["echo*"])
    llm.add(answer("CMD", command=PIPED))
    as_json = logist_cli("job", "step", "held2", "--oneshot", "--json", "--base-url", llm.base_url)
    assert as_json.returncode == 3 and json.loads(as_json.stdout)[-1]["held_because"] == rule
    assert again.manifest().pending_command == PIPED


def test_an_exact_pattern_lets_a_command_with_shell_operators_run(jobs, llm):
    """The way to allow such a command on purpose: a pattern that is that exact command."""
    job = create_job(jobs, "exact", "Run it", allowed_commands=["echo*", PIPED])
    llm.add(answer("CMD", command=PIPED), answer("MESSAGE", message="ok"))
    step = logist_cli("job", "step", "exact", "--oneshot", "--base-url", llm.base_url)
    assert step.returncode == 0, step.stderr
    assert job.manifest().pending_command is None
    assert "   | piped" in step.stderr.splitlines(), step.stderr


def test_the_policy_ask_and_a_pattern_that_does_not_match_are_named(jobs, llm):
    create_job(jobs, "ask", "Run it", command_policy="ask")
    create_job(jobs, "nomatch", "Run it", allowed_commands=["pytest*"])
    llm.add(answer("CMD", command="ls -la"), answer("CMD", command="ls -la"))
    ask = logist_cli("job", "step", "ask", "--oneshot", "--base-url", llm.base_url)
    assert "its command is held because the job's command policy is ask: every command waits for a person" \
        in ask.stderr, ask.stderr
    nomatch = logist_cli("job", "step", "nomatch", "--oneshot", "--base-url", llm.base_url)
    assert "its command is held because no --allow pattern matches it (--allow 'pytest*')" in nomatch.stderr


# -- the real cause of INTERVENTION_REQUIRED -------------------------------------------------------


def test_intervention_names_its_cause_and_suggests_a_budget_only_when_one_stopped_the_job(jobs, llm):
    create_job(jobs, "stuck", "Write hello.py")
    llm.add(answer("STUCK", summary="the spec names no file"))
    step = logist_cli("job", "step", "stuck", "--base-url", llm.base_url)
    assert step.returncode == 3, step.stderr
    line = step.stderr.strip().splitlines()[-1]
    assert line == ("Job 'stuck' needs intervention: Worker is STUCK: the spec names no file; look at the reason "
                    "(logist job status) and resubmit it (logist job resubmit --feedback TEXT)."), line
    again = logist_cli("job", "run", "stuck")  # refused: the job waits; the same line
    assert again.returncode == 3 and again.stderr.strip().splitlines()[-1] == line

    create_job(jobs, "invalid", "Write hello.py", format_retries=0)
    llm.add("this is not an answer")
    invalid = logist_cli("job", "step", "invalid", "--base-url", llm.base_url)
    line = invalid.stderr.strip().splitlines()[-1]
    assert line.startswith("Job 'invalid' needs intervention: invalid answer from Worker: "), line
    assert "budget" not in line and "--max-steps" not in line

    budget = create_job(jobs, "spent", "Write hello.py", max_steps=1)
    post_answer(budget, answer("MESSAGE", message="hi"))
    spent = logist_cli("job", "step", "spent", "--base-url", llm.base_url)
    assert spent.returncode == 4, spent.stderr
    assert spent.stderr.strip().splitlines()[-1] == (
        "Job 'spent' stopped at a budget: max steps reached (1 of 1 steps); raise it: logist job set spent --max-steps N")
    refused = logist_cli("job", "approve", "spent")
    assert "raise the budget that stopped it" in refused.stderr, refused.stderr
    refused = logist_cli("job", "approve", "stuck")
    assert "resubmit" in refused.stderr and "budget" not in refused.stderr, refused.stderr


# -- a line while a model's command runs -------------------------------------------------------------

SLOW = "sleep 1.6 && echo slept"


def test_a_line_shows_a_running_commands_seconds_on_a_terminal_and_nothing_in_a_pipe(jobs, llm):
    create_job(jobs, "slow", "Run it", allowed_commands=[SLOW])
    llm.add(answer("CMD", command=SLOW))
    code, output = run_on_a_terminal("job", "step", "slow", "--oneshot", "--base-url", llm.base_url)
    assert code == 0, output
    assert re.search(re.escape(f"\r\x1b[K  $ {SLOW}: running, ") + r"[1-9]\d* s", output), output  # redrawn as it ran
    rows = screen(output)
    assert not shows(rows, ": running,"), "wiped once it ended"
    assert any(re.fullmatch(re.escape(f"   $ {SLOW}  (exit 0, ") + SECONDS.pattern, row) for row in rows), rows
    assert shows(rows, "   | slept")

    # Not a terminal: no line drawn, only the command's line with its time, as for a call. On a terminal
    # the line is drawn as soon as the command starts: a quick command shows it is never drawn here.
    quick = "echo slept"
    create_job(jobs, "piped", "Run it", allowed_commands=[quick])
    llm.add(answer("CMD", command=quick))
    piped = logist_cli("job", "step", "piped", "--oneshot", "--base-url", llm.base_url)
    assert piped.returncode == 0, piped.stderr
    assert "running," not in piped.stderr and "\r" not in piped.stderr and "\x1b" not in piped.stderr
    assert re.search(re.escape(f"   $ {quick}  (exit 0, ") + SECONDS.pattern, piped.stderr), piped.stderr


# -- approve-command shows the output of the command it ran ------------------------------------------

APPROVED = "echo approved-output && echo to-stderr >&2 && exit 3"


def _command_lines(stderr: str) -> list[str]:
    """The lines of a command that ran (``$ ...`` and ``| ...``), its time masked."""
    return [SECONDS.sub("S)", line) for line in stderr.splitlines() if line.startswith(("   $ ", "   | "))]


def test_approve_command_shows_the_commands_output_as_job_step_does(jobs, llm):
    job = create_job(jobs, "held", "Run it", command_policy="ask")
    create_job(jobs, "ran", "Run it", allowed_commands=[APPROVED])
    llm.add(answer("CMD", command=APPROVED), answer("CMD", command=APPROVED))
    assert logist_cli("job", "step", "held", "--oneshot", "--base-url", llm.base_url).returncode == 3
    ran = logist_cli("job", "step", "ran", "--oneshot", "--base-url", llm.base_url)
    assert ran.returncode == 0, ran.stderr

    approved = logist_cli("job", "approve-command", "held")
    assert approved.returncode == 0, approved.stderr
    lines = approved.stderr.splitlines()
    assert lines[0] == f"Running: {APPROVED}"
    assert re.fullmatch(re.escape(f"   $ {APPROVED}  (exit 3, ") + SECONDS.pattern, lines[1]), lines
    assert "   | approved-output" in lines and "   | to-stderr" in lines
    assert _command_lines(approved.stderr) == _command_lines(ran.stderr), "the same rendering as job step's"
    assert lines[-1] == "Job 'held' is now RUNNING."

    recorded = JobFiles(job.dir).entry(job.manifest().last_sequence).command
    llm.add(answer("CMD", command=APPROVED))
    assert logist_cli("job", "step", "held", "--oneshot", "--base-url", llm.base_url).returncode == 3
    data = json.loads(logist_cli("job", "approve-command", "held", "--json").stdout)
    assert data["command"]["command"] == APPROVED and data["command"]["exit_code"] == 3
    assert data["command"]["output"] == recorded.output, "what the model is shown"


# -- Ctrl-C says what was kept and how to go on --------------------------------------------------------


def said(output: str) -> list[str]:
    """The lines a terminal keeps (a redrawn line's last drawing)."""
    return [row for row in screen(output, columns=1000, lines=200) if row]


def test_ctrl_c_during_a_call_says_what_was_kept_and_how_to_go_on(jobs, llm):
    job = create_job(jobs, "slow", "Write hello.py")
    llm.add(answer("MESSAGE", message="first"), Reply(content=answer("MESSAGE", message="late"), delay=30))
    # The progress line is printed before the request is sent: Ctrl-C once the server holds the call,
    # so that it is in flight (typed earlier, the call would not be made and the next command's call
    # would get the late answer, after its delay).
    code, output = run_on_a_terminal("job", "run", "slow", "--base-url", llm.base_url,
                                     ctrl_c_when="step 2 of 100: waiting for the model",
                                     and_when=lambda: len(llm.requests) == 2)
    assert code == 130, output
    rows = said(output)
    assert "Error: interrupted" not in output and "Traceback" not in output, output
    assert "Interrupted (Ctrl-C)." in rows, (output, rows)
    at = rows.index("Interrupted (Ctrl-C).")
    assert rows[at + 1] == (
        "Job 'slow' is RUNNING; its last recorded step is #2 (Worker MESSAGE); step 3's call was in flight and is not "
        "recorded: whether the endpoint answered it (and charged for it) is unknown; the next command on this job "
        "records it as a call of unknown outcome, and the next step makes it again (with the same Idempotency-Key)."), rows
    assert rows[at + 2] == "Go on: logist job run slow"
    assert job.manifest().last_sequence == 2, "nothing more was recorded"
    status = logist_cli("job", "status", "slow").stdout
    assert "Pending: step 3's call was in flight and is not recorded" in status, status

    llm.add(answer("STUCK", summary="enough"))
    going_on = logist_process("job", "run", "slow", "--base-url", llm.base_url)
    assert going_on.returncode == 3, going_on.stderr
    assert len(llm.requests) == 3, "the interrupted call was made again, answered with the STUCK"
    assert job.manifest().totals.unknown_calls == 1, "recorded as the call it was"


def test_ctrl_c_while_a_models_command_runs_says_it_is_held_next(jobs, llm):
    job = create_job(jobs, "cmd", "Run it", allowed_commands=["sleep 30"])
    llm.add(answer("CMD", command="sleep 30"))
    code, output = run_on_a_terminal("job", "step", "cmd", "--base-url", llm.base_url, ctrl_c_when="$ sleep 30: running, 1 s")
    assert code == 130, output
    rows = said(output)
    assert "Interrupted (Ctrl-C)." in rows, (output, rows)
    at = rows.index("Interrupted (Ctrl-C).")
    assert rows[at + 1] == (
        "Job 'cmd' is PENDING; its last recorded step is #1 (person create); step 2's answer is saved and its command "
        "was stopped: the next command on this job records the step and holds the command for you (approve-command "
        "runs it again, skip-command skips it)."), rows
    assert rows[at + 2] == "Go on: logist job step cmd"
    going_on = logist_process("job", "step", "cmd", "--base-url", llm.base_url)
    assert going_on.returncode == 3 and job.manifest().pending_command == "sleep 30", going_on.stderr
    assert "its command is held because it had been started when Logist was stopped" in going_on.stderr


def test_ctrl_c_in_approve_command_keeps_the_command_held(jobs, llm):
    job = create_job(jobs, "held", "Run it", command_policy="ask")
    llm.add(answer("CMD", command="sleep 30"))
    assert logist_cli("job", "step", "held", "--base-url", llm.base_url).returncode == 3
    code, output = run_on_a_terminal("job", "approve-command", "held", ctrl_c_when="$ sleep 30: running, 1 s")
    assert code == 130, output
    rows = said(output)
    assert "Interrupted (Ctrl-C)." in rows, (output, rows)
    at = rows.index("Interrupted (Ctrl-C).")
    assert rows[at + 1] == (
        "Job 'held' is INPUT_REQUIRED; its last recorded step is #2 (Worker CMD); step 3 was stopped before it was "
        "recorded: the next command on this job puts the workspace back, and the job is as it was before it."), rows
    assert rows[at + 2] == ("Go on: decide on its held command (logist job approve-command / skip-command).")
    assert job.manifest().pending_command == "sleep 30"


def test_ctrl_c_in_a_batch_says_each_job_is_recorded_and_how_to_go_on(jobs, llm):
    for name in ("a", "b"):
        create_job(jobs, name, "Write hello.py")
    # The first two calls answered at once, the next two held for 2 s: Ctrl-C lands while they are in
    # flight, and the batch waits for them (each job stops after the step in hand), so no event can end
    # their wait sooner without racing the Ctrl-C.
    llm.add(answer("MESSAGE", message="first"), answer("MESSAGE", message="first"),
            *[Reply(content=answer("MESSAGE", message="slow"), delay=2) for _ in range(2)])
    code, output = run_on_a_terminal("job", "run", "--all", "--base-url", llm.base_url, ctrl_c_when="#2 Worker MESSAGE")
    assert code == 130, output
    rows = said(output)
    assert "Interrupted (Ctrl-C)." in rows, (output, rows)
    at = rows.index("Interrupted (Ctrl-C).")
    assert rows[at + 1:] == ["2 other jobs: nothing was in flight, every step made is recorded; a job that was "
                             "running stopped after the step in hand.", "Go on: logist job run --all"], rows
