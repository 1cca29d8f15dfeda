"""A job's checks: its work verified by running it, not by a model's word.

A check is a shell command a person gave the job (``job create --check``, a
skill's ``checks:``, a role's ``checks``, config.json's ``defaults.checks``;
``job set --check`` changes them). Logist runs them, one after the other,
in the job's workspace with the same runner as a model's commands
(:func:`logist.engine.commands.run_command`: the sandbox, the environment
allowlist, the timeout, the output limit, the redaction), but never holds
one for approval: a person wrote it. Exit 0 passes.

When they run: a COMPLETED they verify (the Worker's, a solo Worker's, the
Planner's to the person) leads, by the workflow table's ``COMPLETED checks
to run`` row, to ``checks_due``; the next ``job step`` (or ``job check``)
runs them before anything else, and the run's outcome is a row of the
table: ``checks passed`` (the Supervisor's turn starts; a solo job ends;
the Planner's result goes to the person), ``checks failed`` (the work goes
back with the failing output, a RETRY from the checks counted in
``retries_in_a_row``), ``checks failed over limit`` (a person is needed,
the failing check named). ``job check`` with no checks due records a run
and changes no state (``check``), so ``job approve`` can see the work
verified on the commit it approves.

Each run is one history entry of kind ``check`` (:class:`CheckRun`), under
the job's lock and its step journal like any entry. It is not a step: no
answer is applied, so ``calls`` (what ``--max-steps`` limits) does not
count it, nor do the totals' calls; its time counts in ``wall_ms``.
A replay applies a recorded run's outcome (:func:`apply_recorded`)
without running anything. A check verifies and does not change the work:
where the sandbox can, it runs on a throwaway view of the workspace
(:func:`logist.workspace.sandbox.throwaway_view`: what it writes, caches
included, is seen by it and gone with it), so nothing is put back and the
workspace is not looked at after the run; elsewhere the workspace is put
back at the commit the checks ran on when a check changed it (files the
workspace's .gitignore ignores, such as caches, are left).
"""

from __future__ import annotations

import logging
from typing import Callable, Optional

from ..errors import LogistError
from ..store.entries import CheckResult, CheckRun
from ..store.session import JobFiles as Job
from ..store.manifest import CheckSummary, JobManifest, Status, Turn
from ..store.prompts import Prompts
from ..workspace import sandbox as processes
from ..workspace.repository import UnreadableFiles
from .apply import StepResult
from .commands import CommandWatch, _logists_folders, run_command
from .prompt import render_checks
from ..views.summary import checks_line
from .session import open_locked
from .workflow import (
    CHECK, CHECKS_FAILED, CHECKS_OVER_LIMIT, CHECKS_PASSED, PERSON, find_rule, move, rule_for, who_acts,
)

log = logging.getLogger("logist")

#: The characters of a check's output kept (its end: where a test runner says what failed).
OUTPUT_TAIL = 3_000


def _tail(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"[... {len(text) - limit} characters before this cut ...]\n" + text[-limit:]


def run_checks(job: Job, manifest: JobManifest, recorded: Callable[[int, Optional[str]], None],
               watch: Optional[CommandWatch] = None) -> tuple[list[CheckResult], bool]:
    """Run the job's checks in its workspace, each to its end, on a
    throwaway view of it where the sandbox can make one; their results in
    order, and whether what they wrote may be in the workspace (a check ran
    on the workspace itself). ``recorded(pgid, start_time)`` is called
    before each begins."""
    settings = manifest.settings
    limit = min(settings.command_output_limit, OUTPUT_TAIL)
    results = []
    wrote = False
    for command in settings.checks:
        if watch is not None:
            watch.command(command)
        try:
            ran = run_command(command, job.workspace, settings.command_timeout, settings.command_output_limit,
                              sandbox=settings.command_sandbox, env_names=settings.command_env,
                              read_only=_logists_folders(job), recorded=recorded, throwaway=True)
        except processes.SandboxUnavailable as exc:  # not run unconfined: a check that cannot run fails
            results.append(CheckResult(command=command, output=str(exc)))
            continue
        finally:
            if watch is not None:
                watch.finished()
        wrote = wrote or not ran.thrown_away
        output = "\n".join(text for text in (ran.stdout, ran.stderr) if text)
        results.append(CheckResult(command=command, exit_code=ran.exit_code, timed_out=ran.timed_out,
                                   duration_ms=round(ran.duration * 1000), output=_tail(output, limit)))
    return results, wrote


def _first_failure(run: CheckRun) -> str:
    failed = run.failed[0]
    return f"check `{failed.command}` {failed.ending}"


def _apply_run(after: JobManifest, before: JobManifest, run: CheckRun, prompts: Prompts) -> tuple[str, str]:
    """Move ``after`` by the row the run's outcome leads to, and do its turn
    part; the row's event and its turn effect."""
    who = who_acts(before)
    due = before.checks_due
    after.checks_due = False
    event = CHECKS_PASSED if run.passed else CHECKS_FAILED
    rule = find_rule(before.status, event, who) if due else None
    if rule is None:  # on a person's demand (or due in a state no row of the run takes: SUSPENDED)
        after.checks_due = due
        rule = rule_for(before.status, CHECK, PERSON)
        move(after, rule, before.status)
        return rule.event, rule.turn
    if not run.passed:
        after.retries_in_a_row += 1
        limit = after.settings.max_retries_in_a_row
        if after.retries_in_a_row > limit:
            reason = (f"{_first_failure(run)} ({after.retries_in_a_row} RETRYs in a row, limit {limit}; the last "
                      "from the job's checks)")
            rule = rule_for(before.status, CHECKS_OVER_LIMIT, who)
            move(after, rule, before.status, reason)
            return rule.event, rule.turn
    move(after, rule, before.status)
    after.reason = None
    feedback = None if run.passed else prompts.render("messages/checks_failed",
                                                       checks=render_checks(run, prompts, only_failed=True))
    if rule.turn == "handoff":
        after.turn = Turn(slot="supervisor", role=after.roles["supervisor"])
    elif rule.turn == "fix":
        after.turn = Turn(slot=after.turn.slot, role=after.turn.role, feedback=feedback)
    elif rule.turn == "continue":  # the Planner's turn goes on with the failing output
        after.turn.pending = feedback
    return rule.event, rule.turn


def record_run(job: Job, before: JobManifest, run: CheckRun, duration_ms: int, replayed: bool = False) -> StepResult:
    """Record ``run`` as the job's next entry (kind ``check``) and apply its
    outcome (:func:`_apply_run`); the caller holds the job's lock."""
    sequence = before.last_sequence + 1
    after = before.model_copy(deep=True)
    event, effect = _apply_run(after, before, run, Prompts(job.jobs_dir.path))
    after.last_check = CheckSummary(sequence=sequence, commit=run.commit, passed=run.passed,
                                    failed=[r.command for r in run.failed])
    after.totals.wall_ms += duration_ms
    after.workspace_commit = before.workspace_commit if run.commit is None else run.commit
    note = checks_line(run.results) + ("" if event == CHECK else f": {event}")
    if replayed:
        note += "; the outcome was applied from a recorded history, no check was run"
    entry = job.session.new_entry(before, after, kind="check", role=before.turn.role, checks=run,
                                  workspace_commit=after.workspace_commit, duration_ms=duration_ms, note=note)
    job.session.record(entry, after)
    return StepResult(job_id=job.id, sequence=sequence, role="Logist",
                      action="CHECKS_PASSED" if run.passed else "CHECKS_FAILED", status=after.status, summary=note,
                      commit=after.workspace_commit, duration_ms=duration_ms, turn=effect,
                      error=None if run.passed else _first_failure(run))


def check_now(job: Job, manifest: JobManifest, *, requested: bool = False,
              watch: Optional[CommandWatch] = None) -> StepResult:
    """Run the job's checks on its workspace as it is and record the run;
    the caller holds the job's lock. Edits a person made by hand are
    committed first, so the run names the commit it verified."""
    if not manifest.settings.checks and not manifest.checks_due:
        raise LogistError(f"job '{job.id}' has no checks (logist job set {job.id} --check CMD gives it one)")
    # Due with none left (job set --no-checks after the COMPLETED): a run of none passes.
    if manifest.status in (Status.SUCCESS, Status.CANCELED):
        raise LogistError(f"job '{job.id}' is {manifest.status}: its checks no longer decide anything")
    sequence = manifest.last_sequence + 1
    repo = job.repo
    head = repo.head()
    journal = job.session.journal
    begun = False

    def begin() -> None:
        nonlocal head, begun
        if repo.is_dirty():
            head = repo.commit_all(f"logist: {job.id} changes made by hand before entry {sequence}") or head
        begun = True

    def recorded(pgid: int, started: Optional[str]) -> None:
        # Called once a check's launcher has started, before the check runs
        # (it waits until this returns). The first one commits the edits made
        # by hand while the sandbox is being made, and writes the step's
        # journal with its group: until a check runs nothing can change, and
        # one durable write costs half of two.
        if begun:
            journal.command_started(pgid, started)
        else:
            begin()
            journal.begin_applying(sequence, head, None, doing="a run of the job's checks", command=(pgid, started))

    results, wrote = run_checks(job, manifest, recorded, watch)
    if not begun:  # no check ran (none left, or none could): nothing to put back
        begin()
    elif wrote:  # on a throwaway view (where the sandbox makes one) what a check wrote is gone with it
        try:
            # A check verifies; what it wrote is not the work. One git process
            # tells whether it wrote anything (most checks do not): only then is
            # the workspace put back, which takes three.
            if repo.head() != head or repo.is_dirty():
                repo.reset_to(head)
        except UnreadableFiles as exc:
            log.warning("job %s: the workspace could not be put back after its checks: %s", job.id, exc)
    run = CheckRun(commit=head, results=results, requested=requested)
    return record_run(job, manifest, run, sum(r.duration_ms for r in results))


def apply_recorded(job: Job, manifest: JobManifest, recorded: CheckRun) -> StepResult:
    """Apply a recorded run's outcome (``job replay``, ``poststep --from-history``)
    without running anything: the run is recorded on this job's commit."""
    run = recorded.model_copy(update={"commit": job.repo.head()})
    return record_run(job, manifest, run, sum(r.duration_ms for r in recorded.results), replayed=True)


def approval_refusal(job: Job, manifest: JobManifest) -> Optional[str]:
    """Why ``job approve`` refuses (None: it may approve): a check failed on
    the last run, or the checks have not run on the workspace's commit. The
    reason alone: the CLI adds how to approve anyway (:data:`OVERRIDE`), a
    page offers its own control."""
    if not manifest.settings.checks:
        return None
    last = manifest.last_check
    if last is None:
        return f"cannot approve job '{job.id}': its checks have not run (logist job check {job.id})"
    if last.commit != job.repo.head():
        return (f"cannot approve job '{job.id}': its checks last ran on another commit than the workspace's "
                f"(logist job check {job.id})")
    if not last.passed:
        return (f"cannot approve job '{job.id}': check `{last.failed[0] if last.failed else '?'}` failed "
                f"(entry {last.sequence})")
    return None


#: What a refusal of :func:`approval_refusal` adds for the command line.
OVERRIDE = "approve anyway with --despite-checks"


def check_job(job: Job, lock_timeout: float = 0, watch: Optional[CommandWatch] = None) -> StepResult:
    """``job check``: run the job's checks now, under its lock. Due ones
    (after a COMPLETED) decide as :func:`check_now` says; otherwise the run
    is recorded and the job's state stays."""
    with open_locked(job, lock_timeout) as session:
        manifest = session.manifest
        return check_now(job, manifest, requested=not manifest.checks_due, watch=watch)


def replay_check(job: Job, recorded: CheckRun, lock_timeout: float = 0) -> StepResult:
    """A recorded run's outcome applied to ``job`` under its lock (:func:`apply_recorded`)."""
    with open_locked(job, lock_timeout) as session:
        return apply_recorded(job, session.manifest, recorded)
