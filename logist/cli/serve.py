"""``logist serve``: a live local web view of the jobs (the ``serve`` extra)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click

from .app import Application, pass_app
from .common import json_option
from ..errors import install_hint

if TYPE_CHECKING:
    from pathlib import Path


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True,
              help="The address to listen on; any but loopback needs --unsafe-host.")
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True,
              help="The port (0: any free one).")
@click.option("--unsafe-host", is_flag=True,
              help="Allow a --host other than loopback: anyone who can reach it and has the token can decide for your jobs.")
@click.option("--allow-host", "allow_hosts", multiple=True, metavar="NAME",
              help="Another name the pages may be asked for by (the Host header); repeatable.")
@click.option("--page-size", type=click.IntRange(min=1), default=500, show_default=True,
              help="History entries a job's page shows at most; earlier ones are a link away.")
@click.option("--new-token", is_flag=True,
              help="Make a new token: the one kept from an earlier run (and every page and script using it) stops "
                   "working.")
@json_option
@pass_app
def serve(app: Application, host: str, port: int, unsafe_host: bool, allow_hosts: tuple[str, ...],
          page_size: int, new_token: bool, as_json: bool) -> None:
    """Serve a live web view of the jobs on 127.0.0.1, decisions included.

    Prints a URL with the server's token once (--json: a JSON object with
    url, port and token_file, on one line); opening it sets a cookie and
    drops the token from the address. The token is kept for the next run on
    these jobs, so open pages and scripts go on across a restart
    (--new-token replaces it). Each page follows the job files as
    they change; each button does what the matching job command does.

    \b
    Example:
      pip install 'logist-jobs[serve]'
      logist serve --port 8765
    """
    try:
        # lazy: the serve extra (starlette, uvicorn) is optional, and loads for this command alone
        from ..serve.server import is_loopback, serve as run
    except ImportError as exc:
        raise click.ClickException(f"logist serve needs the serve extra ({exc.name} is missing): {install_hint('serve')}") from None
    if not is_loopback(host) and not unsafe_host:
        raise click.UsageError(f"--host {host} is reachable from other machines; add --unsafe-host to serve there anyway")

    def announce(url: str, port_used: int, token_file: "Path") -> None:
        if as_json:
            click.echo(json.dumps({"url": url, "port": port_used, "token_file": str(token_file)}))
            return
        click.echo(f"Logist serves {app.jobs.path} at {url}")
        app.info(f"Open that URL once; scripts send Authorization: Bearer with the token in {token_file} "
                 f"(and Origin: http://127.0.0.1:{port_used} with a decision). Ctrl-C stops it.")

    run(app.jobs, host, port, allow_hosts, announce=announce, page=page_size, new_token=new_token)
