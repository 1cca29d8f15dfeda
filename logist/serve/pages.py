"""The pages of ``logist serve``: the list of jobs, and a job's page.

Both are made of the pieces ``index.html`` and ``report.html`` are made of
(:mod:`logist.views.report`): the jobs table, a job's header, facts and
states, and its timeline's rows, one definition each. What only the server
adds is the frame (the style and script are linked from ``/assets/`` by
names made from their content (:mod:`.static`), not inlined: the server's
Content-Security-Policy allows its own origin and nothing else, no inline
script or style) and the decisions a job waits for, as forms.

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

import hashlib
import json
import os
from dataclasses import dataclass, replace
from typing import Annotated, Iterable, Iterator, Optional
from urllib.parse import quote, urlencode

from pydantic import TypeAdapter, ValidationError

from ..api import BUDGETS, Job, JobManifest, Jobs, JobSpec, Status, person_can
from ..terminal import inert
from ..errors import InvalidAnswer, LogistError
from ..views.html import diff_lines_html, esc, status_badge
from ..views.report import INDEX_COLUMNS, TIMELINE_CLOSE, IndexRow, index_body, index_rows, job_head, timeline_open
from ..views.summary import StateTrail
from ..views.window import Follower, read_window
from . import static

#: History entries a job's page shows at most by default (the rest are a
#: link away; ``logist serve --page-size``): a 1 GB history is shown a page
#: at a time, never loaded whole.
PAGE = 500
#: The decisions a page can post, each ``/jobs/JOB/ACTION``.
ACTIONS = ("answer", "skip", "approve", "reject", "approve-command", "skip-command", "resubmit", "suspend",
           "resume", "restep", "cancel", "rerun", "budgets")
#: The decisions that carry a person's text: the form field, and the button's label.
TEXT_FIELDS = {"answer": ("text", "Answer"), "reject": ("feedback", "Reject"), "resubmit": ("feedback", "Resubmit")}


def job_url(job_id: str) -> str:
    return "/jobs/" + quote(job_id, safe="")


def patch_name(job_id: str) -> str:
    """The file name a job's exported patch is downloaded as (a job id is a plain name; anything else is dropped)."""
    return "".join(c for c in job_id if c.isascii() and (c.isalnum() or c in "._-")) + ".patch"


def frame(title: str, stream: str, last: Optional[int] = None, address: str = "/") -> tuple[str, str]:
    """What comes before and after a page's body. ``stream``: the page's
    event stream; ``last``: the last history entry the page shows;
    ``address``: the page's own URL (a page sent in answer to a POST puts it
    in the address bar, so that a reload asks for the page, not the POST again)."""
    head = (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="generator" content="Logist">'
        f"<title>{esc(title)}</title>"
        f'<link rel="stylesheet" href="{static.url("report.css")}"><link rel="stylesheet" href="{static.url("serve.css")}">'
        f'<script src="{static.url("report.js")}" defer></script><script src="{static.url("serve.js")}" defer></script>'
        f'</head>\n<body data-stream="{esc(stream)}" data-address="{esc(address)}"' + ("" if last is None else f' data-last="{last}"') + ">\n"
        '<nav class="serve"><a href="/">All jobs</a> <span id="live" class="live" hidden>live</span></nav>\n'
        # What a live update changed (a job's new state), said to a screen reader.
        '<div id="announce" class="announce" role="status" aria-live="polite"></div>\n<main>'
    )
    return head, "\n</main></body></html>\n"


def notice_html(text: str) -> str:
    return f'<p class="notice error" role="alert">{esc(text)}</p>'


def kept_html(action: str, text: str, status: str, again: bool) -> str:
    """What a person typed for a decision that was not made, kept beside
    the job's new state: in a box to copy from, and, where the decision
    still applies (``again``), back in its form too. serve.js builds the
    same markup when a live update takes the form away."""
    label = TEXT_FIELDS[action][1]
    said = (f"What you typed for {label} was not sent; it is back in the {label} form: check that it still applies before you send it."
            if again else f"What you typed for {label} was not sent; the job is now {status}. It is kept here to copy.")
    return (
        f'<div class="kept" data-action="{esc(action)}"><p>{esc(said)}</p>'
        f'<textarea readonly rows="3" aria-label="what you typed for {esc(label)}">\n{esc(text)}</textarea></div>'
    )


# -- The list of jobs ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ListQuery:
    """What the list of jobs shows (its address's query): the jobs in one
    ``state`` ("" all), those whose id, objective or wait has ``q`` in it
    (any case), ordered by the column ``sort`` ("" the index's order),
    ``desc``ending or not."""

    state: str = ""
    q: str = ""
    sort: str = ""
    desc: bool = False

    @classmethod
    def read(cls, params) -> "ListQuery":
        sort = params.get("sort", "")
        return cls(state=params.get("state", "").strip().upper()[:40], q=params.get("q", "").strip()[:200],
                   sort=sort if sort in SORTS else "", desc=params.get("order") == "desc")

    def encoded(self, **changed) -> str:
        """This query (with ``changed``) as an address's query string, without the ``?``."""
        query = replace(self, **changed)
        return urlencode([(k, v) for k, v in (("state", query.state), ("q", query.q), ("sort", query.sort),
                                              ("order", "desc" if query.desc else "")) if v])


def _cost(m: JobManifest) -> float:
    return m.totals.cost_usd or 0.0


#: What each column of the list sorts by (a job that cannot be read sorts first, or last descending).
SORTS = {
    "job": lambda row: row.job_id, "status": lambda row: row.status,
    "turn": lambda row: row.manifest.turn.role,
    "steps": lambda row: row.manifest.calls, "tokens": lambda row: row.manifest.totals.tokens,
    "cost": lambda row: _cost(row.manifest), "updated": lambda row: row.manifest.updated_at,
    "objective": lambda row: row.manifest.objective.lower(),
}
#: The budgets the list's Budgets form sets (``logist job set``'s, through :meth:`logist.api.Job.set_budgets`).
BUDGET_FIELDS = tuple(BUDGETS)


def jobs_table(jobs: Jobs, query: ListQuery = ListQuery()) -> str:
    """The jobs index's header and table as ``query`` filters and orders it:
    each job linked to its page, what it waits for a link to its decisions,
    and the buttons for what a person can do with it from the list."""
    rows = index_rows(jobs.directory, lambda job: job.dir)
    total = len(rows)
    waits = {row.job_id: jobs.get(row.job_id).waits_for(row.manifest) if row.manifest is not None else ""
             for row in rows}
    if query.state:
        rows = [row for row in rows if row.status == query.state]
    if query.q:
        needle = query.q.casefold()
        rows = [row for row in rows if needle in row.job_id.casefold() or needle in waits[row.job_id].casefold()
                or (row.manifest is not None and needle in row.manifest.objective.casefold())]
    if query.sort:
        readable = [row for row in rows if row.manifest is not None]
        readable.sort(key=lambda row: SORTS[query.sort](row), reverse=query.desc)
        unreadable = [row for row in rows if row.manifest is None]
        rows = readable + unreadable if query.desc else unreadable + readable

    def link(row: IndexRow) -> Optional[str]:
        return job_url(row.job_id) if row.manifest is not None else None

    def waits_for(row: IndexRow) -> str:
        wait = waits[row.job_id]
        return f'<a href="{esc(job_url(row.job_id))}#decisions">{esc(wait)}</a>' if wait else ""

    def heading(key: str, text: str) -> str:
        if key not in SORTS:
            return esc(text)
        # A heading sorts by its column; the column sorted by sorts the other way.
        desc = query.sort == key and not query.desc
        said = ""
        if query.sort == key:
            said = (' <span aria-hidden="true">' + ("↓" if query.desc else "↑") + '</span><span class="announce">'
                    + (" sorted descending" if query.desc else " sorted ascending") + "</span>")
        return f'<a href="/?{esc(query.encoded(sort=key, desc=desc))}">{esc(text)}{said}</a>'

    return (index_body(jobs.directory, rows, link, jobs.index().current_job_id, ("waits", "waits for", waits_for),
                         heading, lambda row: row_actions(jobs, row, query), total))


def filter_form(query: ListQuery) -> str:
    """The list's filter and order: a state, a text, a column to sort by, sent as the address's query (no script needed)."""
    states = [str(s) for s in Status] + ["UNREADABLE"]
    options = "".join(f'<option value="{esc(s)}"{" selected" if s == query.state else ""}>{esc(s or "any")}</option>'
                      for s in ["", *states])
    clear = ' <a href="/">show all</a>' if query != ListQuery() else ""
    headings = dict(INDEX_COLUMNS)
    sorts = "".join(f'<option value="{key}"{" selected" if key == query.sort else ""}>{esc(headings.get(key, "index order"))}</option>'
                    for key in ["", *SORTS])
    return (
        '<form method="get" action="/" class="filter" role="search">'
        f'<label>state <select name="state">{options}</select></label> '
        f'<label>text <input type="search" name="q" value="{esc(query.q)}"></label> '
        # The headings sort too; this is for a narrow window, where the table's headings are not shown.
        + f'<label>sort by <select name="sort">{sorts}</select></label> '
        + f'<label><input type="checkbox" name="order" value="desc"{" checked" if query.desc else ""}> descending</label> '
        + f'<button type="submit">Show</button>{clear}</form>'
    )


def _row_form(job_id: str, action: str, at: int, label: str, query: ListQuery, fields: str = "",
              confirm: str = "") -> str:
    asked = f' data-confirm="{esc(confirm)}"' if confirm else ""
    return (
        f'<form method="post" action="{esc(job_url(job_id))}/{action}" class="decide d-{action}"{asked}>'
        f'<input type="hidden" name="at" value="{at}"><input type="hidden" name="back" value="{esc(query.encoded())}">'
        f'{fields}<button type="submit" data-action="{action}" aria-label="{esc(label)} {esc(job_id)}">{esc(label)}</button></form>'
    )


def row_actions(jobs: Jobs, row: IndexRow, query: ListQuery) -> str:
    """A row's buttons, each where the job allows it: cancel, budgets (``job
    set``), rerun, and a link to download its work as ``job export --patch`` writes it."""
    m = row.manifest
    if m is None:
        return ""
    at, parts = m.last_sequence, []
    if person_can(m, "cancel"):
        parts.append(_row_form(row.job_id, "cancel", at, "Cancel", query,
                               confirm=f"Cancel job {row.job_id} for good? It cannot be resumed, rerun or restepped."))
    if m.status != Status.CANCELED and at > 1:
        parts.append(_row_form(row.job_id, "rerun", at, "Rerun", query,
                               confirm=f"Rerun job {row.job_id} from its baseline? Its work is kept under refs/logist/rewound/."))
    if m.workspace_commit and m.workspace_commit != m.baseline_commit:
        parts.append(f'<a class="export" href="{esc(job_url(row.job_id))}/export.patch" download>Export patch</a>')
    if person_can(m, "set"):
        boxes = "".join(
            f'<label>{esc(name.removeprefix("max_").replace("_", " "))} <input type="number" name="{name}" min="0" '
            f'step="any" value="{esc(_budget_value(getattr(m.settings, name)))}"></label> ' for name in BUDGET_FIELDS)
        parts.append(f'<details class="budgets"><summary>Budgets…</summary>'
                     + _row_form(row.job_id, "budgets", at, "Set budgets", query, boxes) + "</details>")
    return " ".join(parts)


def _budget_value(value) -> str:
    """A budget as its box shows it: no exponent, no trailing zeros (None: empty, no limit)."""
    if value is None:
        return ""
    return str(value) if isinstance(value, int) else f"{value:f}".rstrip("0").rstrip(".")


def parse_budgets(form: dict[str, str]) -> dict[str, Optional[float]]:
    """The budgets a Budgets form (or the API's body) sets: each given field
    read as its setting's type (:class:`logist.api.JobSpec`'s field, its
    limits included); an empty one is left as it is."""
    out: dict[str, Optional[float]] = {}
    for name in BUDGET_FIELDS:
        text = str(form.get(name, "")).strip()
        if not text:
            continue
        field = JobSpec.model_fields[name]
        try:
            out[name] = TypeAdapter(Annotated[(field.annotation, *field.metadata)]).validate_python(
                _whole(text))
        except ValidationError as exc:
            raise LogistError(f"{name}: {exc.errors()[0]['msg']} ({text[:40]!r})") from None
    return out


def _whole(text: str):
    """``text`` as an int when it is a whole number however written ("7", "7.0", "1e3"); else as it is (refused)."""
    try:
        number = float(text)
    except ValueError:
        return text  # refused as not a number
    return int(number) if number.is_integer() else text


def jobs_page(jobs: Jobs, query: ListQuery = ListQuery()) -> str:
    encoded = query.encoded()
    head, tail = frame(f"Logist jobs in {jobs.path}", "/events" + (f"?{encoded}" if encoded else ""),
                       address="/" + (f"?{encoded}" if encoded else ""))
    # The filter stays outside what a live update replaces (#jobs): what is typed in it is kept.
    return head + filter_form(query) + f'<div id="jobs">{jobs_table(jobs, query)}</div>' + tail


# -- A job's page ----------------------------------------------------------------------------------


def _form(job: Job, action: str, at: int, label: str, fields: str = "") -> str:
    text = " with-text" if "<textarea" in fields else ""  # a form with a text box takes the width, and wraps
    return (
        f'<form method="post" action="{esc(job_url(job.id))}/{action}" class="decide d-{action}{text}">'
        f'<input type="hidden" name="at" value="{at}">{fields}'
        f'<button type="submit" data-action="{action}">{esc(label)}</button></form>'
    )


def decisions_html(job: Job, m: JobManifest, typed: Optional[dict[str, str]] = None) -> str:
    """The forms for what a person can do with the job now; ``typed``: the
    text already in a form's box, by decision (one refused, sent again)."""
    at = m.last_sequence
    typed = typed or {}

    def box(action: str, attributes: str) -> str:
        name = TEXT_FIELDS[action][0]
        # The parser drops one newline right after <textarea>: write one, so a text that begins with one keeps it.
        return f'<textarea name="{name}" {attributes}>\n{esc(typed.get(action, ""))}</textarea>'

    def can(event: str) -> bool:
        return person_can(m, event)

    parts: list[str] = []
    if can("answer") and m.question is not None:
        parts.append(
            f'<div class="ask"><h3>{"Question" if m.question.required else "Question (optional)"}</h3>'
            f'<p class="prose question">{esc(m.question.text)}</p>'
            + _form(job, "answer", at, "Answer", box("answer", 'rows="3" required aria-label="your answer"'))
            + ("" if m.question.required else _form(job, "skip", at, "Skip the question"))
            + "</div>"
        )
    if can("approve-command"):
        if m.pending_command is not None:
            held = f'<p>Held command, exactly as it will run:</p><pre class="held">\n{esc(inert(m.pending_command, one_line=True))}</pre>'
        else:
            held = held_changes_html(job, m)
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
                    box("reject", 'rows="2" required aria-label="what is wrong" placeholder="What is wrong (sent to the Worker)"'))
            + "</div>"
        )
    if can("resubmit"):
        parts.append(
            '<div class="resubmit"><h3>Send it back to work</h3>'
            + _form(job, "resubmit", at, "Resubmit",
                    box("resubmit", 'rows="2" aria-label="feedback" placeholder="What to do differently (optional)"'))
            + "</div>"
        )
    controls = []
    if can("suspend"):
        controls.append(_form(job, "suspend", at, "Suspend"))
    if can("resume"):
        controls.append(_form(job, "resume", at, "Resume"))
    if m.status != Status.CANCELED and at > 1:
        # confirm=ask: the server answers with what the restep would undo, and a form to do it (restep_page).
        controls.append(_form(
            job, "restep", at, "Restep…",
            f'<input type="hidden" name="confirm" value="ask">'
            f'<label>to entry <input type="number" name="to" min="1" max="{at - 1}" value="{at - 1}"></label> ',
        ) + '<p class="hint">Restep goes back to the end of an earlier entry and works on from there: '
            'what the later entries did is undone; you are asked first.</p>')
    if controls:
        parts.append(f'<div class="controls">{"".join(controls)}</div>')
    return f'<section class="decisions" id="decisions" data-at="{at}"><h2>Decisions</h2>{"".join(parts)}</section>'


def held_changes_html(job: Job, m: JobManifest) -> str:
    """Held file changes, each file a unified diff against the workspace's
    content now (:meth:`logist.api.Job.held_diff`: bounded; what is cut is
    said), its text inert and escaped; changes that no longer apply say why."""
    paths = "".join(f"<li><code>{esc(inert(str(c.get('path') if isinstance(c, dict) else c), one_line=True))}</code></li>"
                    for c in m.pending_changes or [])
    try:
        diffs = job.held_diff(m)
    except (InvalidAnswer, LogistError, OSError) as exc:
        return (f"<p>Held file changes:</p><ul>{paths}</ul>"
                f'<p class="notice error" role="alert">They no longer apply to the workspace as it is: {esc(str(exc))}</p>')
    parts = []
    for diff in diffs:
        said = [diff.note] if diff.note else []
        if diff.cut:
            said.append(f"{diff.cut:,} more lines of the diff are not shown")
        note = f'<p class="hint">{esc("; ".join(said))}.</p>' if said else ""
        shown = f'<pre class="diff held-diff">\n{diff_lines_html(inert(diff.diff))}</pre>' if diff.diff else ""
        parts.append(f'<div class="held-file"><h4><code>{esc(inert(diff.path, one_line=True))}</code></h4>{shown}{note}</div>')
    return f"<p>Held file changes, each against the workspace as it is now:</p>{''.join(parts)}"


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


def job_state(job: Job, m: JobManifest, trail: StateTrail, first: int = 1, typed: Optional[dict[str, str]] = None) -> str:
    """The part of a job's page above its timeline, replaced whole when the
    job changes; ``trail``: the states of the entries from ``first`` on;
    ``typed``: text to put back in the forms (:func:`decisions_html`)."""
    asked = job.stop_request()
    pending = (f'<p class="notice" role="status">{esc(asked["action"].capitalize())} asked for '
               f'({esc(asked["requested_at"])}): the runner applies it once the step in progress ends.</p>'
               if asked is not None else "")
    return job_head(job.stored, m, trail, crumb="Logist job",
                    inserted=pending + checks_html(job, m) + decisions_html(job, m, typed),
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
    return f'<p class="pages" id="pages">{where}{": " if links else ""}{" · ".join(links)}</p>'


def first_shown(m: JobManifest, start: Optional[int], page: int) -> int:
    """The first entry a page from ``start`` shows (None: the latest page)."""
    return max(1, m.last_sequence - page + 1) if start is None else max(1, start)


def restep_page(job: Job, at: int, to: int) -> Iterator[str]:
    """What a restep to entry ``to`` of a job at entry ``at`` undoes, and a
    form to do it (or go back): the page a restep form without JavaScript
    gets first (with it, serve.js asks in a dialog)."""
    target = job.stored.entry(to)
    commit = (target.workspace_commit or "")[:12]
    head, tail = frame(f"Restep {job.id} to entry {to}? · Logist", "", None, job_url(job.id))
    yield head
    yield (
        f'<header><p class="crumb">Logist job {esc(job.id)}</p><h1>Restep to entry {to}?</h1></header>'
        f'<section class="confirm"><p>This undoes entries {to + 1}–{at} ({at - to} '
        f'{"entry" if at - to == 1 else "entries"}): the job goes back to its state after entry {to} '
        f'({status_badge(str(target.state_after))})'
        + (f' and its workspace to that entry\'s commit <code>{esc(commit)}</code>' if commit else "")
        + '; the file changes, answers and decisions of the later entries no longer count, and the job works on from there. '
        'The history keeps every entry (a rewind entry is added), the commits undone stay in the workspace\'s git '
        'under refs/logist/rewound/, and the calls made stay counted.</p>'
        + _form(job, "restep", at, f"Restep to entry {to}", f'<input type="hidden" name="to" value="{to}">')
        + f' <a href="{esc(job_url(job.id))}">Cancel: back to the job</a></section>'
    )
    window = read_window(job.stored, max(to + 1, at - PAGE + 1), at)
    try:
        yield f'<h2>What it undoes</h2>{_pages_html(job, window.first, window.shown, window.last, PAGE)}'
        yield timeline_open(window.shown - window.first + 1)
        yield from window.rows()
        yield TIMELINE_CLOSE
        yield from window.continued_rows()
    finally:
        window.close()
    yield tail


def job_page(job: Job, notice: Optional[str] = None, start: Optional[int] = None, page: int = PAGE,
             kept: Optional[tuple[str, str]] = None) -> Iterator[str]:
    """A job's page, piece by piece: the entries from ``start``, ``page`` of
    them, by default the last ones, read from their place in the history
    (:func:`logist.views.window.read_window`: what comes before them is not
    read). A page that ends with the last entry follows the job live, new
    entries included; an earlier one follows its state only. ``kept``: a
    refused decision and the text typed for it, shown beside the state
    (:func:`kept_html`) and put back in its form if the job still offers it."""
    m = job.manifest()
    first = first_shown(m, start, page)
    latest = first + page > m.last_sequence
    window = read_window(job.stored, first, None if latest else first + page - 1)
    try:
        stream = job_url(job.id) + "/events" + (f"?from={first}" if latest else f"?from={first}&until={window.shown}")
        head, tail = frame(page_title(job, m), stream, window.shown if latest else None, job_url(job.id))
        yield head
        if notice:
            yield notice_html(notice)
        typed = {}
        if kept is not None and kept[1] and kept[0] in TEXT_FIELDS:
            again = person_can(m, kept[0])
            typed = {kept[0]: kept[1]} if again else {}
            yield f'<div id="kept">{kept_html(kept[0], kept[1], str(m.status), again)}</div>'
        else:
            yield '<div id="kept"></div>'
        yield f'<div id="state">{job_state(job, m, window.trail, first, typed)}</div>'
        yield _pages_html(job, first, window.shown, window.last, page)
        yield timeline_open(window.last)
        yield from window.rows()
        yield TIMELINE_CLOSE
        yield from window.continued_rows()
        yield tail
    finally:
        window.close()


# -- Validation: a page's tag ----------------------------------------------------------------------
#
# A page is answered with a strong ETag made from what determines its bytes,
# read without rendering it (a few stats and the manifest), and
# ``Cache-Control: no-cache, private``: the browser keeps it, asks every time
# (If-None-Match), and gets 304 while nothing it shows has changed. Every
# form a page carries says ``at`` (the job's last entry), which the manifest
# holds: a job that moved on has another tag, so a 304 never brings back a
# stale form. The tag is computed before the page is rendered: a change in
# between gives the page a newer state than its tag, which the next request
# then fails to match (a full page again), never the other way round.


def _stat(path) -> Optional[tuple[int, int, int]]:
    try:
        found = os.stat(path)
    except OSError:
        return None
    return (found.st_size, found.st_ino, found.st_mtime_ns)


def _tag(parts: Iterable[object]) -> str:
    digest = hashlib.sha256(repr((*(static.url(name) for name in static.FILES), *parts)).encode("utf-8", "surrogateescape"))
    return f'"{digest.hexdigest()[:32]}"'


def job_page_tag(job: Job, start: Optional[int], page: int, gzip: bool) -> str:
    """The ETag of :func:`job_page` (no notice, nothing kept) for ``start``
    and ``page``, as sent gzip-compressed or not: the assets' names, the
    manifest's bytes (state, the last entry: every form's ``at``), the
    history's size and identity (the rows), a stop asked for, the
    workspace's commit (whether the checks' run is current), and each file
    a held change names (the diff against the workspace's content)."""
    history, manifest_path = job.state_files
    try:
        manifest_bytes = manifest_path.read_bytes()
    except OSError:
        manifest_bytes = b""
    m = job.manifest()
    try:
        head = job.stored.repo.head()
    except Exception:  # noqa: BLE001 - a workspace git cannot read shows as such; the tag just differs
        head = None
    held = []
    for change in m.pending_changes or []:
        path = change.get("path") if isinstance(change, dict) else None
        if isinstance(path, str):
            held.append((path, _stat(os.path.join(job.workspace, path))))
    return _tag(("job", job.id, start, page, gzip, hashlib.sha256(manifest_bytes).hexdigest(), _stat(history),
                 _stat(job.stored.stop_request_path), head, held))


def jobs_page_tag(jobs: Jobs, query: str, gzip: bool) -> str:
    """The ETag of the list of jobs for ``query`` (its filter and order):
    the jobs index and each job's history and manifest (size, identity, time)."""
    return _tag(("jobs", query, gzip, *(_stat(path) for path in jobs.state_files())))


def tag_matches(header: Optional[str], tag: str) -> bool:
    """Whether an If-None-Match header names ``tag`` (or is ``*``); a weak
    ``W/`` tag compares by its value, as RFC 9110 says for If-None-Match."""
    if not header:
        return False
    for part in header.split(","):
        given = part.strip()
        if given == "*" or given.removeprefix("W/") == tag:
            return True
    return False


def page_title(job: Job, m: JobManifest) -> str:
    return f"{job.id}: {m.status} · Logist"


def job_update(job: Job, follower: Optional[Follower], first: int, until: Optional[int],
               page: int = PAGE) -> tuple[list[tuple[int, str]], str, str]:
    """The rows of the entries ``follower`` has not sent yet (None: no rows:
    an earlier page, entries ``first`` to ``until``), the job's state part,
    and what else on the page counts the entries or names the state (JSON:
    the tab's ``title``, the ``pages`` line, the timeline's ``count``)."""
    m = job.manifest()
    if follower is not None:
        rows = follower.update()
        count = max([m.last_sequence, *(sequence for sequence, _ in rows)])
        shown, trail = count, follower.trail
    else:
        window = read_window(job.stored, first, until)
        window.close()
        rows, shown, count, trail = [], window.shown, window.last, window.trail
    counts = {"title": page_title(job, m), "pages": _pages_html(job, first, shown, count, page), "count": count}
    return rows, job_state(job, m, trail, first), json.dumps(counts)
