"""The HTTP API of ``logist serve``: what :mod:`logist.api` offers, as JSON.

Another program (an editor plugin, a chat bot, a CI step) lists and reads
jobs, creates one, steps or runs it, takes any decision a person takes, and
follows a job's entries as they are recorded. Every route is behind the
same :class:`~logist.serve.app.Guard` as the pages: the token as
``Authorization: Bearer``, the same Host rule, and an ``Origin`` other than
the server's own refused (403) on every route of the API, GET included.

A decision is made by the same :data:`logist.serve.app.DECISIONS` entry the
page's form posts to (one implementation of each), with the body's fields
as the form's; ``at`` (the entry the caller decided on) is optional here:
when given, a job that has moved on since answers 409 and nothing is done.

:data:`ENDPOINTS` is the one list of the routes: the server's routes and
its OpenAPI description (``GET /api/v1/openapi.json``) are both made from it,
and so is the table of docs/http-api.md (this module imports Starlette only
when the server makes its routes, so the docs' writer reads it without the
``serve`` extra).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Optional

from pydantic import ValidationError

from ..api import BUDGETS, Job, Jobs, JobSpec
from ..errors import JobBusyError, LogistError, MovedOnError, NotFoundError, TransitionError

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

PREFIX = "/api/v1"
#: The largest JSON body read.
BODY_LIMIT = 1 << 20
#: The most entries one read of a history returns.
MAX_ENTRIES = 1000
#: Seconds between two looks at a followed job's files.
POLL_SECONDS = 0.4


class Refused(Exception):
    """An answer other than 200, with its message."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Endpoint:
    method: str
    path: str
    summary: str
    #: The handler's name in :class:`_Handlers`.
    handler: str
    #: What the JSON body may hold (OpenAPI schema properties), for a POST.
    body: dict[str, Any] = field(default_factory=dict)
    #: Query parameters (name -> description).
    query: dict[str, str] = field(default_factory=dict)


_TEXT = {"type": "string"}
_AT = {"type": "integer", "description": "the history entry the decision was made on: 409 if the job moved on"}
_BUDGET = {"type": "number", "description": "budgets: the new limit (left out: kept)"}

#: Every route of the API (the server's routes and its OpenAPI description are made from this list).
ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint("GET", "/jobs", "List the jobs of the jobs index, each with its state.", "list_jobs"),
    Endpoint("POST", "/jobs", "Create a job: `job_id` and the fields of a job's spec (`JobSpec`, what "
             "`logist job create` takes: objective, details, acceptance, checks, skill, params, budgets, ...).",
             "create_job", body={"job_id": _TEXT, "...": {"description": "JobSpec's fields"}}),
    Endpoint("GET", "/jobs/{job_id}", "A job's state: its manifest, and a stop asked for while a step runs.",
             "read_job"),
    Endpoint("GET", "/jobs/{job_id}/entries", "A job's history entries as recorded, in order.", "entries",
             query={"after": "only the entries after this sequence number (default 0)",
                    "limit": f"at most this many (default 100, at most {MAX_ENTRIES})"}),
    Endpoint("GET", "/jobs/{job_id}/events",
             "Server-Sent Events: each entry as it is recorded (`entry`, its id the sequence number); "
             "`Last-Event-ID` or `after` resumes.", "events", query={"after": "the last entry the caller has"}),
    Endpoint("POST", "/jobs/{job_id}/turn", "One role turn (`logist job step`): the steps made.", "turn"),
    Endpoint("POST", "/jobs/{job_id}/run", "Step until the job needs a person or is done (`logist job run`).",
             "run"),
    Endpoint("POST", "/jobs/{job_id}/decisions/{action}",
             "A person's decision: answer (text), skip, approve, reject (feedback), approve-command, "
             "skip-command, resubmit (feedback), suspend, resume, restep (to), cancel, rerun, budgets (the "
             "budget fields, as `logist job set` takes them), as the page's forms take them.",
             "decide", body={"at": _AT, "text": _TEXT, "feedback": _TEXT, "to": _TEXT,
                             "despite_checks": {"type": "boolean", "description": "approve although a check failed "
                                                "or has not run on the workspace's commit (recorded)"},
                             **{name: _BUDGET for name in BUDGETS}}),
    Endpoint("GET", "/jobs/{job_id}/patch", "The job's work since its baseline as one patch, as "
             "`logist job export --patch` writes it (text; 400 when it has no commits).", "patch"),
    Endpoint("GET", "/openapi.json", "This API's OpenAPI description.", "openapi"),
)


def openapi() -> dict:
    """The OpenAPI 3.1 description of :data:`ENDPOINTS`."""
    paths: dict[str, dict] = {}
    schemas: dict[str, dict] = {}
    for e in ENDPOINTS:
        operation: dict[str, Any] = {"summary": e.summary, "operationId": e.handler,
                                     "responses": {"200": {"description": "JSON"}}}
        parameters = [{"name": name, "in": "path", "required": True, "schema": _TEXT}
                      for name in ("job_id", "action") if "{" + name + "}" in e.path]
        parameters += [{"name": name, "in": "query", "required": False, "description": text,
                        "schema": {"type": "integer"}} for name, text in e.query.items()]
        if parameters:
            operation["parameters"] = parameters
        if e.handler == "create_job":  # a job's spec, as pydantic says it, plus its id
            spec = JobSpec.model_json_schema(ref_template="#/components/schemas/{model}")
            schemas.update(spec.pop("$defs", {}))
            spec["properties"] = {"job_id": _TEXT, **spec["properties"]}
            spec["required"] = ["job_id", *spec.get("required", [])]
            operation["requestBody"] = {"content": {"application/json": {"schema": spec}}}
        elif e.body:
            operation["requestBody"] = {"content": {"application/json": {"schema": {
                "type": "object", "properties": e.body, "additionalProperties": False}}}}
        paths.setdefault(PREFIX + e.path, {})[e.method.lower()] = operation
    return {
        "openapi": "3.1.0",
        "info": {"title": "logist serve", "version": "1",
                 "description": "Logist's jobs over HTTP. Every request needs the token `logist serve` printed, "
                                "as `Authorization: Bearer TOKEN`."},
        "components": {"securitySchemes": {"token": {"type": "http", "scheme": "bearer"}}, "schemas": schemas},
        "security": [{"token": []}],
        "paths": paths,
    }


def _summary(job: Job) -> dict:
    manifest = job.manifest()
    return {"job_id": job.id, "status": str(manifest.status), "role": manifest.turn.role,
            "last_sequence": manifest.last_sequence, "stop_request": job.stop_request()}


class _Handlers:
    """The routes' work, each run in a thread (they read and write job files)."""

    def __init__(self, jobs: Jobs, find: Callable[[str], Job], decisions: dict, stopping: Callable[[], bool]):
        self.jobs, self.find, self.decisions, self.stopping = jobs, find, decisions, stopping

    def list_jobs(self, request: Request, body: dict) -> Any:
        return [_summary(self.jobs.get(job_id)) for job_id in self.jobs.ids()]

    def create_job(self, request: Request, body: dict) -> Any:
        job_id = body.pop("job_id", None)
        if not isinstance(job_id, str) or not job_id:
            raise Refused(400, "job_id: a job id is needed")
        try:
            spec = JobSpec.model_validate(body)
        except ValidationError as exc:
            raise Refused(400, "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()))
        return _summary(self.jobs.create(job_id, spec=spec))

    def read_job(self, request: Request, body: dict) -> Any:
        job = self._job(request)
        return {**_summary(job), "manifest": job.manifest().model_dump(mode="json")}

    def entries(self, request: Request, body: dict) -> Any:
        job = self._job(request)
        after = _count(request.query_params.get("after"), 0)
        limit = min(_count(request.query_params.get("limit"), 100), MAX_ENTRIES)
        return _entries_after(job, after, limit)

    def turn(self, request: Request, body: dict) -> Any:
        return [r.as_dict() for r in self._job(request).turn()]

    def run(self, request: Request, body: dict) -> Any:
        return [r.as_dict() for r in self._job(request).run()]

    def decide(self, request: Request, body: dict) -> Any:
        job = self._job(request)
        action = request.path_params["action"]
        if action not in self.decisions:
            raise Refused(404, f"no decision {action!r}: one of {', '.join(self.decisions)}")
        at = body.get("at")
        if at is not None and (not isinstance(at, int) or isinstance(at, bool) or at < 0):
            raise Refused(400, "at: the number of a history entry")
        form = {k: v for k, v in body.items() if k in ("text", "feedback", "to") and isinstance(v, str)}
        form.update({k: str(v) for k, v in body.items()
                     if k in BUDGETS and isinstance(v, (int, float, str)) and not isinstance(v, bool)})
        if body.get("despite_checks") is True:  # the page's form says "yes"
            form["despite_checks"] = "yes"
        self.decisions[action](job, form, at)
        return _summary(job)

    def patch(self, request: Request, body: dict) -> Any:
        from starlette.responses import Response

        return Response(self._job(request).patch().encode("utf-8", "surrogateescape"),
                        media_type="text/x-diff; charset=utf-8")

    def openapi(self, request: Request, body: dict) -> Any:
        return openapi()

    def events(self, request: Request, body: dict) -> Response:
        return _events(self, request)

    def _job(self, request: Request) -> Job:
        try:
            return self.find(request.path_params["job_id"])
        except NotFoundError as exc:
            raise Refused(404, str(exc)) from None


def _count(text: Optional[str], default: int) -> int:
    """A count from the query: at most 18 digits (a longer one is refused, not parsed)."""
    if text is None or text == "":
        return default
    if not (text.isascii() and text.isdigit()) or len(text) > 18:
        raise Refused(400, f"not a count: {text[:40]!r}")
    return int(text)


def _entries_after(job: Job, after: int, limit: int) -> list[dict]:
    out = []
    for entry in job.entries():
        if entry.sequence > after:
            out.append(entry.model_dump(mode="json", exclude_none=True))
            if len(out) >= limit:
                break
    return out


async def _body(request: Request) -> dict:
    if request.method != "POST":
        return {}
    raw = b""
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > BODY_LIMIT:
            raise Refused(413, "the body is too large")
    if not raw.strip():
        return {}
    if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
        raise Refused(415, "send JSON (Content-Type: application/json)")
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        raise Refused(400, "the body is not JSON") from None
    if not isinstance(data, dict):
        raise Refused(400, "the body is not a JSON object")
    return data


def _route(handlers: _Handlers, endpoint: Endpoint) -> Callable[["Request"], Awaitable["Response"]]:
    from starlette.concurrency import run_in_threadpool
    from starlette.responses import JSONResponse, Response

    work = getattr(handlers, endpoint.handler)

    async def route(request: Request) -> Response:
        try:
            body = await _body(request)
            result = await run_in_threadpool(work, request, body)
            return result if isinstance(result, Response) else JSONResponse(result)
        except Refused as exc:
            return JSONResponse({"error": str(exc)}, exc.status)
        except (MovedOnError, TransitionError, JobBusyError) as exc:
            return JSONResponse({"error": str(exc)}, 409)
        except LogistError as exc:
            return JSONResponse({"error": str(exc)}, 400)

    return route


def _events(handlers: _Handlers, request: "Request") -> "Response":
    from starlette.concurrency import run_in_threadpool
    from starlette.responses import StreamingResponse

    job = handlers._job(request)
    last = request.headers.get("last-event-id") or request.query_params.get("after")
    after = _count(last, 0)

    async def stream():
        nonlocal after
        yield "retry: 1000\n\n"
        seen = None
        while not handlers.stopping():
            now = await run_in_threadpool(lambda: job.manifest().last_sequence)
            if now != seen:
                seen = now
                for entry in await run_in_threadpool(_entries_after, job, after, MAX_ENTRIES):
                    after = entry["sequence"]
                    yield f"id: {after}\nevent: entry\ndata: {json.dumps(entry, ensure_ascii=True)}\n\n"
            await asyncio.sleep(POLL_SECONDS)

    return StreamingResponse(stream(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})


def routes(jobs: Jobs, find: Callable[[str], Job], decisions: dict,
           stopping: Callable[[], bool] = lambda: False) -> list["Route"]:
    """The API's routes for the server's jobs; ``find`` gives a job of the
    index by id (NotFoundError otherwise); ``decisions``: the pages' table."""
    from starlette.routing import Route

    handlers = _Handlers(jobs, find, decisions, stopping)
    return [Route(PREFIX + e.path, _route(handlers, e), methods=[e.method]) for e in ENDPOINTS]


def markdown() -> str:
    """The table of docs/http-api.md: each route, what it does and what its body may hold."""
    lines = ["| method | path | what it does | JSON body |", "|---|---|---|---|"]
    for e in ENDPOINTS:
        body = ", ".join(f"`{name}`" for name in e.body if name != "...") + (", and JobSpec's" if "..." in e.body else "")
        query = "".join(f" `?{name}=`: {text}." for name, text in e.query.items())
        lines.append(f"| {e.method} | `{PREFIX}{e.path}` | {e.summary}{query} | {body} |")
    return "\n".join(lines) + "\n"
