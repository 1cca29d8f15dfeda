"""The pages of ``logist serve``: the list of jobs, and a job's page.

Both are made of the pieces ``index.html`` and ``report.html`` are made of
(:mod:`logist.views.report`): the jobs table, a job's header, facts and
states, and its timeline's rows, one definition each. What only the server
adds is the frame (the style and script are linked from ``/assets/``, not
inlined: the server's Content-Security-Policy allows its own origin and
nothing else, no inline script or style) and the decisions a job waits for,
as forms.

Which decisions a job shows is the workflow table's to say
(:func:`logist.api.person_can`: a form for each row a person can take in
the job's state, and for what an INPUT_REQUIRED job waits for, a question
or a held command). Each form carries ``at``, the history entry it
was rendered for: the server refuses it (409) once the job has moved on.
Everything from a model, a person or a file is escaped by
:func:`logist.views.html.esc`; a held command is first made :func:`inert`
(each control character visible), as the CLI prints it.
"""

from __future__ import annotations

from typing import Iterator, Optional
from urllib.parse import quote

from ..api import NEEDS_PERSON, Job, JobManifest, Jobs, Status, person_can
from ..terminal import inert
from ..views.html import esc
from ..views.report import TIMELINE_CLOSE, IndexRow, index_body, index_rows, job_head, timeline_open
from ..views.summary import StateTrail
from ..views.window import Follower, read_window

#: History entries a job's page shows at most by default (the rest are a
#: link away; ``logist serve --page-size``): a 1 GB history is shown a page
#: at a time, never loaded whole.
PAGE = 500
#: The decisions a page can post, each ``/jobs/JOB/ACTION``.
ACTIONS = ("answer", "skip", "approve", "reject", "approve-command", "skip-command", "resubmit", "suspend",
           "resume", "restep")


def job_url(job_id: str) -> str:
    return "/jobs/" + quote(job_id, safe="")


def frame(title: str, stream: str, last: Optional[int] = None) -> tuple[str, str]:
    """What comes before and after a page's body. ``stream``: the page's
    event stream; ``last``: the last history entry the page shows."""
    head = (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="generator" content="Logist">'
        f"<title>{esc(title)}</title>"
        '<link rel="stylesheet" href="/assets/report.css"><link rel="stylesheet" href="/assets/serve.css">'
        '<script src="/assets/report.js" defer></script><script src="/assets/serve.js" defer></script>'
        f'</head>\n<body data-stream="{esc(stream)}"' + ("" if last is None else f' data-last="{last}"') + ">\n"
        '<nav class="serve"><a href="/">All jobs</a> <span id="live" class="live" hidden>live</span></nav>\n'
    )
    return head, "\n</body></html>\n"


def notice_html(text: str) -> str:
    return f'<p class="notice error" role="alert">{esc(text)}</p>'


# -- The list of jobs ------------------------------------------------------------------------------


def jobs_table(jobs: Jobs) -> str:
    """The jobs index's header and table, each job linked to its page."""
    rows = index_rows(jobs.directory, lambda job: job.dir)

    def link(row: IndexRow) -> Optional[str]:
        return job_url(row.job_id) if row.manifest is not None else None

    def waits_for(row: IndexRow) -> str:
        m = row.manifest
        if m is None or str(m.status) not in NEEDS_PERSON:
            return ""
        return jobs.get(row.job_id).hint(m)

    return index_body(jobs.directory, rows, link, jobs.index().current_job_id, ("waits for", waits_for))


def jobs_page(jobs: Jobs) -> str:
    head, tail = frame(f"Logist jobs in {jobs.path}", "/events")
    return head + f'<div id="jobs">{jobs_table(jobs)}</div>' + tail


# -- A job's page ----------------------------------------------------------------------------------


def _form(job: Job, action: str, at: int, label: str, fields: str = "") -> str:
    return (
        f'<form method="post" action="{esc(job_url(job.id))}/{action}" class="decide d-{action}">'
        f'<input type="hidden" name="at" value="{at}">{fields}'
        f'<button type="submit" data-action="{action}">{esc(label)}</button></form>'
    )


def decisions_html(job: Job, m: JobManifest) -> str:
    """The forms for what a person can do with the job now."""
    at = m.last_sequence

    def can(event: str) -> bool:
        return person_can(m, event)

    parts: list[str] = []
    if can("answer") and m.question is not None:
        parts.append(
            f'<div class="ask"><h3>{"Question" if m.question.required else "Question (optional)"}</h3>'
            f'<p class="prose question">{esc(m.question.text)}</p>'
            + _form(job, "answer", at, "Answer", '<textarea name="text" rows="3" required aria-label="your answer"></textarea>')
            + ("" if m.question.required else _form(job, "skip", at, "Skip the question"))
            + "</div>"
        )
    if can("approve-command"):
        if m.pending_command is not None:
            held = f'<p>Held command, exactly as it will run:</p><pre class="held">\n{esc(inert(m.pending_command, one_line=True))}</pre>'
        else:
            paths = "".join(f"<li><code>{esc(c.get('path') if isinstance(c, dict) else c)}</code></li>"
                            for c in m.pending_changes or [])
            held = f"<p>Held file changes:</p><ul>{paths}</ul>"
        parts.append(
            f'<div class="held-decision"><h3>Waiting for your decision</h3>{held}'
            + _form(job, "approve-command", at, "Approve and run" if m.pending_command is not None else "Approve the changes")
            + _form(job, "skip-command", at, "Skip")
            + "</div>"
        )
    if can("approve"):
        refused = job.approval_refusal()
        despite = "" if refused is None else (
            f'<p class="notice error checks-refusal" role="alert">{esc(refused)}.</p>'
            + _form(job, "approve", at, "Approve despite the checks",
                    '<input type="hidden" name="despite_checks" value="yes">'))
        parts.append(
            '<div class="review"><h3>The work is done: approve or reject it</h3>'
            + _form(job, "approve", at, "Approve") + despite
            + _form(job, "reject", at, "Reject",
                    '<textarea name="feedback" rows="2" required aria-label="what is wrong" placeholder="What is wrong (sent to the Worker)"></textarea>')
            + "</div>"
        )
    if can("resubmit"):
        parts.append(
            '<div class="resubmit"><h3>Send it back to work</h3>'
            + _form(job, "resubmit", at, "Resubmit",
                    '<textarea name="feedback" rows="2" aria-label="feedback" placeholder="What to do differently (optional)"></textarea>')
            + "</div>"
        )
    controls = []
    if can("suspend"):
        controls.append(_form(job, "suspend", at, "Suspend"))
    if can("resume"):
        controls.append(_form(job, "resume", at, "Resume"))
    if m.status != Status.CANCELED and at > 1:
        controls.append(_form(
            job, "restep", at, "Restep",
            f'<label>to entry <input type="number" name="to" min="1" max="{at - 1}" value="{at - 1}"></label> ',
        ))
    if controls:
        parts.append(f'<div class="controls">{"".join(controls)}</div>')
    return f'<section class="decisions" data-at="{at}"><h2>Decisions</h2>{"".join(parts)}</section>'


#: The lines of a check's output its page shows (the end of what the run recorded).
CHECK_OUTPUT_LINES = 30


def checks_html(job: Job, m: JobManifest) -> str:
    """The job's last run of its checks: each command, how it ended and
    the end of its output, and whether the workspace changed since; for a
    job with checks that never ran, that they have not. Empty for a job
    without checks."""
    last = job.check_status(m)
    if last is None:
        return ('<section class="checks"><h2>Checks</h2><p class="checks">Not run yet '
                f'(logist job check {esc(job.id)})</p></section>') if m.settings.checks else ""
    rows = []
    for result in last.results:
        tail = "\n".join((result.output or "").splitlines()[-CHECK_OUTPUT_LINES:])
        rows.append(
            f'<li class="{"passed" if result.passed else "failed"}"><code>{esc(inert(result.command, one_line=True))}'
            f'</code>: {esc(result.ending)}'
            + (f'<pre class="check-output">\n{esc(inert(tail))}</pre>' if tail else "") + "</li>")
    return (f'<section class="checks" data-passed="{str(last.passed).lower()}" data-stale="{str(last.stale).lower()}">'
            f'<h2>Checks</h2><p class="checks">{esc(last.line())}</p><ul class="check-results">{"".join(rows)}</ul>'
            "</section>")


def job_state(job: Job, m: JobManifest, trail: StateTrail, first: int = 1) -> str:
    """The part of a job's page above its timeline, replaced whole when the
    job changes; ``trail``: the states of the entries from ``first`` on."""
    return job_head(job.stored, m, trail, crumb="Logist job", inserted=checks_html(job, m) + decisions_html(job, m),
                    before=first - 1)


def _pages_html(job: Job, first: int, shown: int, count: int, page: int) -> str:
    """Where the shown entries sit in the history, with links to the pages around them."""
    links = []
    if first > 1:
        links.append(f'<a href="{esc(job_url(job.id))}?from={max(1, first - page)}">earlier</a>')
    if shown < count:
        links.append(f'<a href="{esc(job_url(job.id))}?from={shown + 1}">later</a>')
        links.append(f'<a href="{esc(job_url(job.id))}">the latest</a>')
    where = f"entries {first}–{shown} of {count}" if count else "no entries"
    return f'<p class="pages">{where}{": " if links else ""}{" · ".join(links)}</p>'


def first_shown(m: JobManifest, start: Optional[int], page: int) -> int:
    """The first entry a page from ``start`` shows (None: the latest page)."""
    return max(1, m.last_sequence - page + 1) if start is None else max(1, start)


def job_page(job: Job, notice: Optional[str] = None, start: Optional[int] = None, page: int = PAGE) -> Iterator[str]:
    """A job's page, piece by piece: the entries from ``start``, ``page`` of
    them, by default the last ones, read from their place in the history
    (:func:`logist.views.window.read_window`: what comes before them is not
    read). A page that ends with the last entry follows the job live, new
    entries included; an earlier one follows its state only."""
    m = job.manifest()
    first = first_shown(m, start, page)
    latest = first + page > m.last_sequence
    window = read_window(job.stored, first, None if latest else first + page - 1)
    try:
        stream = job_url(job.id) + "/events" + (f"?from={first}" if latest else f"?from={first}&until={window.shown}")
        head, tail = frame(f"{job.id}: {m.status} · Logist", stream, window.shown if latest else None)
        yield head
        if notice:
            yield notice_html(notice)
        yield f'<div id="state">{job_state(job, m, window.trail, first)}</div>'
        yield _pages_html(job, first, window.shown, window.last, page)
        yield timeline_open(window.last)
        yield from window.rows()
        yield TIMELINE_CLOSE
        yield from window.continued_rows()
        yield tail
    finally:
        window.close()


def job_update(job: Job, follower: Optional[Follower], first: int, until: Optional[int]) -> tuple[list[tuple[int, str]], str]:
    """The rows of the entries ``follower`` has not sent yet (None: no rows:
    an earlier page, entries ``first`` to ``until``), and the job's state part."""
    m = job.manifest()
    if follower is not None:
        rows = follower.update()
        return rows, job_state(job, m, follower.trail, first)
    window = read_window(job.stored, first, until)
    window.close()
    return [], job_state(job, m, window.trail, first)
