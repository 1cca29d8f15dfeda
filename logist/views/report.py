"""A job at a glance: one self-contained HTML file, and an index of all jobs.

``logist job report`` writes ``<job>/report.html``: the job's facts, totals
and budget use, the states it passed through, and its timeline, one row per
history entry (time, who, action, summary, tokens, cost, commit) that opens
to the prompt, the answer, what Logist did and the step's diff.
``logist report`` writes ``<jobs-dir>/index.html`` listing every job with
its status, and refreshes each job's report so every link resolves. Both
are written on demand, never by a step.

Choices worth knowing before changing this file (the HTML pieces and the
page's security policy are in :mod:`logist.views.html`):

* The rows are static HTML and each opens as a ``<details>``: the page
  reads without JavaScript, and a closed ``<details>`` costs the browser
  parsing but no layout, so a 1,000-step page opens at once. The script
  (optional) only opens the step named in the URL (``#step-N``), expands
  or collapses all, and assembles a step's full prompt on demand.
* A prompt repeats the whole conversation so far, so a page that embedded
  every prompt whole would grow with the square of a turn's length. Each
  step embeds only what is new, as its history entry records it (see
  :mod:`logist.views.prompt_tracker`): the whole prompt where a
  conversation starts, then the messages each call added; "Show the full
  prompt" follows the chain of ``continues`` inside the page.
* The page is written as the history is read, one entry at a time, into a
  new file that replaces the old one whole: a 1 GB history needs no more
  memory than a small one (``bench/report_scaling.py --memory`` measures
  it). The history is read twice, because the page says before its
  timeline what only the whole history tells (the states passed through,
  how many entries); the second read stops at the entry the first one
  ended with.
* Diffs come from the workspace's git repository, all of a job's from one
  git process whose output is read as the timeline is written
  (:meth:`logist.workspace.repository.Workspace.iter_diffs`), each cut at
  :data:`logist.views.html.DIFF_LIMIT`.
"""

from __future__ import annotations

import html
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator, Optional

from ..secrets.redact import known_secrets, redact
from ..store.atomic import atomic_writer
from ..store.entries import ANSWER_KINDS, HistoryEntry
from ..store.jobsdir import JobsDir
from ..store.session import JobFiles
from ..store.manifest import JobManifest
from .html import DIFF_LIMIT, esc, facts_html, page, page_parts, short_time, states_html, status_badge, step_html
from .prompt_tracker import PromptTracker
from .summary import JobSummary, StateTrail, budgets, cost_known, one_line, step_row
from ..errors import LogistError
from ..workspace.diffs import Patch

INDEX_NAME = "index.html"
#: States the page lists at most (the first and the last half of them).
STATES_SHOWN = 400


def diff_pair(previous: Optional[str], commit: Optional[str]) -> tuple[Optional[tuple[str, str]], Optional[str]]:
    """The commits an entry's diff compares (None: it changed nothing), and
    the commit the next entry is compared with."""
    pair = (previous, commit) if previous and commit and commit != previous else None
    return pair, commit or previous


class _Scan:
    """The first pass over the history: what the page says before its
    timeline (the states, how many entries) and the pairs of commits to diff."""

    def __init__(self, job: JobFiles):
        self.job = job
        self.count = 0
        self.last = 0
        self.trail = StateTrail(STATES_SHOWN)

    def pairs(self) -> Iterator[tuple[str, str]]:
        previous: Optional[str] = None
        for data in self.job.entry_data():
            self.count += 1
            self.last = data["sequence"]
            self.trail.add(data["sequence"], data["timestamp"], data["state_before"], data["state_after"])
            pair, previous = diff_pair(previous, data.get("workspace_commit"))
            if pair is not None:
                yield pair


def timeline(job: JobFiles) -> tuple[_Scan, Iterator[tuple[int, str]]]:
    """The first pass (done when this returns) and the timeline's rows, each
    ``(sequence, html)``, read one entry (and one diff) at a time, up to the
    last entry the pass saw. ``logist serve``'s job page shows a part of
    the timeline, made by :func:`timeline_rows` too (:mod:`logist.views.window`)."""
    scan = _Scan(job)
    pairs = scan.pairs()
    # Diffs come from one git process, read as the timeline is written.
    diffs = job.repo.iter_diffs(pairs, DIFF_LIMIT) if job.repo.exists() else None
    for _ in pairs:  # no workspace: the scan still counts
        pass

    def entries() -> Iterator[HistoryEntry]:
        for entry in job.entries():
            if entry.sequence > scan.last:
                return  # recorded since the scan (the next report shows it)
            yield entry

    return scan, timeline_rows(job, entries(), PromptTracker(), None, diffs)


def timeline_rows(job: JobFiles, entries: Iterable[HistoryEntry], tracker: PromptTracker, previous: Optional[str],
                  diffs: Optional[Iterator[Patch]]) -> Iterator[tuple[int, str]]:
    """The timeline's row of each of ``entries`` (in order), each ``(sequence,
    html)``: ``tracker`` has seen the entries before them (whose command
    outputs their prompts may repeat), ``previous`` is the last workspace
    commit before them (what the first one's diff compares with), and
    ``diffs`` gives the patch of each of their pairs of commits
    (:func:`diff_pair`) in order (None: no workspace, no diff section).
    The one maker of the rows of ``report.html`` and of ``logist serve``'s pages."""
    for entry in entries:
        pair, previous = diff_pair(previous, entry.workspace_commit)
        diff, cut = None, 0
        if diffs is not None and pair is not None:
            patch = next(diffs)
            diff, cut = (f"(no diff: {patch.error})", 0) if patch.error else (patch.text, patch.cut)
        elif diffs is not None and entry.kind in ANSWER_KINDS:
            diff = ""  # an answer that changed nothing
        yield entry.sequence, step_html(job.id, entry, step_row(entry), tracker, diff, cut)


def job_head(job: JobFiles, m: JobManifest, trail: StateTrail, crumb: str = "Logist job report", inserted: str = "",
             before: int = 0) -> str:
    """What a job's page says before its timeline: the objective, the facts
    and budgets, the states ``trail`` passed through (of the entries after
    ``before``: a page showing a part of the timeline); ``inserted`` (HTML)
    goes right after the objective."""
    summary = JobSummary(job.id, m, rows=[], states=trail.visits, budgets=budgets(m))
    return (
        f'<header><p class="crumb">{esc(crumb)}</p><h1><span class="id">{esc(job.id)}</span> {status_badge(str(m.status))}</h1>'
        f'<p class="objective prose">{esc(m.objective)}</p>'
        + (f'<details class="more"><summary>details and acceptance criteria</summary><p class="prose">{esc(m.details)}</p>'
           + "<ul>" + "".join(f"<li>{esc(c)}</li>" for c in m.acceptance_criteria) + "</ul></details>"
           if m.details or m.acceptance_criteria else "")
        + "</header>" + inserted
        + facts_html(summary, job) + states_html(trail.visits, trail.omitted, trail.gap, before)
    )


def timeline_open(count: int) -> str:
    """The timeline's heading and column names, up to its first row."""
    return (
        f'<section><h2>Timeline <small>{count} entries</small></h2>'
        '<p class="tools"><button type="button" id="expand-all">Expand all</button> '
        '<button type="button" id="collapse-all">Collapse all</button></p>'
        '<div class="head"><span>#</span><span>time (UTC)</span><span>who</span><span>action</span><span>state after</span>'
        '<span>summary</span><span>tokens</span><span>cost</span><span>commit</span></div>'
        '<div class="steps" id="steps">'
    )


TIMELINE_CLOSE = "</div></section>"


def write_report(job: JobFiles, write: Callable[[str], object]) -> None:
    """Write the job's report piece by piece, holding one history entry (and
    one diff) at a time: the history is read twice, once for what the page
    says before its timeline, then for the timeline."""
    m = job.manifest()
    scan, rows = timeline(job)
    head, tail = page_parts(f"{job.id}: {m.status} · Logist")
    write(head)
    write(job_head(job, m, scan.trail))
    write(timeline_open(scan.count))
    for _sequence, row in rows:
        write(row)
    write(TIMELINE_CLOSE + tail)


def render_job_report(job: JobFiles) -> str:
    """The job's report as one HTML document, in memory (for tests and small jobs)."""
    parts: list[str] = []
    write_report(job, parts.append)
    return "".join(parts)


def html_secrets() -> list[str]:
    """The known secrets and their HTML-escaped spellings: the last guard of
    the pages' writers, behind :func:`logist.views.html.esc`, which redacts
    each value before it escapes it."""
    secrets = known_secrets()
    escaped = [html.escape(secret, quote=True) for secret in secrets]
    return sorted(set(secrets) | set(escaped), key=len, reverse=True)


def write_job_report(job: JobFiles, path: Optional[Path] = None) -> Path:
    """Write the job's report (default ``<job>/report.html``), streamed into
    a new file that replaces the old one whole; returns its path."""
    target = Path(path) if path is not None else job.report_path
    with atomic_writer(target) as handle:
        secrets = html_secrets()  # none is written (logist.secrets.redact)
        write_report(job, lambda text: handle.write(redact(text, secrets).encode("utf-8", errors="replace")))
    return target


# -- The index of a jobs directory -----------------------------------------------------------------


@dataclass
class IndexRow:
    job_id: str
    status: str
    report: Optional[Path]
    manifest: Optional[JobManifest] = None
    error: Optional[str] = None


def write_index(jobs: JobsDir, path: Optional[Path] = None, *, reports: bool = True) -> tuple[Path, list[IndexRow]]:
    """Write the index page (default ``<jobs-dir>/index.html``) and, unless
    ``reports`` is False, every job's report first, so each link resolves.
    A job that cannot be read is listed with the reason and no link."""
    target = Path(path) if path is not None else jobs.path / INDEX_NAME
    rows = index_rows(jobs, write_job_report if reports else (lambda job: job.report_path))
    with atomic_writer(target) as handle:
        page_text = render_index(jobs, rows, target.parent, jobs.read_index().current_job_id)
        handle.write(redact(page_text, html_secrets()).encode("utf-8", errors="replace"))
    return target, rows


def index_rows(jobs: JobsDir, report: Callable[[JobFiles], Path]) -> list[IndexRow]:
    """A row for each job of the index, in its order, with the path
    ``report(job)`` gives (None when there is no file there). A job that
    cannot be read is a row saying why."""
    index = jobs.read_index()
    rows: list[IndexRow] = []
    for job_id in index.jobs:
        try:
            job = jobs.job(job_id, index)
            manifest = job.manifest()
            path = report(job)
            rows.append(IndexRow(job_id, str(manifest.status), path if path.exists() else None, manifest))
        except (LogistError, OSError, ValueError) as exc:
            rows.append(IndexRow(job_id, "UNREADABLE", None, error=str(exc)))
    return rows


def render_index(jobs: JobsDir, rows: list[IndexRow], base: Path, current: Optional[str] = None) -> str:
    def link(row: IndexRow) -> Optional[str]:
        if row.report is None:
            return None
        return Path(os.path.relpath(row.report, Path(base).resolve())).as_posix()

    return page(f"Logist jobs in {jobs.path}", index_body(jobs, rows, link, current))


#: The jobs table's columns: the key a list sorts by, and the heading.
INDEX_COLUMNS = (("job", "job"), ("status", "status"), ("turn", "whose turn"), ("steps", "steps"),
                 ("tokens", "tokens"), ("cost", "cost"), ("updated", "updated (UTC)"), ("objective", "objective"))


def index_body(jobs: JobsDir, rows: list[IndexRow], link: Callable[[IndexRow], Optional[str]],
               current: Optional[str] = None, column: Optional[tuple[str, str, Callable[[IndexRow], str]]] = None,
               heading: Optional[Callable[[str, str], str]] = None, actions: Optional[Callable[[IndexRow], str]] = None,
               total: Optional[int] = None) -> str:
    """The jobs index: a header with the tally by status, and a table of one
    row per job, its name a link to ``link(row)`` (None: no link), and
    ``column``, (key, heading, HTML of a row's cell), after its status.
    ``heading(key, text)``: a column's heading as HTML (a link that sorts
    by it; default the text); ``actions``: a last cell of each row (its
    buttons); ``total``: the jobs there are, when ``rows`` are some of them.
    ``index.html`` and ``logist serve``'s list of jobs both show it."""
    heading = heading or (lambda key, text: esc(text))
    counts: dict[str, int] = {}
    for row in rows:
        counts[row.status] = counts.get(row.status, 0) + 1
    lines = []
    for row in rows:
        m = row.manifest
        href = link(row)
        if href is not None:
            name = f'<a href="{esc(href)}">{esc(row.job_id)}</a>'
        else:
            name = esc(row.job_id)
        mark = ' <span class="current" title="the current job">current</span>' if row.job_id == current else ""
        if m is None:
            cells = f'<td colspan="6" class="error">{esc(row.error)}</td>'
        else:
            cost = f"${m.totals.cost_usd:.4f}" if cost_known(m.totals) else ""
            cells = (
                f"<td>{esc(m.turn.role)}</td><td>{m.calls} / {m.settings.max_steps}</td><td>{m.totals.tokens}</td>"
                f"<td>{cost}</td><td>{esc(short_time(m.updated_at))}</td>"
                f'<td class="prose">{esc(one_line(m.objective, 120))}</td>'
            )
        added = f'<td class="prose">{column[2](row)}</td>' if column else ""
        buttons = f'<td class="actions">{actions(row)}</td>' if actions else ""
        lines.append(f'<tr data-job="{esc(row.job_id)}" data-status="{esc(row.status)}"><td>{name}{mark}</td><td>{status_badge(row.status)}</td>{added}{cells}{buttons}</tr>')
    tally = " ".join(f"{status_badge(status)} {count}" for status, count in sorted(counts.items()))
    headings = [f"<th>{heading(key, text)}</th>" for key, text in INDEX_COLUMNS]
    if column:
        headings.insert(2, f"<th>{heading(column[0], column[1])}</th>")
    if actions:
        headings.append("<th>actions</th>")
    shown = f"{len(rows)} of {total} jobs shown" if total is not None and total != len(rows) else \
        f'{len(rows)} job{"s" if len(rows) != 1 else ""}'
    return (
        f'<header><p class="crumb">Logist</p><h1>Jobs in <code>{esc(jobs.path)}</code></h1><p>{shown} {tally}</p></header>'
        f'<table class="index"><thead><tr>{"".join(headings)}</tr></thead>'
        f'<tbody>{"".join(lines)}</tbody></table>'
    )
