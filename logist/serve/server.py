"""Running ``logist serve``: the socket, the run's token, uvicorn.

The socket is bound here, before uvicorn starts, so that a port in use is
one clear line (and ``--port 0`` knows the port it got before it prints the
URL). Each run makes a new random token, printed once as a ``?token=`` URL
and written to a file beside the jobs directory, readable by its owner only
(0600), for scripts (``Authorization: Bearer``); it is never put on a
command line, and the file is removed when the server stops.

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
import ipaddress
import os
import secrets
import socket
from pathlib import Path
from typing import Callable

import uvicorn

from ..errors import LogistError
from ..api import Jobs
from .app import create_app
from .pages import PAGE

#: The names a loopback server answers to (Host header), besides any --allow-host.
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
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
    """The file holding the run's token: beside the jobs directory."""
    return jobs.path.parent / f".{jobs.path.name}.serve-token"


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


def write_token(path: Path, token: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)  # an older file may have had other permissions
        os.write(fd, (token + "\n").encode())
    finally:
        os.close(fd)


def serve(jobs: Jobs, host: str, port: int, allow_hosts: tuple[str, ...] = (),
          announce: Callable[[str, int, Path], None] = lambda url, port, path: print(url), page: int = PAGE) -> None:
    """Serve ``jobs`` until Ctrl-C (or SIGTERM). The caller has checked
    that a host other than loopback was asked for explicitly;
    ``announce(url, port, token_file)`` tells the person the URL with the token, once."""
    if not jobs.exists():
        raise LogistError(f"no jobs directory at {jobs.path} (logist init makes one)")
    sock = bind(host, port)
    port = sock.getsockname()[1]
    token = secrets.token_urlsafe(32)
    names = [*LOOPBACK_NAMES, *allow_hosts]
    if not is_loopback(host) and host not in ("0.0.0.0", "::"):
        names.append(host if ":" not in host else f"[{host.strip('[]')}]")
    path = token_path(jobs)
    write_token(path, token)
    config = uvicorn.Config(None, log_level="warning", access_log=False, lifespan="off",
                            timeout_graceful_shutdown=GRACE_SECONDS)
    server = uvicorn.Server(config)
    config.app = create_app(jobs, token, port, names, stopping=lambda: server.should_exit, page=page)
    url_host = "127.0.0.1" if host in ("0.0.0.0", "::") or is_loopback(host) else names[-1]
    announce(f"http://{url_host}:{port}/?token={token}", port, path)
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
        try:
            if path.read_text().strip() == token:
                path.unlink()
        except OSError:
            pass
