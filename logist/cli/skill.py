from __future__ import annotations

import click

from .app import Application, echo, pass_app
from .common import fit, json_option, table_width


@click.group()
def skill() -> None:
    """Skills: reusable task templates (SKILL.md files)."""


@skill.command("list")
@json_option
@pass_app
def skill_list(app: Application, as_json: bool) -> None:
    """List the skills jobs can be made from.

    \b
    Example:
      logist skill list
    """
    errors: list[str] = []
    skills = app.jobs.skills(errors)
    for error in errors:  # the other skills are listed; a job made from this one stops with this line
        app.info(f"Not loaded: {error}")
    if as_json:
        app.print_json([{"name": s.name, "description": s.description, "params": [p.model_dump() for p in s.params],
                     "max_steps": s.max_steps, "source": s.source} for s in skills])
        return
    width, columns = max((len(s.name) for s in skills), default=4), table_width()
    for s in skills:
        params = ", ".join(p.name + ("" if p.required or p.default is None else "?") + ("*" if p.required else "") for p in s.params)
        echo(fit(f"{s.name:<{width}}  {s.description}" + (f"  [{params}]" if params else ""), columns))


@skill.command("show")
@click.argument("name")
@json_option
@pass_app
def skill_show(app: Application, name: str, as_json: bool) -> None:
    """Show a skill: its params and instructions.

    \b
    Example:
      logist skill show fix-tests
    """
    s = app.jobs.skill(name)
    if as_json:
        data = s.model_dump(mode="json")
        data["source"] = s.source
        app.print_json(data)
        return
    echo(f"Skill: {s.name}    (from {s.source})")
    echo(f"Description: {s.description}")
    if s.max_steps:
        echo(f"Max steps: {s.max_steps}")
    for p in s.params:
        extra = "required" if p.required else (f"default: {p.default}" if p.default is not None else "optional")
        echo(f"  --param {p.name}=...   {p.description} ({extra})")
    echo("Instructions:")
    for line in s.body.strip().splitlines():
        echo(f"  {line}")
