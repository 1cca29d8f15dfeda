"""A job at a glance: one self-contained HTML file, and an index of all jobs.

``logist job report`` writes ``<job>/report.html``: the job's facts, totals
and budget use, the states it passed through, and its timeline, one row per
history entry (time, who, action, summary, tokens, cost, commit) that opens
to the prompt, the answer, what Logist did and the step's diff.
``logist report`` writes ``<jobs-dir>/index.html`` listing every job with
its status, and refreshes each job's report so every link resolves.
:func:`summarise` is the same summary as data; ``job show`` prints it.

Choices worth knowing before changing this file:

* Plain HTML built with :func:`html.escape` on every value (no template
  engine: the page is a handful of fixed shapes). Everything that came from
  a model, a person or a file is text, never markup; on top of that a
  Content-Security-Policy allows only the page's own style and script (by
  hash), so the page can neither load anything from the network nor run a
  script it did not ship.
* The rows are static HTML and each opens as a ``<details>``: the page
  reads without JavaScript, and a closed ``<details>`` costs the browser
  parsing but no layout, so a 1,000-step page opens at once. The script
  (optional) only opens the step named in the URL (``#step-N``), expands
  or collapses all, and assembles a step's full prompt on demand.
* A prompt repeats the whole conversation so far, so a page that embedded
  every prompt whole would grow with the square of a turn's length. Each
  step embeds only what is new (see :class:`logist.views.transcript.PromptTracker`):
  the system prompt where it first appears, and the messages added since
  the call whose conversation it continues; "Show the full prompt" follows
  that chain inside the page.
* Diffs come from the workspace's git repository, all of a job's in one git
  process (:meth:`logist.workspace.Workspace.diffs`), each cut at :data:`DIFF_LIMIT`.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ..store.atomic import atomic_write
from ..store.history import HistoryEntry, load_history
from ..store.jobsdir import Job, JobsDir
from ..store.manifest import JobManifest
from .transcript import PromptTracker, action_of, actor_of

REPORT_NAME = "report.html"
INDEX_NAME = "index.html"
#: Characters of one step's diff embedded in the page; the rest is cut.
DIFF_LIMIT = 100_000
ROW_TEXT_LIMIT = 160


# -- The summary, as data --------------------------------------------------------------------------


@dataclass
class StepRow:
    """One history entry as a line of a timeline."""

    sequence: int
    timestamp: str
    kind: str
    actor: str
    action: str
    state_before: str
    state_after: str
    summary: str
    tokens: Optional[int]
    cost_usd: Optional[float]
    commit: Optional[str]


@dataclass
class StateVisit:
    status: str
    sequence: int
    timestamp: str


@dataclass
class Budget:
    name: str
    used: float
    limit: Optional[float]

    @property
    def fraction(self) -> Optional[float]:
        if not self.limit:
            return None
        return self.used / self.limit


@dataclass
class JobSummary:
    job_id: str
    manifest: JobManifest
    rows: list[StepRow]
    states: list[StateVisit]
    budgets: list[Budget]


def _answer_fields(entry: HistoryEntry) -> dict:
    from ..protocol import extract_json_text

    raw = entry.response.raw_response if entry.response else None
    if not raw or entry.kind != "llm_call":
        return {}
    try:
        data = json.loads(extract_json_text(raw))
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def entry_summary(entry: HistoryEntry) -> str:
    """What happened in one entry, in one line of prose."""
    if entry.response is not None:
        if entry.command is not None:
            label = {"ask": " (held for a person)", "deny": " (refused by the policy)"}.get(entry.command.decision, "")
            if entry.command.decision == "run":
                label = f" (exit {entry.command.exit_code})" if not entry.command.timed_out else " (timed out)"
            return f"$ {entry.command.command}{label}"
        if entry.response.status != "SUCCESS":
            return entry.response.error or entry.response.status
        if entry.kind == "compaction":
            return "summarised the conversation"
        if entry.response.summary_for_supervisor:
            return entry.response.summary_for_supervisor
        fields = _answer_fields(entry)
        for key in ("message", "question", "command"):
            if isinstance(fields.get(key), str):
                return fields[key]
        return ""
    if entry.user_input is not None:
        text = entry.user_input.text or ""
        if entry.command is not None:
            text = f"$ {entry.command.command} (exit {entry.command.exit_code})"
        return text
    return entry.note or ""


def step_row(entry: HistoryEntry) -> StepRow:
    usage = entry.usage
    tokens = None
    if usage is not None and usage.prompt_tokens is not None:
        tokens = (usage.prompt_tokens or 0) + (usage.completion_tokens or 0)
    return StepRow(
        sequence=entry.sequence,
        timestamp=entry.timestamp,
        kind=entry.kind,
        actor=actor_of(entry),
        action=action_of(entry),
        state_before=entry.state_before,
        state_after=entry.state_after,
        summary=entry_summary(entry),
        tokens=tokens,
        cost_usd=usage.cost_usd if usage else None,
        commit=entry.workspace_commit,
    )


def states_passed(entries: list[HistoryEntry]) -> list[StateVisit]:
    """Each state the job entered, in order, with the entry that entered it."""
    visits: list[StateVisit] = []
    for entry in entries:
        if not visits:
            visits.append(StateVisit(entry.state_before, entry.sequence, entry.timestamp))
        if entry.state_after != visits[-1].status:
            visits.append(StateVisit(entry.state_after, entry.sequence, entry.timestamp))
    return visits


def budgets(manifest: JobManifest) -> list[Budget]:
    s, t = manifest.settings, manifest.totals
    return [
        Budget("steps", manifest.steps, s.max_steps),
        Budget("cost_usd", t.cost_usd, s.max_cost_usd),
        Budget("tokens", t.tokens, s.max_tokens),
        Budget("wall_seconds", t.wall_seconds, s.max_wall_seconds),
    ]


def summarise(job: Job, entries: Optional[list[HistoryEntry]] = None) -> JobSummary:
    """The job's summary: its rows, the states it passed through, budget use."""
    manifest = job.manifest()
    if entries is None:
        entries = load_history(job.dir).interactions
    return JobSummary(
        job_id=job.id,
        manifest=manifest,
        rows=[step_row(e) for e in entries],
        states=states_passed(entries),
        budgets=budgets(manifest),
    )


# -- HTML pieces -----------------------------------------------------------------------------------


def esc(value: object) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _pre(text: str, cls: str = "") -> str:
    # The parser drops one newline right after <pre>: write one, so the
    # text (and the full prompt the script assembles from it) is exact.
    attr = f' class="{cls}"' if cls else ""
    return f"<pre{attr}>\n{esc(text)}</pre>"


def _short(text: str, limit: int = ROW_TEXT_LIMIT) -> str:
    flat = " ".join((text or "").split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _time(timestamp: str) -> str:
    return timestamp[:19].replace("T", " ")


def _money(value: Optional[float]) -> str:
    return "" if value is None else f"${value:.4f}"


def _status_badge(status: str) -> str:
    return f'<span class="status s-{esc(status)}">{esc(status)}</span>'


def _diff_html(diff: str, sequence: int, job_id: str) -> str:
    cut = ""
    if len(diff) > DIFF_LIMIT:
        cut = (
            f"\n… {len(diff) - DIFF_LIMIT} more characters cut; "
            f"logist job diff {job_id} --step {sequence} shows them all"
        )
        diff = diff[:DIFF_LIMIT]
    lines = []
    for line in diff.splitlines():
        if line.startswith("diff --git"):
            cls = "f"
        elif line.startswith(("+++", "---", "index ", "new file", "deleted file", "similarity", "rename ")):
            cls = "m"
        elif line.startswith("+"):
            cls = "a"
        elif line.startswith("-"):
            cls = "d"
        elif line.startswith("@@"):
            cls = "h"
        else:
            lines.append(esc(line))
            continue
        lines.append(f'<span class="{cls}">{esc(line)}</span>')
    return '<pre class="diff">\n' + "\n".join(lines) + esc(cut) + "</pre>"


def _message_html(role: str, content: str, extra: str = "") -> str:
    return f'<div class="msg" data-role="{esc(role)}"{extra}><div class="who">{esc(role)}</div>{_pre(content)}</div>'


def _prompt_html(entry: HistoryEntry, tracker: PromptTracker) -> tuple[str, str]:
    """The prompt section and the attributes that link it to earlier steps."""
    view = tracker.view(entry)
    if view is None or entry.request is None:
        return "", ""
    meta = entry.request.metadata
    attrs = ""
    parts = ['<section class="prompt"><h3>Prompt</h3>']
    facts = [f"model {esc(meta.model)}"]
    if meta.temperature is not None:
        facts.append(f"temperature {meta.temperature:g}")
    if view.system is not None:
        system_at = view.system_seen_in or entry.sequence
        attrs += f' data-system="{system_at}"'
        if view.system_seen_in is not None:
            facts.append(f'system prompt <a href="#step-{system_at}">as in #{system_at}</a>')
    if view.continues is not None:
        attrs += f' data-continues="{view.continues}"'
        facts.append(f'continues the conversation of <a href="#step-{view.continues}">#{view.continues}</a>; new:')
    else:
        facts.append(f"a new conversation of {len(view.messages)} message{'s' if len(view.messages) != 1 else ''}:")
    parts.append(f'<p class="meta">{" · ".join(facts)}</p>')
    if view.system is not None and view.system_seen_in is None:
        parts.append(
            '<details class="system"><summary>system prompt</summary>'
            f'{_message_html("system", view.system, " data-system-text")}</details>'
        )
    for message in view.messages:
        parts.append(_message_html(message["role"], message["content"], " data-new"))
    if view.continues is not None or view.system_seen_in is not None:
        parts.append('<button type="button" class="full-prompt">Show the full prompt</button><div class="full"></div>')
    parts.append("</section>")
    return "".join(parts), attrs


def _answer_html(entry: HistoryEntry) -> str:
    response = entry.response
    if response is None:
        return ""
    parts = ['<section class="answer"><h3>Answer</h3>']
    if response.raw_response is None:
        parts.append(f'<p class="error">No answer: {esc(response.error or "the call failed")}</p></section>')
        return "".join(parts)
    fields = _answer_fields(entry)
    if fields:
        parts.append("<dl>")
        for key, value in fields.items():
            if key == "file_changes" and isinstance(value, list):
                items = []
                for change in value:
                    if not isinstance(change, dict):
                        continue
                    what = "delete" if change.get("delete") else ("write" if "content" in change else "replace in")
                    items.append(f"<li>{what} <code>{esc(change.get('path'))}</code></li>")
                parts.append(f"<dt>file_changes</dt><dd><ul>{''.join(items)}</ul></dd>")
            elif isinstance(value, str):
                parts.append(f'<dt>{esc(key)}</dt><dd class="prose">{esc(value)}</dd>')
            else:
                parts.append(f"<dt>{esc(key)}</dt><dd><code>{esc(json.dumps(value, ensure_ascii=False))}</code></dd>")
        parts.append("</dl>")
    parts.append(
        f'<details class="raw-answer"{"" if fields else " open"}><summary>the answer as received</summary>'
        f'{_pre(response.raw_response, "raw")}</details>'
    )
    parts.append("</section>")
    return "".join(parts)


def _outcome_html(entry: HistoryEntry) -> str:
    items = []
    response = entry.response
    if entry.user_input is not None:
        text = entry.user_input.text
        items.append(
            f"<li>{esc(entry.user_input.action)}"
            + (f': <span class="prose">{esc(text)}</span>' if text else "")
            + "</li>"
        )
    if response is not None and response.status in ("INVALID", "ERROR"):
        what = "The answer was refused; nothing from it was applied" if response.status == "INVALID" else "The call failed"
        items.append(f'<li class="error">{what}: {esc(response.error)}</li>')
    if response is not None and response.files_changed:
        files = ", ".join(f"<code>{esc(p)}</code>" for p in response.files_changed)
        items.append(f"<li>Files changed: {files}</li>")
    command = entry.command
    if command is not None:
        if command.decision == "run":
            how = "timed out" if command.timed_out else f"exit {command.exit_code}"
            items.append(
                f"<li>Ran <code>{esc(command.command)}</code> ({esc(how)}, {command.duration_seconds:g} s); "
                f"the output as the model is shown it:{_pre(command.output or '(no output)', 'output')}</li>"
            )
        elif command.decision == "ask":
            items.append(f"<li>Held <code>{esc(command.command)}</code> until a person approves or skips it</li>")
        else:
            items.append(f"<li>Refused <code>{esc(command.command)}</code>: the command policy does not allow it</li>")
    after = entry.manifest_after or {}
    question = after.get("question")
    if response is not None and entry.state_after == "INPUT_REQUIRED" and isinstance(question, dict):
        items.append(f'<li>Asked a person: <span class="prose">{esc(question.get("text"))}</span></li>')
    if entry.state_after == "INTERVENTION_REQUIRED" and after.get("reason"):
        items.append(f'<li class="error">The job needs a person: {esc(after.get("reason"))}</li>')
    if entry.note:
        items.append(f'<li class="prose">{esc(entry.note)}</li>')
    if not items:
        return ""
    return f'<section class="outcome"><h3>What happened</h3><ul>{"".join(items)}</ul></section>'


def _row_html(row: StepRow) -> str:
    change = row.state_after if row.state_before == row.state_after else f"{row.state_before} → {row.state_after}"
    return (
        '<summary class="row">'
        f'<span class="seq">#{row.sequence}</span>'
        f'<time datetime="{esc(row.timestamp)}">{esc(_time(row.timestamp))}</time>'
        f'<span class="actor">{esc(row.actor)}</span>'
        f'<span class="action a-{esc(row.action)}">{esc(row.action)}</span>'
        f'<span class="states" title="{esc(change)}">{esc(row.state_after)}</span>'
        f'<span class="text">{esc(_short(row.summary))}</span>'
        f'<span class="tokens">{"" if row.tokens is None else row.tokens}</span>'
        f'<span class="cost">{_money(row.cost_usd)}</span>'
        f'<code class="commit">{esc((row.commit or "")[:8])}</code>'
        "</summary>"
    )


def _step_html(job_id: str, entry: HistoryEntry, row: StepRow, tracker: PromptTracker, diff: Optional[str]) -> str:
    prompt, attrs = _prompt_html(entry, tracker)
    body = [prompt, _answer_html(entry), _outcome_html(entry)]
    if diff is not None:
        shown = _diff_html(diff, entry.sequence, job_id) if diff else "<p>(no change)</p>"
        body.append(f'<section class="diff"><h3>Diff</h3>{shown}</section>')
    footer = [f"entry #{entry.sequence}", esc(entry.timestamp)]
    if entry.workspace_commit:
        footer.append(f"commit <code>{esc(entry.workspace_commit)}</code>")
    if entry.duration_seconds:
        footer.append(f"{entry.duration_seconds:g} s")
    footer.append(f'<a href="#step-{entry.sequence}">link</a>')
    body.append(f'<p class="foot">{" · ".join(footer)}</p>')
    return (
        f'<details class="step k-{esc(entry.kind)}" id="step-{entry.sequence}" data-seq="{entry.sequence}"'
        f' data-role="{esc(row.actor)}" data-action="{esc(row.action)}"{attrs}>'
        f'{_row_html(row)}<div class="detail">{"".join(body)}</div></details>'
    )


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


def _budget_html(budget: Budget, cost_known: bool) -> str:
    used = f"{budget.used:g}" if budget.name != "cost_usd" else (f"${budget.used:.4f}" if cost_known else "unknown")
    if budget.limit is None:
        return f"<tr><th>{esc(budget.name)}</th><td>{esc(used)}</td><td>no limit</td><td></td></tr>"
    limit = f"{budget.limit:g}" if budget.name != "cost_usd" else f"${budget.limit:.4f}"
    fraction = budget.fraction or 0.0
    return (
        f"<tr><th>{esc(budget.name)}</th><td>{esc(used)}</td><td>of {esc(limit)}</td>"
        f'<td><meter min="0" max="1" low="0.75" high="0.9" optimum="0" value="{min(fraction, 1.0):.4f}"></meter> '
        f"{fraction * 100:.0f}%</td></tr>"
    )


def _facts_html(summary: JobSummary, job: Job) -> str:
    m = summary.manifest
    t = m.totals
    cost_known = not t.llm_calls or t.unpriced_calls < t.llm_calls
    rows = [
        ("Status", _status_badge(str(m.status)) + (f' <span class="error">{esc(m.reason)}</span>' if m.reason else "")),
        ("Whose turn", esc(m.turn.role)),
        ("Calls", f"{t.llm_calls} ({t.unpriced_calls} without a price)" if t.unpriced_calls else str(t.llm_calls)),
        ("Tokens", f"{t.tokens} ({t.prompt_tokens} in, {t.completion_tokens} out)"),
        ("Cost", f"${t.cost_usd:.4f}" if cost_known else "unknown (no price for the model)"),
        ("Time in calls and commands", f"{t.wall_seconds:.1f} s"),
        ("Created", esc(_time(m.created_at)) + " UTC"),
        ("Updated", esc(_time(m.updated_at)) + " UTC"),
        ("Workspace", f"<code>{esc(job.workspace)}</code> @ <code>{esc((m.workspace_commit or '')[:12])}</code>"),
    ]
    if m.question:
        rows.insert(1, ("Question", f'<span class="prose">{esc(m.question.text)}</span>'))
    if m.pending_command:
        rows.insert(1, ("Held command", f"<code>{esc(m.pending_command)}</code>"))
    if m.last_exit:
        last = m.last_exit
        rows.insert(2, ("Last exit", f'{esc(last.role)} {esc(last.action)}: <span class="prose">{esc(last.summary)}</span>'))
    facts = "".join(f"<tr><th>{name}</th><td>{value}</td></tr>" for name, value in rows)
    budget_rows = "".join(_budget_html(b, cost_known) for b in summary.budgets)
    return (
        f'<section class="facts"><table class="kv">{facts}</table>'
        f'<table class="budgets"><caption>Budgets</caption>{budget_rows}</table></section>'
    )


def _states_html(states: list[StateVisit]) -> str:
    items = "".join(
        f'<li><a href="#step-{v.sequence}" title="entry #{v.sequence}, {esc(_time(v.timestamp))}">{_status_badge(v.status)}</a></li>'
        for v in states
    )
    return f'<section><h2>States passed through</h2><ol class="states">{items}</ol></section>'


def _page(title: str, body: str) -> str:
    def digest(text: str) -> str:
        return "sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")

    policy = (
        f"default-src 'none'; style-src '{digest(_CSS)}'; script-src '{digest(_JS)}'; "
        "img-src data:; base-uri 'none'; form-action 'none'"
    )
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f'<meta http-equiv="Content-Security-Policy" content="{policy}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="generator" content="Logist">'
        f"<title>{esc(title)}</title><style>{_CSS}</style></head>\n<body>\n{body}\n<script>{_JS}</script></body></html>\n"
    )


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
        return diffs.get(entry.sequence, "" if entry.kind == "llm_call" else None)

    steps = [_step_html(job.id, entry, row, tracker, diff_of(entry)) for entry, row in zip(entries, summary.rows)]
    header = (
        f'<header><p class="crumb">Logist job report</p><h1><span class="id">{esc(job.id)}</span> {_status_badge(str(m.status))}</h1>'
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
    body = header + _facts_html(summary, job) + _states_html(summary.states) + timeline
    return _page(f"{job.id}: {m.status} · Logist", body)


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
            cost = "" if m.totals.llm_calls and m.totals.unpriced_calls == m.totals.llm_calls else f"${m.totals.cost_usd:.4f}"
            cells = (
                f"<td>{esc(m.turn.role)}</td><td>{m.steps} / {m.settings.max_steps}</td><td>{m.totals.tokens}</td>"
                f"<td>{cost}</td><td>{esc(_time(m.updated_at))}</td>"
                f'<td class="prose">{esc(_short(m.objective, 120))}</td>'
            )
        lines.append(f'<tr data-job="{esc(row.job_id)}" data-status="{esc(row.status)}"><td>{name}{mark}</td><td>{_status_badge(row.status)}</td>{cells}</tr>')
    tally = " ".join(f"{_status_badge(status)} {count}" for status, count in sorted(counts.items()))
    body = (
        f'<header><p class="crumb">Logist</p><h1>Jobs in <code>{esc(jobs.path)}</code></h1><p>{len(rows)} job{"s" if len(rows) != 1 else ""} {tally}</p></header>'
        '<table class="index"><thead><tr><th>job</th><th>status</th><th>whose turn</th><th>steps</th><th>tokens</th>'
        '<th>cost</th><th>updated (UTC)</th><th>objective</th></tr></thead>'
        f'<tbody>{"".join(lines)}</tbody></table>'
    )
    return _page(f"Logist jobs in {jobs.path}", body)


# -- Style and script (fixed text; the page's CSP allows exactly these) -----------------------------

_CSS = """
:root{--fg:#1d1f23;--muted:#667;--bg:#fff;--line:#e3e5ea;--soft:#f5f6f8;--a:#0b6b2f;--d:#a3171d;--h:#5a3ea8;--link:#0b57d0}
@media (prefers-color-scheme:dark){:root{--fg:#e4e6ea;--muted:#9aa;--bg:#16181c;--line:#2d3138;--soft:#1f2227;--a:#5fd08a;--d:#ff7b7b;--h:#b59cff;--link:#8ab4f8}}
*{box-sizing:border-box}
body{margin:0 auto;max-width:1400px;padding:1rem 1.5rem 4rem;font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;color:var(--fg);background:var(--bg)}
a{color:var(--link)}
h1{margin:.2rem 0;font-size:1.5rem}h2{font-size:1.1rem;margin:1.5rem 0 .5rem}h3{font-size:.95rem;margin:.8rem 0 .3rem}
small,.crumb,.meta,.foot{color:var(--muted)}.crumb{margin:0}
code,pre,.commit,.seq,.tokens,.cost,time{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12.5px}
pre{white-space:pre-wrap;word-break:break-word;background:var(--soft);border:1px solid var(--line);border-radius:4px;padding:.5rem .7rem;margin:.3rem 0;max-height:40rem;overflow:auto}
.prose{white-space:pre-wrap}
.status{display:inline-block;padding:0 .45em;border-radius:3px;font-size:12px;font-weight:600;background:#dfe3ea;color:#223}
.s-SUCCESS,.s-APPROVAL_REQUIRED{background:#c9efd5;color:#0b4d22}.s-RUNNING,.s-PENDING{background:#d6e4ff;color:#173a7a}
.s-REVIEWING{background:#e8dcff;color:#3d2380}.s-INPUT_REQUIRED{background:#fff0c2;color:#6a4b00}
.s-INTERVENTION_REQUIRED,.s-UNREADABLE{background:#ffd6d6;color:#7a1010}.s-CANCELED,.s-SUSPENDED{background:#e6e6e6;color:#444}
.error{color:var(--d)}
.facts{display:flex;flex-wrap:wrap;gap:2rem;margin-top:1rem}
table{border-collapse:collapse}th,td{padding:.15rem .8rem .15rem 0;vertical-align:baseline}th{text-align:left;font-weight:600;color:var(--muted)}
caption{text-align:left;font-weight:600;padding-bottom:.3rem}meter{width:8rem}
.states{list-style:none;padding:0;margin:0;display:flex;flex-wrap:wrap;gap:.2rem}.states li+li:before{content:"→";color:var(--muted);margin-right:.2rem}
.states a{text-decoration:none}
.head,.row{display:grid;grid-template-columns:3.5rem 10rem 6.5rem 7.5rem 11.5rem minmax(8rem,1fr) 4rem 4.5rem 4.5rem;gap:.5rem;align-items:baseline;padding:.25rem .4rem}
.head{font-weight:600;color:var(--muted);border-bottom:2px solid var(--line)}
.step{border-bottom:1px solid var(--line)}.step>summary{cursor:pointer;list-style:none}.step>summary::-webkit-details-marker{display:none}
.step>summary:hover{background:var(--soft)}.step[open]>summary{background:var(--soft);font-weight:600}
.row>span,.row>time,.row>code{overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
.tokens,.cost{text-align:right}
.action{font-weight:600}.a-COMPLETED{color:var(--a)}.a-STUCK,.a-INVALID,.a-ERROR{color:var(--d)}.a-RETRY{color:#b35c00}
.k-user_action .actor,.k-rewind .actor,.k-recovery .actor{font-style:italic}
.detail{padding:.3rem .8rem 1rem 1.5rem;border-left:3px solid var(--line);margin:0 0 .5rem .4rem}
.msg .who{font-size:12px;font-weight:600;color:var(--muted);margin-top:.4rem}
dl{display:grid;grid-template-columns:max-content 1fr;gap:.2rem .8rem;margin:.3rem 0}dt{font-weight:600;color:var(--muted)}dd{margin:0}
dd ul,.outcome ul{margin:0;padding-left:1.2rem}
.diff .a{color:var(--a)}.diff .d{color:var(--d)}.diff .h{color:var(--h)}.diff .f{font-weight:700}.diff .m{color:var(--muted)}
button{font:inherit;padding:.15rem .6rem;border:1px solid var(--line);border-radius:4px;background:var(--soft);color:var(--fg);cursor:pointer}
.full:not(:empty){margin-top:.5rem;padding:.3rem .6rem;border:1px dashed var(--line)}
.index td,.index th{padding:.3rem .9rem .3rem 0;border-bottom:1px solid var(--line)}
.current{font-size:11px;color:var(--muted)}
@media (max-width:900px){.head,.row{grid-template-columns:3.5rem 6.5rem 7.5rem minmax(6rem,1fr)}.row>time,.head>:nth-child(2),.states,.head>:nth-child(5),.tokens,.cost,.commit,.head>:nth-child(n+7){display:none}}
"""

_JS = """
(function () {
  "use strict";
  function stepOf(seq) { return document.getElementById("step-" + seq); }
  function openFromHash() {
    var m = /^#step-(\\d+)$/.exec(location.hash);
    var step = m && stepOf(m[1]);
    if (step) { step.open = true; step.scrollIntoView({block: "start"}); }
  }
  function setAll(open) {
    var steps = document.querySelectorAll("details.step");
    for (var i = 0; i < steps.length; i++) { steps[i].open = open; }
  }
  function messagesOf(step) {
    return step.querySelectorAll(":scope > .detail > .prompt > .msg[data-new]");
  }
  function fullPrompt(step) {
    var chain = [], at = step;
    while (at) { chain.unshift(at); at = at.dataset.continues ? stepOf(at.dataset.continues) : null; }
    var out = [], system = step.dataset.system && stepOf(step.dataset.system);
    var systemText = system && system.querySelector("[data-system-text] pre");
    if (systemText) { out.push(["system", systemText.textContent]); }
    chain.forEach(function (s, i) {
      messagesOf(s).forEach(function (m) { out.push([m.dataset.role, m.querySelector("pre").textContent]); });
      var raw = s.querySelector(".raw");
      if (i < chain.length - 1 && raw) { out.push(["assistant", raw.textContent]); }
    });
    return out;
  }
  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest("button.full-prompt");
    if (!button) { return; }
    var box = button.nextElementSibling, step = button.closest("details.step");
    if (box.childElementCount) { box.textContent = ""; button.textContent = "Show the full prompt"; return; }
    fullPrompt(step).forEach(function (message) {
      var div = document.createElement("div"), who = document.createElement("div"), pre = document.createElement("pre");
      div.className = "msg"; who.className = "who"; who.textContent = message[0]; pre.textContent = message[1];
      div.appendChild(who); div.appendChild(pre); box.appendChild(div);
    });
    button.textContent = "Hide the full prompt";
  });
  var expand = document.getElementById("expand-all"), collapse = document.getElementById("collapse-all");
  if (expand) { expand.addEventListener("click", function () { setAll(true); }); }
  if (collapse) { collapse.addEventListener("click", function () { setAll(false); }); }
  window.addEventListener("hashchange", openFromHash);
  openFromHash();
})();
"""
