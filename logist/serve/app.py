"""The application of ``logist serve``: a guard, the pages, the decisions, the live updates.

Safe by default (each rule is one check in :class:`Guard`, which every
request passes before any route):

* The Host header must be one the server was started for (127.0.0.1,
  localhost or [::1] with its port, and any ``--allow-host``): a page of
  another name resolved to this machine (DNS rebinding) gets 400.
* A request that would change anything (any method but GET and HEAD) from
  another origin is refused (403): ``Sec-Fetch-Site`` must be
  ``same-origin`` (or ``none``, typed by the person), and ``Origin`` must
  be sent and be this server's. A browser sends it with every form it
  posts; a script sends it beside its token. A request without it (a
  token alone, as a process that found a token file would send) is
  refused: the token file lives where no sandboxed process can read it
  (:mod:`logist.serve.server`), and a change needs the header too. A page on another port of 127.0.0.1 is
  same-site but not same-origin, so it is refused too. From another site,
  a GET is taken only as a navigation (a link followed), never as a
  script's or an image's request.
* Every request needs the run's token: its cookie (HttpOnly,
  SameSite=Strict, named after the port), or ``Authorization: Bearer``.
  A ``GET ...?token=`` with the right token sets the cookie and redirects
  to the same URL without it, so the token leaves the address bar and the
  history. No credential: 401; a wrong one: 403.
* Every response carries ``Content-Security-Policy: default-src 'self';
  frame-ancestors 'none'`` (the pages link their style and script from
  ``/assets/``, shipped in the package; no inline script, no CDN).
* Nothing is kept by a browser or a proxy unless the response says so
  (``no-store`` otherwise): the assets named by their content are kept a
  year; a page is kept by the browser alone and validated every time
  (``no-cache, private`` and a strong ETag, :func:`pages.job_page_tag`), a
  304 while nothing it shows changed.
* GET never changes anything; a decision is a POST (a GET on its URL: 405).
* A job is found by its id in the jobs index (:meth:`JobsIndex.jobs`),
  never by a path taken from the URL: anything else is 404.

A decision goes through the method of :class:`logist.api.Job` the CLI
command calls, with the same arguments (:func:`decide`), under the job's
lock, plus ``at``: the entry the form was rendered for. A job that has moved on answers 409 with
its page as it is now; otherwise 303 back to the job's page, or to the list
as it was shown for a form of the list (its ``back``: only the list's own
query is kept) (POST-redirect-GET: the forms work with JavaScript off).

Live updates are Server-Sent Events, polled from the files' size and mtime
(:data:`POLL_SECONDS`; inotify does not see changes made on network and
container filesystems). A job's stream sends each new history entry as a
``step`` event whose id is its sequence number, then the job's state part
(``state``, no id) and the page's counters and title (``counts``, JSON): a
reconnecting browser sends ``Last-Event-ID`` and gets the entries after it,
none twice and none left out. The stream is told
the page's first entry (``from``; an earlier page: ``until`` too, and it
sends its state only), and holds a :class:`~logist.views.window.Follower`
of its own: each update reads only what was recorded since the one
before, nothing of the history before it. The jobs list's stream
sends the table (``jobs``) whenever a job's files change. Streams end when
the server stops (see :mod:`logist.serve.server`).
"""

from __future__ import annotations

import asyncio
import hmac
import os
from typing import Callable, Optional
from urllib.parse import parse_qs, parse_qsl, urlencode

from starlette.applications import Starlette
from starlette.concurrency import iterate_in_threadpool, run_in_threadpool
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

from ..api import Job, Jobs
from ..errors import JobBusyError, LogistError, MovedOnError, NotFoundError, TransitionError
from ..views.window import Follower
from . import http_api, pages, static
from .compression import Gzip, accepts_gzip

#: Seconds between two looks at the files a stream follows.
POLL_SECONDS = 0.4
#: Seconds a decision waits for the job's lock (a running step holds it) before answering 409.
LOCK_WAIT = 2.0
#: The largest form body read.
FORM_LIMIT = 1 << 20
POLICY = "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
SAFE_METHODS = ("GET", "HEAD")
#: A page's caching: kept by the browser only (never a shared cache), asked for again every time (its ETag).
REVALIDATE = "no-cache, private"


def cookie_name(port: int) -> str:
    # Cookies are per host, not per port: two servers on one machine keep their own.
    return f"logist_token_{port}"


class Guard:
    """The ASGI middleware every request passes (see the module's doc)."""

    def __init__(self, app, token: str, port: int, hosts: list[str]):
        self.app = app
        self.token = token
        self.port = port
        self.hosts = {h.lower() for name in hosts for h in (name, f"{name}:{port}")}
        self.origins = {f"http://{name}:{port}".lower() for name in hosts}

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        refusal = self.refusal(scope, headers)
        if refusal is not None:
            return await self._with_headers(refusal)(scope, receive, send)
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        if "token" in query and scope["method"] in SAFE_METHODS:
            if not self._matches(query["token"][-1]):
                return await self._with_headers(PlainTextResponse("Wrong token.\n", 403))(scope, receive, send)
            rest = urlencode([(k, v) for k, values in query.items() if k != "token" for v in values])
            clean = scope.get("root_path", "") + scope["path"] + (f"?{rest}" if rest else "")
            response = RedirectResponse(clean, 303)
            response.set_cookie(cookie_name(self.port), self.token, httponly=True, samesite="strict", path="/")
            return await self._with_headers(response)(scope, receive, send)
        given = self._given(headers)
        if given is None:
            return await self._with_headers(PlainTextResponse(
                "This needs the token logist serve printed (open the URL it printed).\n", 401))(scope, receive, send)
        if not self._matches(given):
            return await self._with_headers(PlainTextResponse("Wrong token.\n", 403))(scope, receive, send)

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                headers = message.get("headers", [])
                # Nothing is kept by a browser or a proxy unless the response says so (the named-by-content assets).
                cache = [] if any(name.lower() == b"cache-control" for name, _ in headers) else [(b"cache-control", b"no-store")]
                message = {**message, "headers": [*headers, *self._security_headers(), *cache]}
            await send(message)

        await self.app(scope, receive, send_with_headers)

    def refusal(self, scope, headers: dict) -> Optional[Response]:
        """400 for a Host not allowed, 403 for a cross-origin change; else None."""
        if headers.get("host", "").lower() not in self.hosts:
            return PlainTextResponse("Unknown Host.\n", 400)
        unsafe = scope["method"] not in SAFE_METHODS
        site = headers.get("sec-fetch-site")
        # From another site (another port of 127.0.0.1 is the same site, not
        # the same origin): only following a link to a page.
        if site is not None and site not in ("same-origin", "none") and (unsafe or headers.get("sec-fetch-mode") != "navigate"):
            return PlainTextResponse("Cross-site request refused.\n", 403)
        origin = headers.get("origin")
        if unsafe and origin is None:
            return PlainTextResponse(f"A change needs the Origin header of this server "
                                     f"(Origin: http://127.0.0.1:{self.port}).\n", 403)
        # The HTTP API refuses another origin on any method, GET included.
        api = scope["path"].startswith(http_api.PREFIX + "/")
        if (unsafe or api) and origin is not None and origin.lower() not in self.origins:
            return PlainTextResponse("Cross-origin request refused.\n", 403)
        return None

    def _given(self, headers: dict) -> Optional[str]:
        auth = headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            return auth[7:].strip()
        for part in headers.get("cookie", "").split(";"):
            name, _, value = part.strip().partition("=")
            if name == cookie_name(self.port):
                return value
        return None

    def _matches(self, given: str) -> bool:
        return hmac.compare_digest(given.encode("utf-8", "replace"), self.token.encode())

    @staticmethod
    def _security_headers() -> list[tuple[bytes, bytes]]:
        return [
            (b"content-security-policy", POLICY.encode()),
            (b"x-content-type-options", b"nosniff"),
            (b"referrer-policy", b"same-origin"),  # no-referrer would make a form send Origin: null
            (b"x-frame-options", b"DENY"),
        ]

    def _with_headers(self, response: Response) -> Response:
        for name, value in [*self._security_headers(), (b"cache-control", b"no-store")]:
            response.headers[name.decode()] = value.decode()
        return response


# -- Decisions -------------------------------------------------------------------------------------


#: Each decision a page can post (:data:`logist.serve.pages.ACTIONS`): the
#: :class:`logist.api.Job` method its CLI command calls, given the form.
DECISIONS: dict[str, Callable[[Job, dict[str, str], int], object]] = {
    "answer": lambda job, form, at: job.answer(form.get("text", ""), at=at),
    "skip": lambda job, form, at: job.skip_question(at=at),
    "approve": lambda job, form, at: job.approve(at=at, despite_checks=form.get("despite_checks") == "yes"),
    "reject": lambda job, form, at: job.reject(form.get("feedback", ""), at=at),
    "approve-command": lambda job, form, at: job.approve_command(at=at),
    "skip-command": lambda job, form, at: job.skip_command(at=at),
    "resubmit": lambda job, form, at: job.resubmit(form.get("feedback") or None, at=at),
    "suspend": lambda job, form, at: job.suspend(at=at),
    "resume": lambda job, form, at: job.resume(at=at),
    "restep": lambda job, form, at: job.restep(_entry_number(form.get("to", "")), at=at),
    "cancel": lambda job, form, at: job.cancel(at=at),
    "rerun": lambda job, form, at: job.rerun(at=at),
    "budgets": lambda job, form, at: job.set_budgets(**pages.parse_budgets(form), at=at),
}


#: The most digits a number in a URL, a header or a form may have (an entry's
#: number fits many times over; Python refuses to read one of over 4,300).
MAX_DIGITS = 18


class BadNumber(LogistError):
    """A number in a request that is no entry's (too many digits): 400."""


def digits(text: Optional[str], name: str) -> Optional[int]:
    """``text`` read as a number when it is one (ASCII digits only), else
    None; a :class:`BadNumber` when it has more than :data:`MAX_DIGITS`."""
    text = (text or "").strip()
    if not (text.isascii() and text.isdigit()):
        return None
    if len(text) > MAX_DIGITS:
        raise BadNumber(f"{name} is not the number of an entry ({len(text)} digits)")
    return int(text)


def _entry_number(text: str) -> Optional[int]:
    to = text.strip()
    number = digits(to, "to")
    if to and number is None:
        raise LogistError(f"restep needs the number of a history entry, not {to!r}")
    return number


def restep_confirmation(job: Job, at: int, form: dict[str, str]) -> str:
    """The page that says what a restep to ``form``'s entry would undo
    (:func:`logist.serve.pages.restep_page`); an entry the job has not: the
    error its restep would raise, before asking."""
    last = job.manifest().last_sequence
    to = _entry_number(form.get("to", ""))
    to = max(1, at - 1) if to is None else to
    if not 1 <= to < at <= last:
        if at != last:
            raise MovedOnError(f"job '{job.id}' has moved on: it is at entry {last}, not {at}, and {job.manifest().status} now")
        raise LogistError(f"job '{job.id}' has no earlier history entry {to} to restep to (it has 1 to {last - 1})")
    return "".join(pages.restep_page(job, at, to))


def decide(job: Job, action: str, form: dict[str, str], at: int) -> None:
    """``action`` on the job as its CLI command does it, decided at entry
    ``at`` (the job's :class:`~logist.api.Jobs` waits :data:`LOCK_WAIT` for its lock)."""
    DECISIONS[action](job, form, at)


def create_app(jobs: Jobs, token: str, port: int, hosts: list[str],
               stopping: Callable[[], bool] = lambda: False, page: int = pages.PAGE) -> Guard:
    """The application for ``jobs``, behind its :class:`Guard`. ``stopping``
    says when the server is stopping (the streams then end); ``page``: the
    history entries a job's page shows at most."""
    decisions = jobs.using(lock_timeout=LOCK_WAIT)  # a decision waits for a running step this long, then 409

    def find(job_id: str) -> Job:
        index = decisions.index()
        if job_id not in index.jobs:
            raise NotFoundError(f"no job {job_id!r} in the jobs index")
        return decisions.get(job_id, index)

    def not_found() -> Response:
        return PlainTextResponse("No such job.\n", 404)

    def html(text: str, status: int = 200) -> Response:
        return Response(text, status, media_type="text/html; charset=utf-8")

    def gzipped(request: Request) -> bool:
        return accepts_gzip(request.headers.get("accept-encoding", ""))

    def validated(tag: str) -> dict[str, str]:
        return {"ETag": tag, "Cache-Control": REVALIDATE}

    async def jobs_list(request: Request) -> Response:
        query = pages.ListQuery.read(request.query_params)
        tag = await run_in_threadpool(pages.jobs_page_tag, jobs, query.encoded(), gzipped(request))
        if pages.tag_matches(request.headers.get("if-none-match"), tag):
            return Response(status_code=304, headers=validated(tag))
        return Response(await run_in_threadpool(pages.jobs_page, jobs, query), media_type="text/html; charset=utf-8",
                        headers=validated(tag))

    async def export(request: Request) -> Response:
        try:
            job = await run_in_threadpool(find, request.path_params["job_id"])
        except NotFoundError:
            return not_found()
        try:
            patch = await run_in_threadpool(job.patch)
        except LogistError as exc:
            return PlainTextResponse(f"{exc}.\n", 409)
        return Response(patch.encode("utf-8", "surrogateescape"), media_type="text/x-diff; charset=utf-8", headers={
            "Content-Disposition": f'attachment; filename="{pages.patch_name(job.id)}"'})

    async def job_page(request: Request) -> Response:
        try:
            job = await run_in_threadpool(find, request.path_params["job_id"])
        except NotFoundError:
            return not_found()
        try:
            start = digits(request.query_params.get("from"), "from")
        except BadNumber as exc:
            return PlainTextResponse(f"{exc}.\n", 400)
        # Its tag first, then the page (pages.job_page_tag says why in that order).
        tag = await run_in_threadpool(pages.job_page_tag, job, start, page, gzipped(request))
        if pages.tag_matches(request.headers.get("if-none-match"), tag):
            return Response(status_code=304, headers=validated(tag))
        rows = pages.job_page(job, start=start, page=page)
        return StreamingResponse(iterate_in_threadpool(rows), media_type="text/html; charset=utf-8",
                                 headers=validated(tag))

    async def decision(request: Request) -> Response:
        action = request.path_params["action"]
        try:
            job = await run_in_threadpool(find, request.path_params["job_id"])
        except NotFoundError:
            return not_found()
        if action not in pages.ACTIONS:
            return not_found()
        if request.method != "POST":  # a decision is never made by a GET
            return PlainTextResponse("A decision is a POST (the page's form).\n", 405, headers={"Allow": "POST"})
        if request.headers.get("content-type", "").split(";")[0].strip() != "application/x-www-form-urlencoded":
            return PlainTextResponse("Send the form (application/x-www-form-urlencoded).\n", 415)
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > FORM_LIMIT:
                return PlainTextResponse("The form is too large.\n", 413)
        form = {k: v[-1] for k, v in parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True).items()}
        try:
            at = digits(form.get("at"), "at")
        except BadNumber:
            at = None
        if at is None:
            return PlainTextResponse("The form says no entry it was made for (at).\n", 400)
        try:
            if action == "restep" and form.get("confirm") == "ask":  # what it would undo, before anything is done
                shown = await run_in_threadpool(restep_confirmation, job, at, form)
                return html(shown)
            await run_in_threadpool(decide, job, action, form, at)
        except LogistError as exc:
            # The job as it is now, saying why nothing was done: 409 when its
            # state (or another command holding it) stood in the way.
            moved = isinstance(exc, (MovedOnError, TransitionError, JobBusyError))
            field = pages.TEXT_FIELDS.get(action, ("",))[0]
            kept = (action, form.get(field, "")) if field else None  # what was typed is shown again, never lost
            shown = await run_in_threadpool(
                lambda message: "".join(pages.job_page(job, message, page=page, kept=kept)), str(exc))
            return html(shown, 409 if moved else 400)
        if "back" in form:  # a form of the list: back to the list as it was shown
            back = pages.ListQuery.read(dict(parse_qsl(form["back"]))).encoded()
            return RedirectResponse("/" + (f"?{back}" if back else ""), 303)
        return RedirectResponse(pages.job_url(job.id), 303)

    async def job_events(request: Request) -> Response:
        try:
            job = await run_in_threadpool(find, request.path_params["job_id"])
        except NotFoundError:
            return not_found()
        try:
            last = _resume_from(request)
            first, until = _number(request, "from"), _number(request, "until")
        except BadNumber as exc:
            return PlainTextResponse(f"{exc}.\n", 400)
        if first is None:  # a page before the pages' first entry was said: the latest page
            first = await run_in_threadpool(lambda: pages.first_shown(job.manifest(), None, page))
        files = job.state_files

        async def stream():
            # An earlier page of the timeline (until): its state only. The
            # latest: the entries after the last one the page has, each
            # update reading what was appended since (the Follower, this
            # stream's own, holds where it stopped).
            follower = None if until is not None else await run_in_threadpool(Follower, job.stored, first, last)
            try:
                yield "retry: 1000\n\n"
                seen = None
                while not stopping():
                    now = _signature(files)
                    if now != seen:
                        seen = now
                        rows, state, counts = await run_in_threadpool(pages.job_update, job, follower, first, until, page)
                        for sequence, row in rows:
                            yield event("step", row, sequence)
                        yield event("state", state)
                        yield event("counts", counts)
                    await asyncio.sleep(POLL_SECONDS)
            finally:
                if follower is not None:
                    follower.close()

        return _event_stream(stream())

    async def jobs_events(request: Request) -> Response:
        query = pages.ListQuery.read(request.query_params)

        async def stream():
            yield "retry: 1000\n\n"
            seen = None
            while not stopping():
                now = await run_in_threadpool(_jobs_signature, jobs)
                if now != seen:
                    seen = now
                    yield event("jobs", await run_in_threadpool(pages.jobs_table, jobs, query))
                await asyncio.sleep(POLL_SECONDS)

        return _event_stream(stream())

    async def assets(request: Request) -> Response:
        found = static.find(request.path_params["name"])
        if found is None:
            return PlainTextResponse("Not found.\n", 404)
        name, for_good = found
        headers = {"Cache-Control": static.IMMUTABLE} if for_good else {}
        return Response(static.text(name), media_type=static.media_type(name), headers=headers)

    app = Starlette(routes=[
        Route("/", jobs_list, methods=["GET"]),
        Route("/events", jobs_events, methods=["GET"]),
        Route("/assets/{name}", assets, methods=["GET"]),
        Route("/jobs/{job_id}", job_page, methods=["GET"]),
        Route("/jobs/{job_id}/events", job_events, methods=["GET"]),
        Route("/jobs/{job_id}/export.patch", export, methods=["GET"]),
        # GET too, to tell an unknown job or action (404) from a GET on a decision (405).
        Route("/jobs/{job_id}/{action}", decision, methods=["GET", "POST"]),
        *http_api.routes(decisions, find, DECISIONS, stopping),
    ])
    return Guard(Gzip(app), token, port, hosts)


def event(kind: str, data: str, event_id: Optional[int] = None) -> str:
    """One Server-Sent Event. A carriage return in ``data`` is written as
    ``&#13;`` (the stream's format would read it as a line break; the page's
    HTML reads the reference back as the character)."""
    lines = data.replace("\r", "&#13;").split("\n")
    head = f"id: {event_id}\n" if event_id is not None else ""
    return head + f"event: {kind}\n" + "".join(f"data: {line}\n" for line in lines) + "\n"


def _resume_from(request: Request) -> int:
    """The last entry the browser has: its ``Last-Event-ID`` (a reconnect),
    else the page's ``after``."""
    for name, value in (("Last-Event-ID", request.headers.get("last-event-id")),
                        ("after", request.query_params.get("after"))):
        number = digits(value, name)
        if number is not None:
            return number
    return 0


def _number(request: Request, name: str) -> Optional[int]:
    return digits(request.query_params.get(name), name)


def _signature(paths) -> tuple:
    out = []
    for path in paths:
        try:
            stat = os.stat(path)
            out.append((stat.st_size, stat.st_mtime_ns))
        except OSError:
            out.append(None)
    return tuple(out)


def _jobs_signature(jobs: Jobs) -> tuple:
    return _signature(jobs.state_files())


def _event_stream(body) -> StreamingResponse:
    return StreamingResponse(body, media_type="text/event-stream",
                             headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})
