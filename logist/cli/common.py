"""Options and arguments shared by the command groups."""

from __future__ import annotations

import functools
import os
import shutil
import sys
from typing import Callable, Optional

import click

from .. import api
from ..terminal import inert


def complete_job_ids(ctx: click.Context, _param: click.Parameter, incomplete: str) -> list[str]:
    """Shell completion of a JOB: the ids in the jobs directory."""
    try:
        ids = api.reading.open_reader(ctx.find_root().params.get("jobs_dir")).ids()
    except Exception:  # completion must never fail loudly
        return []
    return [job_id for job_id in ids if job_id.startswith(incomplete)]


job_argument = click.argument("job_id", metavar="[JOB]", required=False, shell_complete=complete_job_ids)

json_option = click.option("--json", "as_json", is_flag=True, help="Print data only, as JSON, to stdout.")

wait_option = click.option(
    "--wait",
    "lock_timeout",
    type=float,
    default=0,
    envvar="LOGIST_LOCK_WAIT",
    show_default=True,
    help="Seconds to wait for the job's lock when another command holds it (env LOGIST_LOCK_WAIT; -1 waits forever).",
)

base_url_option = click.option(
    "--base-url", envvar="LOGIST_BASE_URL",
    help="OpenAI-compatible endpoint (env LOGIST_BASE_URL, then OPENAI_BASE_URL, then AI_KOSMOS_MODEL_BASE_URL, then config.json).",
)

def entry_option(help: str, *old_names: str) -> Callable:
    """``--entry N``: the one name of "which history entry" (``job history``,
    ``job diff``, ``job restep``), passed as ``entry``. An entry is named by
    its number, as ``job history`` lists it. ``old_names``: the names a
    command had before (``--step``, ``--to``), still taken for one release,
    hidden from ``--help``, each use with a one-line notice on stderr."""

    def decorate(command: Callable) -> Callable:
        dests = {f"entry_as_{name.lstrip('-')}": name for name in old_names}

        @functools.wraps(command)
        def merged(*args, **kwargs):
            given = {name: kwargs.pop(dest) for dest, name in dests.items()}
            given = {name: value for name, value in given.items() if value is not None}
            for name in given:
                click.echo(f"logist: {name} is now --entry; {name} goes away in the next release", err=True)
            if given and kwargs.get("entry") is not None or len(given) > 1:
                raise click.UsageError(f"give --entry once (not with {', '.join(given)})")
            if given:
                kwargs["entry"] = next(iter(given.values()))
            return command(*args, **kwargs)

        for dest, name in dests.items():
            merged = click.option(name, dest, type=click.IntRange(min=1), hidden=True)(merged)
        return click.option("--entry", "entry", type=click.IntRange(min=1), metavar="N", help=help)(merged)

    return decorate




def table_width() -> int | None:
    """How wide a table's lines may be: ``COLUMNS`` when it is set, else
    the terminal's when stdout is one, else no limit (a pipe gets whole lines)."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    if sys.stdout.isatty():
        return shutil.get_terminal_size().columns
    return None


def fit(line: str, width: int | None) -> str:
    """``line`` cut to ``width`` characters with an ellipsis (None: as it is)."""
    line = line.rstrip()
    if width is None or len(line) <= width:
        return line
    return line[: max(width - 1, 0)] + "…"


def labelled(label: str, text: Optional[str]) -> str:
    """``label`` then ``text`` (a model's or a person's, perhaps over several
    lines, made inert), each line after the first indented under the first:
    no line of it can pass for a line of Logist's own, such as a forged
    ``Command: ...`` under a question."""
    first, *rest = (inert(text) or "").split("\n")
    pad = " " * len(label)
    return "\n".join([label + first] + [pad + line for line in rest])
