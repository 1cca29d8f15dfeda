"""``logist serve`` as a real process on a free port, and a real headless
Chromium (Debian's: ``conftest.chromium_executable``), driven by Playwright
for Python; none of Playwright's own browsers is downloaded.

Each test module here imports the fixtures it uses from this one and marks
its tests ``serve`` (``pytest -m serve``); those that need the browser are
also marked ``browser`` (``pytest -m browser``)."""

from __future__ import annotations

import http.client
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Optional

import pytest

from conftest import chromium_executable
from forked import ForkedPopen

CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
URL_LINE = re.compile(r"at (http://127\.0\.0\.1:(\d+)/)\?token=(\S+)")


@dataclass
class Served:
    process: subprocess.Popen
    base: str
    port: int
    token: str

    @property
    def login(self) -> str:
        return f"{self.base}?token={self.token}"

    def request(self, method: str, path: str, headers: Optional[dict] = None, body: Optional[bytes] = None,
                token: bool = True, origin: bool = True) -> http.client.HTTPResponse:
        """A real HTTP request to the server (the body read into ``.data``),
        as a script sends it: a change carries this server's ``Origin``
        unless ``origin`` is false or the headers name one."""
        sent = {"Host": f"127.0.0.1:{self.port}", **(headers or {})}
        if token and "Authorization" not in sent and "Cookie" not in sent:
            sent["Authorization"] = f"Bearer {self.token}"
        if origin and method not in ("GET", "HEAD") and "Origin" not in sent:
            sent["Origin"] = f"http://127.0.0.1:{self.port}"
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        connection.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        for name, value in sent.items():
            connection.putheader(name, value)
        if body is not None:
            connection.putheader("Content-Length", str(len(body)))
        connection.endheaders(body)
        response = connection.getresponse()
        response.data = response.read()
        connection.close()
        return response

    def stop(self, sig: int = signal.SIGINT, timeout: float = 10) -> float:
        """Send ``sig``; the seconds the process took to exit."""
        start = time.monotonic()
        self.process.send_signal(sig)
        self.process.wait(timeout)
        return time.monotonic() - start


def needed(module: str, install: str):
    """Import ``module``, or skip the test (fail it in CI, where .ci/run installs it)."""
    try:
        return __import__(module, fromlist=["_"])
    except ImportError:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{module} is not installed; .ci/run installs it ({install})")
        pytest.skip(f"{module} is not installed ({install}); in CI this is a failure")


def start_server(*args: str, port: int = 0) -> Served:
    process = ForkedPopen(
        [sys.executable, "-m", "logist", "serve", "--port", str(port), *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ),
    )
    line = process.stdout.readline()
    found = URL_LINE.search(line)
    if found is None:
        process.kill()
        raise AssertionError(f"logist serve printed {line!r}; stderr: {process.stderr.read()}")
    return Served(process, found.group(1), int(found.group(2)), found.group(3))


@pytest.fixture
def served(jobs):
    """``logist serve`` on the test's jobs directory, stopped (SIGINT) after the test."""
    needed("starlette", "pip install -e '.[serve]'")
    needed("uvicorn", "pip install -e '.[serve]'")
    running: list[Served] = []

    def start(*args: str, port: int = 0) -> Served:
        server = start_server(*args, port=port)
        running.append(server)
        return server

    yield start
    for server in running:
        if server.process.poll() is None:
            server.process.send_signal(signal.SIGINT)
            try:
                server.process.wait(10)
            except subprocess.TimeoutExpired:
                server.process.kill()
                server.process.wait()


#: The one Chromium of this test process, and how many test modules' fixtures hold it.
_chromium_shared: dict = {}


@pytest.fixture(scope="session")
def browser():
    """One headless Chromium per test process (each test gets its own context).
    Every test module that imports this fixture gets a session fixture of its
    own; they share one Playwright and one browser (Playwright's sync API runs
    one per thread), closed when the last of them is done."""
    if not _chromium_shared:
        playwright_api = needed("playwright.sync_api", "pip install playwright; no browser download: Debian's Chromium is used")
        executable = chromium_executable()
        manager = playwright_api.sync_playwright()
        playwright = manager.__enter__()
        # launch() gives the browser a fresh --user-data-dir of its own (it
        # refuses one in args: that is launch_persistent_context's).
        instance = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_FLAGS)
        _chromium_shared.update(manager=manager, browser=instance, users=0)
    _chromium_shared["users"] += 1
    yield _chromium_shared["browser"]
    _chromium_shared["users"] -= 1
    if not _chromium_shared["users"]:
        _chromium_shared["browser"].close()
        _chromium_shared["manager"].__exit__(None, None, None)
        _chromium_shared.clear()


def wait_for(condition, timeout: float = 2.0, every: float = 0.05):
    """``condition()``'s first true value within ``timeout`` seconds, else AssertionError."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {condition}")
        time.sleep(every)
