"""``logist workflow``: the state machine's table, for people, as data, as Markdown.

The table itself is the engine's (:func:`logist.api.workflow` gives it);
this command only renders it. docs/workflow.md holds the ``--markdown`` output between two
markers, written by ``python -m logist.docs_pages`` and kept equal by a test.
"""

from __future__ import annotations

import click

from ..api import Status, workflow as workflow_table
from .app import Application, echo
from .common import json_option

#: The table, read once (it is data: the same for every command).
TABLE = workflow_table()


def _states(rule) -> str:
    inside = [s.value for s in Status if s in rule.states]
    outside = [s.value for s in Status if s not in rule.states]
    text = ", ".join(inside) if len(inside) <= len(outside) else "any but " + ", ".join(outside)
    return f"{text} ({rule.waits_for})" if rule.waits_for else text


def _who(rule) -> str:
    if rule.who == TABLE.any_role:
        return "any role"
    return ", ".join(name for key, name in TABLE.who_names.items() if key in rule.who)


def _to_value(target) -> str:
    return str(target.value if hasattr(target, "value") else target)


def _to(rule) -> str:
    text = _to_value(rule.to)
    return f"{text}, keeps {rule.remember}" if rule.remember else text


def workflow_data() -> dict:
    rows = [
        {
            "states": [s.value for s in Status if s in r.states],
            "event": str(r.event),
            "who": [key for key in TABLE.who_names if key in r.who],
            "to": _to_value(r.to),
            "turn": r.turn,
            "hint": r.hint,
            "remember": r.remember,
            "waits_for": r.waits_for,
        }
        for r in TABLE.rules
    ]
    hints = {s.value: TABLE.hint(s) for s in Status}
    return {"rows": rows, "targets": TABLE.targets, "turn_effects": TABLE.turn_effects, "hints": hints}


def _cells() -> list[tuple[str, str, str, str, str]]:
    return [(_states(r), str(r.event), _who(r), _to(r), r.turn) for r in TABLE.rules]


HEADER = ("state", "event", "who", "next state", "turn")


def markdown() -> str:
    """docs/workflow.md's table: what a person can do, then every row."""
    lines = ["| state | what a person can do |", "|---|---|"]
    lines += [f"| {s.value} | {TABLE.hint(s)} |" for s in Status]
    lines += ["", "| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(cells) + " |" for cells in _cells()]
    lines += ["", "Next states that depend on the job:", ""]
    lines += [f"- `{name}`: {meaning}" for name, meaning in TABLE.targets.items()]
    lines += ["", "What happens to the turn:", ""]
    lines += [f"- `{name}`: {meaning}" for name, meaning in TABLE.turn_effects.items()]
    return "\n".join(lines) + "\n"


def plain() -> str:
    rows = [tuple(h.upper() for h in HEADER)] + _cells()
    widths = [max(len(row[i]) for row in rows) for i in range(len(HEADER))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    lines += ["", "Next states:"] + [f"  {name:<8} {meaning}" for name, meaning in TABLE.targets.items()]
    width = max(len(name) for name in TABLE.turn_effects)
    lines += ["", "Turn:"] + [f"  {name:<{width}}  {meaning}" for name, meaning in TABLE.turn_effects.items()]
    return "\n".join(lines) + "\n"


@click.command("workflow")
@click.option("--markdown", "as_markdown", is_flag=True, help="Print the table as the README's Markdown.")
@json_option
def workflow(as_markdown: bool, as_json: bool) -> None:
    """Print the workflow table: every state change a job can make.

    \b
    Example:
      logist workflow
      logist workflow --json
    """
    if as_json and as_markdown:
        raise click.UsageError("--json and --markdown do not go together")
    if as_json:
        Application.print_json(workflow_data())
    else:
        echo(markdown() if as_markdown else plain(), nl=False)
