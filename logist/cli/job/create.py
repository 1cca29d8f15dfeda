"""``logist job create``: its options are made from :class:`JobSpec`.

Each field of the model is one option: its name (``max_steps`` becomes
``--max-steps``), type, limits, default and help come from the field, so the
library, the CLI and a fixture's job.json cannot drift apart. :data:`STYLE`
holds what only the command line has: short flags and friendlier names (a
budget's option is named in :data:`logist.api.SETTABLE`). ``job
set`` and ``job resubmit`` take the budget options made the same way
(:class:`SpecCommand` with ``spec_fields="budgets"``).
"""

from __future__ import annotations

import typing
from typing import Any, Optional

import click

from ...api import SETTABLE, JobSpec, as_spec
from ..app import Application, pass_app
from ..common import json_option

#: Per field, how the command line differs from the plain ``--field-name``.
STYLE: dict[str, dict[str, Any]] = {
    "objective": {"decls": ["--objective", "-o"]},
    "details": {"decls": ["--details", "-d"]},
    "acceptance": {"decls": ["--acceptance", "-a"]},
    "files": {"decls": ["--file"]},
    "from_repo": {"type": click.Path(exists=True, file_okay=False)},
    "extra_roles": {"decls": ["--role"], "metavar": "ROLE"},
    "params": {"decls": ["--param"], "metavar": "NAME=VALUE"},
    "allowed_commands": {"decls": ["--allow"], "metavar": "PATTERN"},
    "command_env": {"decls": ["--command-env"], "metavar": "NAME"},
    "make_current": {"decls": ["--current/--no-current"]},
    "review": {"decls": ["--review/--no-review"]},
    "checks": {"decls": ["--check"], "metavar": "CMD"},
}


def _pairs(ctx: click.Context, param: click.Parameter, items: tuple[str, ...]) -> dict[str, str]:
    values = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise click.BadParameter(f"{item!r}: use NAME=VALUE", ctx, param)
        values[name.strip()] = value
    return values


def _click_type(annotation: Any, limits: dict[str, Any]) -> Any:
    if typing.get_origin(annotation) is typing.Literal:
        return click.Choice(list(typing.get_args(annotation)))
    if annotation in (int, float):
        kind = click.IntRange if annotation is int else click.FloatRange
        if "gt" in limits:
            return kind(min=limits["gt"], min_open=True)
        return kind(min=limits.get("ge"), max=limits.get("le"))
    return None


def spec_option(name: str, field: Any) -> click.Option:
    """The click option for the JobSpec field ``name``."""
    style = STYLE.get(name, {"decls": [SETTABLE[name]]} if name in SETTABLE else {})
    annotation = field.annotation
    if typing.get_origin(annotation) is typing.Union:  # Optional[X]: None means "not given"
        annotation = next(arg for arg in typing.get_args(annotation) if arg is not type(None))
    limits = {key: getattr(rule, key) for rule in field.metadata for key in ("ge", "gt", "le") if hasattr(rule, key)}
    origin = typing.get_origin(annotation)
    kwargs: dict[str, Any] = {"help": field.description}
    if origin in (list, dict):
        kwargs["multiple"] = True
        if origin is dict:
            kwargs["callback"] = _pairs
    else:
        kwargs["default"] = field.default
        kwargs["type"] = style.get("type") or _click_type(annotation, limits)
        kwargs["show_default"] = annotation is not bool and field.default not in (None, "")
    if "metavar" in style:
        kwargs["metavar"] = style["metavar"]
    decls = style.get("decls", ["--" + name.replace("_", "-")])
    return click.Option([*decls, name], **kwargs)


class SpecCommand(click.Command):
    """A command whose options are JobSpec's fields, made on first use:
    all of them, with ``spec_fields="budgets"`` the budgets, or those a tuple of names names."""

    _spec_options: Optional[list[click.Option]] = None

    def __init__(self, *args: Any, spec_fields: Optional[Any] = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.spec_fields = spec_fields

    def spec_options(self) -> list[click.Option]:
        if self._spec_options is None:
            names = list(SETTABLE) if self.spec_fields == "budgets" else list(self.spec_fields or JobSpec.model_fields)
            self._spec_options = [spec_option(name, JobSpec.model_fields[name]) for name in names]
        return self._spec_options

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        return [*self.spec_options(), *super().get_params(ctx)]


@click.command(cls=SpecCommand)
@click.argument("job_id", metavar="JOB")
@json_option
@pass_app
def create(app: Application, job_id: str, as_json: bool, **options: Any) -> None:
    """Create a job and make it the current one.

    \b
    Example:
      logist job create wordcount -o "Write wc.py that counts words" -a "tests pass"
      logist job create fix --skill fix-tests --allow "python -m pytest*" --from-repo ../app
    """
    job = app.open().create(job_id, spec=as_spec(None, options))
    for error in app.jobs.roles().errors():  # the job was made without them: said, not hidden
        app.info(f"Not loaded: {error}")
    if as_json:
        app.print_json({"job_id": job.id, "path": str(job.dir), "status": "PENDING"})
    else:
        app.info(f"Created job '{job.id}' in {job.dir} (PENDING). Next: logist job step {job.id}")
