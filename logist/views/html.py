"""The pieces of the HTML report: one history entry as a row that opens, the facts, the page.

Plain HTML built with :func:`esc` on every value (no template engine: the
page is a handful of fixed shapes), which redacts known secrets before it
escapes. Everything that came from a
model, a person or a file is text, never markup; on top of that a
Content-Security-Policy allows only the page's own style and script, by
hash (:func:`page`), so the page can neither load anything from the network
nor run a script it did not ship. The style and script are package files,
``assets/report.css`` and ``assets/report.js``, inlined into every page.

The words (who acted, the action, the one-line summary, the budgets) come
from :mod:`logist.views.summary`; this module only lays them out.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
from importlib.resources import files
from typing import Optional

from ..secrets.redact import redact
from ..terminal import inert
from ..store.entries import FAILED
from ..store.history import HistoryEntry
from ..store.session import JobFiles
from .prompt_tracker import PromptTracker
from .summary import Budget, JobSummary, StateVisit, StepRow, answer_fields, one_line

#: Characters of one step's diff embedded in the page; the rest is cut.
DIFF_LIMIT = 100_000
ROW_TEXT_LIMIT = 160


def esc(value: object) -> str:
    """``value`` as HTML text: every known secret redacted first, then
    escaped (redacted after escaping, a secret holding ``& < > " '`` would
    be written in its escaped spelling, which the redaction does not know)."""
    return html.escape(redact("" if value is None else str(value)) or "", quote=True)


def command_html(command: Optional[str]) -> str:
    """A command (held, run, refused, a check's) as the one line it runs as:
    every control character made visible (:func:`logist.terminal.inert`:
    ``\\r`` as ␍, ESC as ␛), as the CLI and the decision box show it, so
    no part of it hides another."""
    return f"<code>{esc(inert(command, one_line=True))}</code>"


def _pre(text: str, cls: str = "") -> str:
    # The parser drops one newline right after <pre>: write one, so the
    # text (and the full prompt the script assembles from it) is exact.
    attr = f' class="{cls}"' if cls else ""
    return f"<pre{attr}>\n{esc(text)}</pre>"


def short_time(timestamp: str) -> str:
    return timestamp[:19].replace("T", " ")


def _money(value: Optional[float]) -> str:
    return "" if value is None else f"${value:.4f}"


def status_badge(status: str) -> str:
    return f'<span class="status s-{esc(status)}">{esc(status)}</span>'


def diff_lines_html(diff: str) -> str:
    """A patch's lines, escaped, each marked for its kind (file, meta, hunk, added, removed)."""
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
    return "\n".join(lines)


def _diff_html(diff: str, sequence: int, job_id: str, cut: int = 0) -> str:
    if len(diff) > DIFF_LIMIT:
        diff, cut = diff[:DIFF_LIMIT], cut + len(diff) - DIFF_LIMIT
    note = f"\n… {cut} more characters cut; logist job diff {job_id} --entry {sequence} shows them all" if cut else ""
    return '<pre class="diff">\n' + diff_lines_html(diff) + esc(note) + "</pre>"


def _message_html(role: str, content: str, extra: str = "") -> str:
    return f'<div class="msg" data-role="{esc(role)}"{extra}><div class="who">{esc(role)}</div>{_pre(content)}</div>'


def _prompt_html(entry: HistoryEntry, tracker: PromptTracker) -> tuple[str, str]:
    """The prompt section and the attribute that links it to the step it continues."""
    view = tracker.view(entry)
    if view is None or entry.request is None:
        return "", ""
    meta = entry.request.metadata
    attrs = ""
    parts = ['<section class="prompt"><h3>Prompt</h3>']
    facts = [f"model {esc(meta.model)}"]
    if meta.temperature is not None:
        facts.append(f"temperature {meta.temperature:g}")
    if view.continues is not None:
        attrs += f' data-continues="{view.continues}"'
        facts.append(f'continues the conversation of <a href="#step-{view.continues}">#{view.continues}</a>; new:')
    else:
        facts.append(f"a new conversation of {len(view.messages)} message{'s' if len(view.messages) != 1 else ''}:")
    parts.append(f'<p class="meta">{" · ".join(facts)}</p>')
    if view.system is not None:
        parts.append(
            '<details class="system"><summary>system prompt</summary>'
            f'{_message_html("system", view.system, " data-system-text")}</details>'
        )
    for message in view.messages:
        parts.append(_message_html(message["role"], message["content"], " data-new"))
    if view.continues is not None:
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
    fields = answer_fields(entry)
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
            elif key == "command" and isinstance(value, str):
                parts.append(f"<dt>command</dt><dd>{command_html(value)}</dd>")
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
    if response is not None and response.status in ("INVALID", FAILED, "UNKNOWN"):
        what = {"INVALID": "The answer was refused; nothing from it was applied", FAILED: "The call failed",
                "UNKNOWN": "The call's outcome is unknown; nothing was applied"}[response.status]
        items.append(f'<li class="error">{what}: {esc(response.error)}</li>')
    if response is not None and response.files_changed:
        files = ", ".join(f"<code>{esc(p)}</code>" for p in response.files_changed)
        items.append(f"<li>Files changed: {files}</li>")
    run = entry.agent
    if run is not None:
        ended = ("stopped at its timeout" if run.timed_out else "interrupted" if run.interrupted
                 else f"exit {run.exit_code}" if run.exit_code is not None else "ended")
        calls = "".join(
            f"<li>call {call.number}: {esc(call.api)}, HTTP {call.status}"
            + (f", {call.input_tokens or 0} tokens in, {call.output_tokens or 0} out" if call.input_tokens is not None
               else "") + f", <code>{esc(call.file)}</code></li>" for call in run.calls)
        stop = f' <span class="error">stopped at the gateway: {esc(run.budget_stop)}</span>' if run.budget_stop else ""
        items.append(f"<li>The agent <code>{esc(run.agent)}</code> ran ({esc(ended)}), {len(run.calls)} model "
                     f"call{'s' if len(run.calls) != 1 else ''} through the gateway:{stop}<ul>{calls}</ul></li>")
    command = entry.command
    if command is not None:
        if command.decision == "run":
            how = "timed out" if command.timed_out else f"exit {command.exit_code}"
            items.append(
                f"<li>Ran {command_html(command.command)} ({esc(how)}, {command.duration_ms / 1000:g} s); "
                f"the output as the model is shown it:{_pre(command.output or '(no output)', 'output')}</li>"
            )
        elif command.decision == "ask":
            items.append(f"<li>Held {command_html(command.command)} until a person approves or skips it</li>")
        else:
            items.append(f"<li>Refused {command_html(command.command)}: the command policy does not allow it</li>")
    if entry.checks is not None:
        for result in entry.checks.results:
            failed = "" if result.passed else ' class="error"'
            items.append(
                f'<li{failed}>Check {command_html(result.command)} '
                f"{esc(result.ending)} ({result.duration_ms / 1000:g} s); the end of its output:"
                f"{_pre(result.output or '(no output)', 'output')}</li>"
            )
    after = entry.state.model_dump(mode="json")
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
        f'<time datetime="{esc(row.timestamp)}">{esc(short_time(row.timestamp))}</time>'
        f'<span class="actor">{esc(row.actor)}</span>'
        f'<span class="action a-{esc(row.action)}">{esc(row.action)}</span>'
        f'<span class="states" title="{esc(change)}">{esc(row.state_after)}</span>'
        f'<span class="text">{esc(inert(one_line(row.summary, ROW_TEXT_LIMIT), one_line=True))}</span>'
        f'<span class="tokens">{"" if row.tokens is None else row.tokens}</span>'
        f'<span class="cost">{_money(row.cost_usd)}</span>'
        f'<code class="commit">{esc((row.commit or "")[:8])}</code>'
        "</summary>"
    )


def step_html(job_id: str, entry: HistoryEntry, row: StepRow, tracker: PromptTracker, diff: Optional[str],
              diff_cut: int = 0) -> str:
    """One entry as a row that opens; ``diff`` is its change (None: no diff
    section), of which ``diff_cut`` characters were left out."""
    prompt, attrs = _prompt_html(entry, tracker)
    body = [prompt, _answer_html(entry), _outcome_html(entry)]
    if diff is not None:
        shown = _diff_html(diff, entry.sequence, job_id, diff_cut) if diff else "<p>(no change)</p>"
        body.append(f'<section class="diff"><h3>Diff</h3>{shown}</section>')
    footer = [f"entry #{entry.sequence}", esc(entry.timestamp)]
    if entry.workspace_commit:
        footer.append(f"commit <code>{esc(entry.workspace_commit)}</code>")
    if entry.duration_ms:
        footer.append(f"{entry.duration_ms / 1000:g} s")
    footer.append(f'<a href="#step-{entry.sequence}">link</a>')
    body.append(f'<p class="foot">{" · ".join(footer)}</p>')
    return (
        f'<details class="step k-{esc(entry.kind)}" id="step-{entry.sequence}" data-seq="{entry.sequence}"'
        f' data-role="{esc(row.actor)}" data-action="{esc(row.action)}"{attrs}>'
        f'{_row_html(row)}<div class="detail">{"".join(body)}</div></details>'
    )


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


def facts_html(summary: JobSummary, job: JobFiles) -> str:
    m = summary.manifest
    t = m.totals
    cost_known = summary.cost_known
    rows = [
        ("Status", status_badge(str(m.status)) + (f' <span class="error">{esc(m.reason)}</span>' if m.reason else "")),
        ("Whose turn", esc(m.turn.role)),
        ("Steps", f"{m.calls} of {m.settings.max_steps} used"),
        ("Calls", f"{t.llm_calls} made to a model" + "".join(f" ({n} {what})" for n, what in (
            (t.unpriced_calls, "without a price"), (t.unknown_calls, "of unknown outcome"),
            (t.replayed, "replayed answers: no call"), (t.posted, "posted answers: no call")) if n)),
        ("Tokens", f"{t.tokens} ({t.prompt_tokens} in, {t.completion_tokens} out)"),
        ("Cost", f"${t.cost_usd:.4f}" if cost_known else "unknown (no price for the model)"),
        ("Time in calls and commands", f"{t.wall_ms / 1000:.1f} s"),
        ("Created", esc(short_time(m.created_at)) + " UTC"),
        ("Updated", esc(short_time(m.updated_at)) + " UTC"),
        ("Workspace", f"<code>{esc(job.workspace)}</code> @ <code>{esc((m.workspace_commit or '')[:12])}</code>"),
    ]
    if m.question:
        rows.insert(1, ("Question", f'<span class="prose">{esc(m.question.text)}</span>'))
    if m.pending_command:
        rows.insert(1, ("Held command", command_html(m.pending_command)))
    if m.last_exit:
        last = m.last_exit
        rows.insert(2, ("Last exit", f'{esc(last.role)} {esc(last.action)}: <span class="prose">{esc(last.summary)}</span>'))
    facts = "".join(f"<tr><th>{name}</th><td>{value}</td></tr>" for name, value in rows)
    budget_rows = "".join(_budget_html(b, cost_known) for b in summary.budgets)
    return (
        f'<section class="facts"><table class="kv">{facts}</table>'
        f'<table class="budgets"><caption>Budgets</caption>{budget_rows}</table></section>'
    )


def states_html(states: list[StateVisit], omitted: int = 0, gap: Optional[int] = None, before: int = 0) -> str:
    """The states passed through; ``omitted`` of them, left out, were at
    ``gap``; ``before``: the states of the entries up to that one are not
    among them (a page showing a part of the timeline)."""
    items = [
        f'<li><a href="#step-{v.sequence}" title="entry #{v.sequence}, {esc(short_time(v.timestamp))}">{status_badge(v.status)}</a></li>'
        for v in states
    ]
    if omitted and gap is not None:
        items.insert(gap, f"<li>… {omitted} more …</li>")
    if before:
        items.insert(0, f'<li class="earlier">… up to #{before}: on the earlier pages</li>')
    return f'<section><h2>States passed through</h2><ol class="states">{"".join(items)}</ol></section>'


def asset(name: str, package: str = __package__) -> str:
    """The text of ``assets/<name>`` of ``package`` (the views' own by default), shipped in it."""
    return files(package).joinpath("assets", name).read_text(encoding="utf-8")


def page_parts(title: str) -> tuple[str, str]:
    """What comes before and after a page's body: the style and script, and
    a policy that allows those two texts (by hash) and nothing else."""
    css, js = asset("report.css"), asset("report.js")

    def digest(text: str) -> str:
        return "sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")

    policy = (
        f"default-src 'none'; style-src '{digest(css)}'; script-src '{digest(js)}'; "
        "img-src data:; base-uri 'none'; form-action 'none'"
    )
    head = (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f'<meta http-equiv="Content-Security-Policy" content="{policy}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="generator" content="Logist">'
        f"<title>{esc(title)}</title><style>{css}</style></head>\n<body>\n"
    )
    return head, f"\n<script>{js}</script></body></html>\n"


def page(title: str, body: str) -> str:
    """A whole page around ``body`` (see :func:`page_parts`)."""
    head, tail = page_parts(title)
    return head + body + tail
