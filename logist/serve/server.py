"""Running ``logist serve``: the socket, the run's token, uvicorn.

The socket is bound here, before uvicorn starts, so that a port in use is
one clear line (and ``--port 0`` knows the port it got before it prints the
URL). The server's token is random, printed once as a ``?token=`` URL and
kept in a file readable by its owner only (0600), for scripts
(``Authorization: Bearer``): in Logist's private directory
(:mod:`logist.secrets.private`), which the sandbox hides from every
command, check and coding agent, so a model's command cannot read it and
decide for a person (a file beside the jobs directory would be readable
by them). It is never put on a command line. The file stays when the
server stops, and the next ``logist serve`` on the same jobs directory
takes the token up again, so a page left open across a restart goes on
(its cookie still holds), a decision made from it is taken, and a script
keeps its token; ``--new-token`` makes a new one (the old one then opens
nothing). A token file that is not a private regular file of this user
holding a token is never taken: a new token replaces it.

Why Starlette and uvicorn: the live updates are long-lived streams, one per
open page, which an asyncio server holds for the price of a coroutine each
(the standard library's http.server would hold a thread each, and has no
graceful stop); Starlette is small (no template engine, no ORM: the pages
are the report's own HTML pieces) and uvicorn stops on Ctrl-C with a
deadline for open connections (``timeout_graceful_shutdown``), and the
streams themselves end within :data:`logist.serve.app.POLL_SECONDS` of it.
"""

from __future__ import annotations

import errno
import hashlib
import ipaddress
import os
import re
import secrets
import signal
import socket
import stat
import threading
from pathlib import Path
from typing import Callable, Optional

import uvicorn

from ..errors import LogistError
from ..api import Jobs
from ..secrets import private
from .app import create_app
from .pages import PAGE

#: What stops the server (uvicorn's own: Ctrl-C and SIGTERM).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)

#: The names a loopback server answers to (Host header), besides any --allow-host.
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
#: What a token is (``secrets.token_urlsafe(32)``).
TOKEN = re.compile(r"[A-Za-z0-9_-]{43}")
#: Seconds uvicorn gives open connections once stopping (the streams end sooner).
GRACE_SECONDS = 2


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def token_path(jobs: Jobs) -> Path:
    """The file holding the run's token: in Logist's private directory, one
    per jobs directory (its name, and a digest of its real path)."""
    real = os.path.realpath(jobs.path)
    digest = hashlib.sha256(real.encode("utf-8", "surrogateescape")).hexdigest()[:16]
    return private.directory() / f"{jobs.path.name}-{digest}.serve-token"


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port``; a port in use is a LogistError."""
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a restart need not wait for TIME_WAIT
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise LogistError(f"port {port} on {host} is in use; choose another with --port N (--port 0: any free one)") from None
        raise LogistError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def kept_token(path: Path) -> Optional[str]:
    """The token an earlier run kept at ``path``, when the file is a regular
    file of this user, readable by it alone, holding one token; else None."""
    try:
        found = os.lstat(path)
        if (not stat.S_ISREG(found.st_mode) or found.st_uid != os.getuid()
                or stat.S_IMODE(found.st_mode) & 0o077 or found.st_size > 256):
            return None
        text = path.read_text(encoding="ascii").strip()
    except (OSError, ValueError):
        return None
    return text if TOKEN.fullmatch(text) else None


def write_token(path: Path, token: str) -> None:
    private.ensure()
    try:
        private.write_secret(path, token + "\n")
    except OSError as exc:
        raise LogistError(f"cannot write the token file {path}: {exc.strerror or exc}") from None


def serve(jobs: Jobs, host: str, port: int, allow_hosts: tuple[str, ...] = (),
          announce: Callable[[str, int, Path], None] = lambda url, port, path: print(url), page: int = PAGE,
          new_token: bool = False) -> None:
    """Serve ``jobs`` until Ctrl-C (or SIGTERM). The caller has checked
    that a host other than loopback was asked for explicitly;
    ``announce(url, port, token_file)`` tells the person the URL with the token, once.
    ``new_token``: make a new token instead of taking up the one kept."""
    if not jobs.exists():
        raise LogistError(f"no jobs directory at {jobs.path} (logist init makes one)")
    path = token_path(jobs)
    private.ensure()
    token = None if new_token else kept_token(path)
    if token is None:
        token = secrets.token_urlsafe(32)
        write_token(path, token)
    sock = bind(host, port)
    port = sock.getsockname()[1]
    names = [*LOOPBACK_NAMES, *allow_hosts]
    if not is_loopback(host) and host not in ("0.0.0.0", "::"):
        names.append(host if ":" not in host else f"[{host.strip('[]')}]")
    config = uvicorn.Config(None, log_level="warning", access_log=False, lifespan="off",
                            timeout_graceful_shutdown=GRACE_SECONDS)
    server = uvicorn.Server(config)
    config.app = create_app(jobs, token, port, names, stopping=lambda: server.should_exit, page=page)
    url_host = "127.0.0.1" if host in ("0.0.0.0", "::") or is_loopback(host) else names[-1]
    # From the announcement until uvicorn listens for Ctrl-C and SIGTERM itself, one that comes stops the
    # server as soon as it has started: a script that stops it as soon as it read the URL was not heard
    # once (asyncio's own Ctrl-C handler, installed in that window, cancelled uvicorn's start, which went on).
    early: list[int] = []

    def stop(sig: int, frame) -> None:
        early.append(sig)
        server.should_exit = True

    held = {sig: signal.signal(sig, stop) for sig in STOP_SIGNALS} \
        if threading.current_thread() is threading.main_thread() else {}
    try:
        announce(f"http://{url_host}:{port}/?token={token}", port, path)
        # uvicorn stops on Ctrl-C and SIGTERM, then raises the signal again (to ``stop``, which it puts back).
        server.run(sockets=[sock])
    finally:
        for sig, handler in held.items():
            signal.signal(sig, handler)
        sock.close()
    if early:
        signal.raise_signal(early[0])  # the process ends as that signal ends it
