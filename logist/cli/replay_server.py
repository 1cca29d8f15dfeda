"""``logist replay-server``: a recorded history served as an OpenAI-compatible endpoint."""

from __future__ import annotations

import ipaddress

import json

import logging

import signal

import click

from ..errors import LogistError
from ..replay.fixtures import fixture_path
from ..replay.server import ReplayLLMServer
from .app import Application
from .common import json_option


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _stop_on_sigterm(*_args) -> None:
    raise KeyboardInterrupt


@click.command("replay-server")
@click.argument("history")
@click.option(
    "--host", default="127.0.0.1", show_default=True,
    help="Address to listen on; anything but loopback is reachable from the network.",
)
@click.option("--port", type=int, default=0, show_default=True, help="Port to listen on (0: a free one).")
@click.option(
    "--strict/--lenient", default=True, show_default=True,
    help="Refuse a request that differs from the recording (HTTP 400 naming the step), "
    "or answer it anyway and log the difference.",
)
@click.option("--repeats", is_flag=True,
              help="Answer a request its job already got the answer of again (marked in the ledger) instead of refusing it.")
@click.option("--latency", type=click.FloatRange(min=0), default=0.0, show_default=True,
              help="Seconds each answer waits, as a model's response time would.")
@json_option
def replay_server(history: str, host: str, port: int, strict: bool, repeats: bool, latency: float,
                  as_json: bool) -> None:
    """Serve a recorded jobHistory.json as an OpenAI-compatible endpoint.

    HISTORY is a jobHistory.json, a job or fixture folder, or a bundled
    fixture's name. Each request gets the answer recorded for that request.
    Many jobs can replay it at once (logist job run --all): each job, named
    by the X-Logist-Job header Logist sends, has its own queue, and
    GET /ledger lists every call served. The base URL is the first line on
    stdout (--json: a JSON object with base_url, on one line); Ctrl-C stops
    the server.

    \b
    Example:
      logist replay-server fixtures/wordcount/jobHistory.json --port 8765
      logist job run JOB --base-url http://127.0.0.1:8765/v1
    """
    try:
        server = ReplayLLMServer(fixture_path(history), strict=strict, host=host, port=port, repeats=repeats,
                                 latency=latency, keep_requests=False)  # it runs long: the ledger says what it served
    except OSError as exc:
        raise LogistError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    if as_json:
        click.echo(json.dumps({"base_url": server.base_url, "recording": history, "calls": server.total, "strict": strict}))
    else:
        click.echo(server.base_url)
    Application.info(f"Replaying {server.summary()} from {history} ({'strict' if strict else 'lenient'}). Ctrl-C stops.")
    if not _loopback(host):
        Application.info(f"Warning: listening on {host}, so other machines can reach this server.")
    # Each call served is a line on stderr while it serves; the level and the
    # SIGTERM handler are put back after (a program that calls main runs on).
    served = logging.getLogger("logist.replay.server")
    level = served.level
    served.setLevel(logging.INFO)
    previous = signal.signal(signal.SIGTERM, _stop_on_sigterm)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        server.stop()
        served.setLevel(level)
    refused = f"; {len(server.mismatches)} request(s) differed from the recording" if server.mismatches else ""
    jobs = f" for {len(server.queues)} jobs" if len(server.queues) > 1 else ""
    again = sum(1 for e in server.ledger if e["repeat"])
    repeated = f" ({again} answered again)" if again else ""
    Application.info(f"Stopped: answered {len(server.served)}{repeated} of {server.total} recorded calls{jobs}{refused}.")
