"""A real OpenAI-compatible HTTP server on 127.0.0.1 that answers from a script.

Tests, the offline demo and people who write their own roles use it to run
jobs through the real ``openai`` client with no network and no key::

    from logist.testing import ScriptedLLMServer, Reply

    with ScriptedLLMServer(['{"action": "MESSAGE", "message": "hi"}', Reply(status=500)]) as server:
        step_once(job, base_url=server.base_url)

Each request to ``POST /v1/chat/completions`` takes the next item of the
script: a string is the assistant's content; a :class:`Reply` can also set an
HTTP error status, a delay (to provoke a client timeout) or the usage. Every
request body is kept in :attr:`ScriptedLLMServer.requests`. Built on the
standard library's ``http.server``: no hand-written HTTP parsing.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterable, Optional, Union


@dataclass
class Reply:
    content: Optional[str] = None
    status: int = 200
    delay: float = 0.0
    #: ``{"prompt_tokens": N, "completion_tokens": M}``; None = estimated from
    #: the text (4 characters a token); ``False`` = no usage in the answer.
    usage: Union[dict, None, bool] = None
    error_message: str = "scripted failure"


Script = Iterable[Union[str, Reply]]


def estimate_usage(messages: list, content: str) -> dict:
    prompt_chars = sum(len(m.get("content") or "") for m in messages)
    return {
        "prompt_tokens": max(1, prompt_chars // 4),
        "completion_tokens": max(1, len(content) // 4),
        "total_tokens": max(1, prompt_chars // 4) + max(1, len(content) // 4),
    }


class _Handler(BaseHTTPRequestHandler):
    server: "_Server"
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):  # keep test output clean
        pass

    def _send(self, status: int, body: dict, headers: Optional[dict] = None) -> None:
        data = json.dumps(body).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        try:
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
            pass

    def do_GET(self):
        if self.path.rstrip("/").endswith("/models"):
            self._send(200, {"object": "list", "data": [{"id": "scripted", "object": "model", "owned_by": "logist"}]})
        else:
            self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
            return
        try:
            body = json.loads(raw)
        except ValueError:
            self._send(400, {"error": {"message": "request body is not JSON", "type": "invalid_request_error"}})
            return
        owner = self.server.owner
        reply = owner._next(body, dict(self.headers))
        if reply is None:
            self._send(
                500,
                {"error": {"message": f"the script has no answer left for request {len(owner.requests)}", "type": "script_exhausted"}},
                {"x-should-retry": "false"},
            )
            return
        if reply.delay:
            time.sleep(reply.delay)
        if reply.status != 200:
            self._send(
                reply.status,
                {"error": {"message": reply.error_message, "type": "scripted_error", "code": reply.status}},
                {"retry-after-ms": "10"},
            )
            return
        content = reply.content or ""
        answer = {
            "id": f"chatcmpl-scripted-{len(owner.requests)}",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model", "scripted"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        }
        if reply.usage is not False:
            answer["usage"] = reply.usage or estimate_usage(body.get("messages") or [], content)
        self._send(200, answer)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    owner: "ScriptedLLMServer"


class ScriptedLLMServer:
    """An OpenAI-compatible server answering from ``script`` in order."""

    def __init__(self, script: Script = (), host: str = "127.0.0.1", port: int = 0):
        self._script = [s if isinstance(s, Reply) else Reply(content=s) for s in script]
        self._lock = threading.Lock()
        self.requests: list[dict] = []
        self.headers: list[dict] = []
        self._server = _Server((host, port), _Handler)
        self._server.owner = self
        self._thread: Optional[threading.Thread] = None

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def add(self, *items: Union[str, Reply]) -> None:
        with self._lock:
            self._script.extend(s if isinstance(s, Reply) else Reply(content=s) for s in items)

    @property
    def remaining(self) -> int:
        return len(self._script)

    def _next(self, body: dict, headers: dict) -> Optional[Reply]:
        with self._lock:
            self.requests.append(body)
            self.headers.append(headers)
            return self._script.pop(0) if self._script else None

    def start(self) -> "ScriptedLLMServer":
        self._thread = threading.Thread(target=self._server.serve_forever, name="scripted-llm", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> "ScriptedLLMServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def serve_forever(script: Script, host: str = "127.0.0.1", port: int = 0) -> None:  # pragma: no cover - CLI helper
    server = ScriptedLLMServer(script, host, port)
    print(server.base_url, flush=True)
    server._server.serve_forever()
