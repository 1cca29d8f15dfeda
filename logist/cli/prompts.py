"""``logist prompts``: the prompt templates in effect, and where each comes from."""

from __future__ import annotations

import click

from ..errors import ConfigError, UsageError
from .app import Application, echo, pass_app
from .common import json_option


@click.group()
def prompts() -> None:
    """Prompt templates: every text Logist sends a model, as files you can override."""


def _prompts(app: Application):
    return app.jobs.prompts()


@prompts.command("list")
@json_option
@pass_app
def prompts_list(app: Application, as_json: bool) -> None:
    """List each template and where it comes from (built-in or which override).

    \b
    Example:
      logist prompts list
    """
    templates = _prompts(app)
    rows = []
    for name in templates.names():
        spec = templates.spec(name)
        try:
            resolved = templates.resolve(name)
            row = {"name": name, "origin": resolved.origin, "path": str(resolved.path) if resolved.path else None,
                   "key": resolved.key}
        except ConfigError as exc:
            row = {"name": name, "origin": "error", "path": None, "key": None, "error": str(exc)}
        rows.append({**row, "placeholders": list(spec.placeholders), "description": spec.description})
    unused = [str(p) for p in templates.unused_files()]
    unused_keys = templates.unused_keys()
    if as_json:
        app.print_json({"templates": rows, "override_dir": str(templates.dir), "unused_files": unused,
                        "unused_keys": unused_keys})
        return
    width = max(len(r["name"]) for r in rows)
    for row in rows:
        source = row.get("error") or (f"{row['path']}, key {row['key']}" if row["key"] else row["path"])
        where = row["origin"] if row["origin"] == "built-in" else f"{row['origin']}: {source}"
        echo(f"{row['name']:<{width}}  {where}")
    app.info(f"Override one by writing {templates.dir}/NAME.md (or NAME.yaml, or a key of {templates.json_path}; "
             "logist prompts show NAME prints the text to start from).")
    for path in unused:
        app.info(f"Not used: {path} is not the name of a template.")
    for key in unused_keys:
        app.info(f"Not used: {templates.json_path} key {key} is not the name of a template.")


@prompts.command("show")
@click.argument("name")
@click.option("--builtin", "builtin_only", is_flag=True, help="Show Logist's own text, not an override.")
@json_option
@pass_app
def prompts_show(app: Application, name: str, builtin_only: bool, as_json: bool) -> None:
    """Print a template's text as in effect here (placeholders unfilled).

    \b
    Example:
      logist prompts show compaction/system
      logist prompts show roles/Worker > jobs/prompts/roles/Worker.md
    """
    templates = _prompts(app)
    name = name.removesuffix(".md")
    try:
        templates.spec(name)
    except ConfigError as exc:  # a name that is no template's: a wrong argument
        raise UsageError(str(exc)) from None
    role = None
    if builtin_only:
        templates = app.jobs.prompts(builtin_only=True)
    elif name.startswith("roles/"):
        role = templates.roles.get(name[len("roles/"):])
    resolved = templates.resolve(name, role)
    spec = templates.spec(name)
    if as_json:
        app.print_json({"name": name, "origin": resolved.origin, "path": str(resolved.path) if resolved.path else None,
                        "placeholders": list(spec.placeholders), "description": spec.description,
                        "text": resolved.text})
        return
    app.info(f"# {name}: {spec.description} From {resolved.where}.")
    echo(resolved.text)

