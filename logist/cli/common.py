"""Options and arguments shared by the command groups."""

from __future__ import annotations

import click

job_argument = click.argument("job_id", metavar="[JOB]", required=False)

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
    help="OpenAI-compatible endpoint (env LOGIST_BASE_URL, then OPENAI_BASE_URL, then config.json).",
)
