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
  step embeds only what is new (see :mod:`logist.views.prompt_tracker`):
  the system prompt where it first appears, and the messages added since
  the call whose conversation it continues; "Show the full prompt" follows
  that chain inside the page.
* Diffs come from the workspace's git repository, all of a job's in one git
  process (:meth:`logist.workspace.Workspace.diffs`), each cut at
  :data:`logist.views.html.DIFF_LIMIT`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ..store.atomic import atomic_write
from ..store.entries import ANSWER_KINDS
from ..store.history import HistoryEntry, load_history
from ..store.jobsdir import Job, JobsDir
from ..store.manifest import JobManifest
from .html import esc, facts_html, page, short_time, states_html, status_badge, step_html
from .prompt_tracker import PromptTracker
from .summary import cost_known, one_line, summarise

REPORT_NAME = "report.html"
INDEX_NAME = "index.html"


def _step_diffs(job: Job, entries: list[HistoryEntry]) -> Optional[dict[int, str]]:
    """Each entry's change: its commit against the previous entry's. None
    when the workspace is gone; a diff git cannot make says why instead."""
    from ..errors import LogistError

    pairs: list[tuple[str, str]] = []
    sequences: list[int] = []
    previous: Optional[str] = None
    for entry in entries:
        commit = entry.workspace_commit
        if previous and commit and commit != previous:
            pairs.append((previous, commit))
            sequences.append(entry.sequence)
        previous = commit or previous
    if not job.repo.exists():
        return None
    try:
        patches = job.repo.diffs(pairs)
    except LogistError:  # a commit is missing: find which, diff the others
        patches = []
        for old, new in pairs:
            try:
                patches.append(job.repo.diff(old, new))
            except LogistError as exc:
                patches.append(f"(no diff: {exc})")
    return dict(zip(sequences, patches))


def render_job_report(job: Job) -> str:
    """The job's report as one HTML document."""
    entries = load_history(job.dir).interactions
    summary = summarise(job, entries)
    m = summary.manifest
    diffs = _step_diffs(job, entries)
    tracker = PromptTracker(limit=None)
    def diff_of(entry: HistoryEntry) -> Optional[str]:
        if diffs is None:
            return None
        return diffs.get(entry.sequence, "" if entry.kind in ANSWER_KINDS else None)

    steps = [step_html(job.id, entry, row, tracker, diff_of(entry)) for entry, row in zip(entries, summary.rows)]
    header = (
        f'<header><p class="crumb">Logist job report</p><h1><span class="id">{esc(job.id)}</span> {status_badge(str(m.status))}</h1>'
        f'<p class="objective prose">{esc(m.objective)}</p>'
        + (f'<details class="more"><summary>details and acceptance criteria</summary><p class="prose">{esc(m.details)}</p>'
           + "<ul>" + "".join(f"<li>{esc(c)}</li>" for c in m.acceptance_criteria) + "</ul></details>"
           if m.details or m.acceptance_criteria else "")
        + "</header>"
    )
    timeline = (
        f'<section><h2>Timeline <small>{len(entries)} entries</small></h2>'
        '<p class="tools"><button type="button" id="expand-all">Expand all</button> '
        '<button type="button" id="collapse-all">Collapse all</button></p>'
        '<div class="head"><span>#</span><span>time (UTC)</span><span>who</span><span>action</span><span>state after</span>'
        '<span>summary</span><span>tokens</span><span>cost</span><span>commit</span></div>'
        f'<div class="steps" id="steps">{"".join(steps)}</div></section>'
    )
    body = header + facts_html(summary, job) + states_html(summary.states) + timeline
    return page(f"{job.id}: {m.status} · Logist", body)


def write_job_report(job: Job, path: Optional[Path] = None) -> Path:
    """Write the job's report (default ``<job>/report.html``); returns its path."""
    target = Path(path) if path is not None else job.dir / REPORT_NAME
    atomic_write(target, render_job_report(job))
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
    from ..errors import LogistError

    target = Path(path) if path is not None else jobs.path / INDEX_NAME
    index = jobs.read_index()
    rows: list[IndexRow] = []
    for job_id in index.jobs:
        try:
            job = jobs.job(job_id)
            manifest = job.manifest()
            report = write_job_report(job) if reports else job.dir / REPORT_NAME
            rows.append(IndexRow(job_id, str(manifest.status), report if report.exists() else None, manifest))
        except (LogistError, OSError, ValueError) as exc:
            rows.append(IndexRow(job_id, "UNREADABLE", None, error=str(exc)))
    atomic_write(target, render_index(jobs, rows, target.parent, index.current_job_id))
    return target, rows


def render_index(jobs: JobsDir, rows: list[IndexRow], base: Path, current: Optional[str] = None) -> str:
    counts: dict[str, int] = {}
    for row in rows:
        counts[row.status] = counts.get(row.status, 0) + 1
    lines = []
    for row in rows:
        m = row.manifest
        if row.report is not None:
            href = Path(os.path.relpath(row.report, Path(base).resolve())).as_posix()
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
        lines.append(f'<tr data-job="{esc(row.job_id)}" data-status="{esc(row.status)}"><td>{name}{mark}</td><td>{status_badge(row.status)}</td>{cells}</tr>')
    tally = " ".join(f"{status_badge(status)} {count}" for status, count in sorted(counts.items()))
    body = (
        f'<header><p class="crumb">Logist</p><h1>Jobs in <code>{esc(jobs.path)}</code></h1><p>{len(rows)} job{"s" if len(rows) != 1 else ""} {tally}</p></header>'
        '<table class="index"><thead><tr><th>job</th><th>status</th><th>whose turn</th><th>steps</th><th>tokens</th>'
        '<th>cost</th><th>updated (UTC)</th><th>objective</th></tr></thead>'
        f'<tbody>{"".join(lines)}</tbody></table>'
    )
    return page(f"Logist jobs in {jobs.path}", body)
