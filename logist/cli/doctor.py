"""``logist doctor`` and ``logist models``: where calls go, and what is there.

``doctor`` shows the resolved endpoint and where it came from, the model of
each role and its price, whether a key is set (never the key), the request
settings, and pings the endpoint's ``GET /models``. ``models`` lists the
endpoint's models. Both ask through :class:`logist.api.Jobs` (its
:meth:`~logist.api.Jobs.check_settings`), whose endpoints a step's calls use too.
"""

from __future__ import annotations

import time
from typing import Optional

import click

from ..api import NOT_CONFIGURED
from ..errors import LLMCallError, LogistError
from ..secrets.redact import url_shown
from .app import EXIT_ERROR, Application, pass_app
from .common import base_url_option, json_option


@click.command()
@base_url_option
@click.option("--probe", is_flag=True, help="Make one tiny call per model (at most 16 tokens) to find which "
              "structured-output form the endpoint takes.")
@json_option
@pass_app
def doctor(app: Application, base_url: Optional[str], probe: bool, as_json: bool) -> None:
    """Check where calls go: endpoint, key, models, windows, and a ping of /models.

    Exits 1 when no endpoint is configured or the endpoint does not answer.

    \b
    Example:
      logist doctor
      logist doctor --base-url http://localhost:11434/v1 --probe
    """
    jobs = app.jobs
    config = jobs.config()
    found = jobs.endpoint(base_url)
    source = found.named_by
    if source == "--base-url" and click.get_current_context().get_parameter_source("base_url").name == "ENVIRONMENT":
        source = "LOGIST_BASE_URL"
    variable = found.key_variable
    endpoint = found.url
    roles = sorted(jobs.roles().items())
    report: dict = {
        "endpoint": url_shown(endpoint) if endpoint else endpoint,
        "endpoint_from": source or ("the default, as a key is set" if endpoint else None),
        "api_key_set": variable is not None,
        "api_key_variable": variable,
        "roles": {},
        "request_timeout": config.request_timeout,
        "max_retries": config.max_retries,
        "stream": config.stream,
        "ping": None,
        "agents": {agent.name: {"path": agent.path, "version": agent.version, "tested": agent.tested}
                   for agent in jobs.agents(versions=True) if agent.path},
    }
    listed: Optional[set[str]] = None
    settings = None
    if endpoint is not None:
        settings = jobs.check_settings(base_url)
        settings.endpoints.client(settings.base_url, settings.api_key)  # built before the clock starts: the ping times the endpoint
        started = time.monotonic()
        try:
            names = jobs.models(settings)
            listed = set(names)
            report["ping"] = {"ok": True, "models": len(names), "seconds": round(time.monotonic() - started, 3)}
        except LogistError as exc:
            report["ping"] = {"ok": False, "error": str(exc)}
    probed: dict[str, str] = {}
    for role, manifest in roles:
        asked = settings if report["ping"] and report["ping"]["ok"] else None
        facts = jobs.role_facts(manifest, asked)
        model, setting = facts.model, facts.structured_output
        if probe and asked is not None and model not in probed and not setting.startswith("off"):
            try:
                probed[model] = jobs.probe(asked, model, setting)
            except LLMCallError as exc:
                probed[model] = f"none worked: {exc}"
        report["roles"][role] = {
            "model": model,
            "model_from": facts.model_from,
            "price": facts.price.model_dump() if facts.price else None,
            "listed": (model in listed) if listed else None,
            "context_window": facts.context_window,
            "context_window_from": facts.context_window_from,
            "max_tokens": facts.max_tokens,
            "structured_output": setting,
            "form_found": probed.get(model),
            "agent": manifest.agent,
        }
    healthy = endpoint is not None and report["ping"]["ok"]
    if as_json:
        app.print_json(report)
    else:
        echo = app.echo
        if endpoint is None:
            echo(f"endpoint   none: {NOT_CONFIGURED}")
        else:
            echo(f"endpoint   {report['endpoint']}  (from {report['endpoint_from']})")
        echo(f"api key    {'set, in ' + variable if variable else 'not set (LOGIST_API_KEY or OPENAI_API_KEY; local servers need none)'}")
        for i, (role, facts) in enumerate(report["roles"].items()):
            price = facts["price"]
            cost = (f"${price['input_per_million']:g} in, ${price['output_per_million']:g} out per million tokens"
                    if price else "price unknown: add it to \"prices\" in config.json")
            where = "" if facts["listed"] is None else ("" if facts["listed"] else "; not among the endpoint's models")
            run_by = f"; its steps are runs of the agent {facts['agent']}" if facts["agent"] else ""
            echo(f"{'models' if i == 0 else '':<10} {role}: {facts['model']} ({cost}{where}), named by "
                 f"{facts['model_from']}{run_by}")
            window = (f"context window {facts['context_window']:,} tokens (from {facts['context_window_from']})"
                      if facts["context_window"] else "context window unknown (set context_window in config.json's "
                      "model_settings: a request that outgrows it then stops before the call)")
            found = f"; the endpoint takes {facts['form_found']}" if facts["form_found"] else \
                ("" if probe else " (doctor --probe finds what the endpoint takes)")
            echo(f"{'':<10}   {window}; answers up to {facts['max_tokens']:,} tokens; "
                 f"structured output {facts['structured_output']}{found}")
        echo(f"requests   timeout {config.request_timeout:g} s (a timed-out request is not sent again), "
             f"{config.max_retries} retries for 429, 5xx and connection failures, "
             f"{'streamed when the endpoint streams' if config.stream else 'not streamed'}")
        agents = report["agents"]
        echo("agents     " + ("; ".join(f"{name} {facts['version'] or '(version unknown)'} ({facts['path']})"
                                        for name, facts in agents.items())
                              or "none installed (logist agents lists those a role may name)"))
        ping = report["ping"]
        if ping is None:
            echo("ping       skipped: no endpoint")
        elif ping["ok"]:
            echo(f"ping       GET /models: {ping['models']} model{'s' if ping['models'] != 1 else ''} listed in {ping['seconds']:.2f} s")
        else:
            echo(f"ping       GET /models failed: {ping['error']}")
    if not healthy:
        app.exit(EXIT_ERROR)


@click.command()
@base_url_option
@json_option
@pass_app
def models(app: Application, base_url: Optional[str], as_json: bool) -> None:
    """List the models the endpoint serves (its GET /models).

    \b
    Example:
      logist models --base-url http://localhost:11434/v1
    """
    settings = app.jobs.check_settings(base_url)
    try:
        names = app.jobs.models(settings)
    except LLMCallError as exc:
        raise LogistError(f"{exc} (endpoint {url_shown(settings.base_url)})") from None
    app.display(as_json, names, lambda: [app.echo(name) for name in names])


@click.command()
@json_option
@pass_app
def agents(app: Application, as_json: bool) -> None:
    """List the coding agents a role may name ("agent" in a role file), and which are installed.

    \b
    Example:
      logist agents
      logist doctor     (also asks each installed agent its version)
    """
    found = app.jobs.agents()
    rows = [{"name": a.name, "program": a.program, "api": a.api, "installed": a.path, "tested": a.tested,
             "description": a.description} for a in found]

    def show() -> None:
        for row in rows:
            where = row["installed"] or ("(the role's agent_command)" if not row["program"] else "not installed")
            app.echo(f"{row['name']:<12} {row['api']:<10} {where}")
            app.echo(f"{'':<12} {row['description']}")

    app.display(as_json, rows, show)
