from __future__ import annotations

import click

from .app import Application, echo, pass_app
from .common import fit, json_option, table_width


@click.group()
def role() -> None:
    """Role manifests: the built-ins and the jobs directory's roles/."""


@role.command("list")
@json_option
@pass_app
def role_list(app: Application, as_json: bool) -> None:
    """List the roles jobs can use.

    \b
    Example:
      logist role list
    """
    roles = app.jobs.roles()
    for error in roles.errors():  # the other roles are listed; jobs that use this one stop with this line
        app.info(f"Not loaded: {error}")
    if as_json:
        app.print_json([{"name": r.name, "llm_model": r.llm_model, "llm_alias": r.llm_alias, "description": r.description,
                        "source": r.source} for r in roles.values()])
        return
    width, columns = max(len(n) for n in roles), table_width()
    for r in roles.values():
        echo(fit(f"{r.name:<{width}}  {r.model_label:<14}  {r.description}", columns))


@role.command("inspect")
@click.argument("name")
@json_option
@pass_app
def role_inspect(app: Application, name: str, as_json: bool) -> None:
    """Show one role's manifest in full.

    \b
    Example:
      logist role inspect Supervisor
    """
    r = app.jobs.role(name)
    prompts = app.jobs.prompts()
    instructions = prompts.resolve(f"roles/{r.name}", r)
    data = r.model_dump(mode="json", exclude_none=True)
    data["instructions"] = prompts.instructions(r)
    data["instructions_from"] = instructions.where
    if as_json:
        app.print_json(data)
        return
    echo(f"Role: {r.name}    (from {r.source})")
    for key, value in data.items():
        if key in ("name", "instructions", "instructions_from"):
            continue
        echo(f"{key}: {value}")
    echo(f"instructions (from {instructions.where}):")
    for line in data["instructions"].splitlines():
        echo(f"  {line}")
