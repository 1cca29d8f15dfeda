"""Helpers of the coding-agent tests: the agents .ci/agents.sh installs, a
workspace, and a look at the running agent's processes from outside.

An agent's test skips, saying why, when its program is not installed;
with ``LOGIST_AGENTS_REQUIRED=1`` (CI, once it installs them) it fails instead.
"""

from __future__ import annotations

import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from logist.agents.providers import find_program, provider
from logist.replay.scripted import ScriptedLLMServer
from logist.workspace.repository import Workspace

from conftest import AGENTS_BIN

#: Whether an agent that is not installed fails its tests instead of skipping them.
AGENTS_REQUIRED = os.environ.get("LOGIST_AGENTS_REQUIRED") == "1"
#: Written into the user's home by :func:`user_home`: must never reach an agent's home.
USER_HOME_MARKER = "user-home-marker-5c1f0e"


@pytest.fixture(autouse=True)
def agents_on_path(monkeypatch):
    """The agents .ci/agents.sh installed, on PATH (after the user's own)."""
    if AGENTS_BIN.is_dir():
        monkeypatch.setenv("PATH", f"{os.environ.get('PATH', os.defpath)}:{AGENTS_BIN}")


#: The agents .ci/agents.sh installs without --more: LOGIST_AGENTS_REQUIRED=1 requires these.
INSTALLED_BY_DEFAULT = ("aider", "codex", "claude-code")


def require_agent(name: str) -> str:
    """The program of agent ``name``, or a skip saying how to install it
    (a failure with ``LOGIST_AGENTS_REQUIRED=1``, for an agent .ci/agents.sh
    installs by default)."""
    program = find_program(provider(name).program)
    if program is None:
        more = "" if name in INSTALLED_BY_DEFAULT else " --more"
        reason = (f"agent '{name}' ({provider(name).program}) is not installed: bash .ci/agents.sh{more} installs "
                  f"it into {AGENTS_BIN.parent}")
        if AGENTS_REQUIRED and name in INSTALLED_BY_DEFAULT:
            pytest.fail(reason + " (LOGIST_AGENTS_REQUIRED=1)")
        pytest.skip(reason)
    return program


@pytest.fixture
def workspace(tmp_path) -> Path:
    """A job's workspace: a git repository with its baseline commit."""
    return Workspace.init(tmp_path / "job" / "workspace", "agent-test").path


@pytest.fixture
def user_home(tmp_path) -> Path:
    """The user's home (the isolation fixture's), holding each agent's own
    configuration with :data:`USER_HOME_MARKER` in it."""
    home = Path(os.environ["HOME"])
    files = {".aider.conf.yml": f"# {USER_HOME_MARKER}\nmodel: gpt-4o\n",
             ".codex/config.toml": f"# {USER_HOME_MARKER}\nmodel = \"o3\"\n",
             ".claude.json": f'{{"marker": "{USER_HOME_MARKER}"}}\n',
             ".claude/settings.json": f'{{"marker": "{USER_HOME_MARKER}"}}\n',
             ".config/opencode/opencode.json": f'{{"marker": "{USER_HOME_MARKER}"}}\n',
             ".qwen/settings.json": f'{{"marker": "{USER_HOME_MARKER}"}}\n',
             ".gitconfig": f"# {USER_HOME_MARKER}\n"}
    for relative, text in files.items():
        (home / relative).parent.mkdir(parents=True, exist_ok=True)
        (home / relative).write_text(text)
    return home


def processes_with(variable: str) -> dict[int, dict[str, str]]:
    """Every process whose environment holds ``variable`` (``NAME=value``):
    pid -> its environment, read from ``/proc/<pid>/environ``."""
    found = {}
    needle = variable.encode()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as handle:
                raw = handle.read()
        except OSError:
            continue
        entries = raw.split(b"\0")
        if needle in entries:
            found[int(name)] = dict(e.decode(errors="replace").split("=", 1) for e in entries if b"=" in e)
    return found


def processes_running(marker: str) -> list[int]:
    """Live processes whose command line holds ``marker``."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as handle:
                cmdline = handle.read()
            with open(f"/proc/{name}/stat", "rb") as handle:
                state = handle.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if marker.encode() in cmdline and state not in (b"Z", b"X"):
            found.append(int(name))
    return found


def home_files(home: Path) -> dict[str, bytes]:
    """Every file under ``home`` (relative path -> bytes, a link's target for a link)."""
    found = {}
    for folder, _, names in os.walk(home):
        for name in names:
            path = Path(folder) / name
            try:
                found[str(path.relative_to(home))] = (os.readlink(path).encode() if path.is_symlink()
                                                      else path.read_bytes())
            except OSError:
                continue
    return found


class WatchingServer(ScriptedLLMServer):
    """A scripted Chat Completions server that, at each request, looks at the
    processes of the agent calling it (found by the run's token in their
    environment) and at the home they were given, while they run."""

    def __init__(self, script, token: str = "", *, needle: str = "", **kwargs):
        super().__init__(script, **kwargs)
        self.token = token
        #: What the agent's processes hold in their environment (``NAME=value``): the run's token by
        #: default; a job's run, whose token Logist makes, is found by ``LOGIST_WORKSPACE=<its workspace>``.
        self.needle = needle or f"OPENAI_API_KEY={token}"
        #: One entry per request: {pid: environment} of the agent's processes.
        self.seen: list[dict[int, dict[str, str]]] = []
        #: The agent's home as it was at each request (relative path -> bytes).
        self.homes: list[dict[str, bytes]] = []
        #: Set once a request has been looked at (its processes and home kept above).
        self.called = threading.Event()

    def reply_for(self, body, headers):
        processes = processes_with(self.needle)
        self.seen.append(processes)
        homes = {env.get("HOME") for env in processes.values()}
        for home in homes:
            if home:
                self.homes.append(home_files(Path(home)))
        self.called.set()
        return super().reply_for(body, headers)


def wait_for(predicate, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


# --------------------------------------------------------------------------
# Codex and Claude Code speak no Chat Completions: a scripted server of their
# own APIs shows that their providers' command lines, variables and files
# make them work, whatever the gateway translates.


def sse(name: str, data: dict) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()


def responses_turn(number: int, item: dict) -> bytes:
    """One streamed OpenAI Responses answer whose output is ``item``."""
    response = {"id": f"resp_{number}", "object": "response", "created_at": 0, "model": "scripted",
                "status": "in_progress", "output": []}
    done = {**response, "status": "completed", "output": [item],
            "usage": {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15,
                      "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}}}
    return (sse("response.created", {"type": "response.created", "response": response})
            + sse("response.output_item.done", {"type": "response.output_item.done", "output_index": 0, "item": item})
            + sse("response.completed", {"type": "response.completed", "response": done}))


def codex_shell_call(command: str) -> dict:
    return {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "exec_command",
            "arguments": json.dumps({"cmd": command}), "status": "completed"}


def responses_message(text: str) -> dict:
    return {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}


def messages_turn(number: int, blocks: list[dict], stop_reason: str) -> bytes:
    """One streamed Anthropic Messages answer: ``blocks`` are text
    (``{"type": "text", "text": ...}``) or tool_use (``{"type": "tool_use", "name": ..., "input": {...}}``,
    its input sent as ``input_json_delta``)."""
    out = sse("message_start", {"type": "message_start", "message": {
        "id": f"msg_{number}", "type": "message", "role": "assistant", "model": "scripted", "content": [],
        "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 1}}})
    for index, block in enumerate(blocks):
        if block["type"] == "tool_use":
            start = {"type": "tool_use", "id": f"toolu_{number}_{index}", "name": block["name"], "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        else:
            start, delta = {"type": "text", "text": ""}, {"type": "text_delta", "text": block["text"]}
        out += sse("content_block_start", {"type": "content_block_start", "index": index, "content_block": start})
        out += sse("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})
        out += sse("content_block_stop", {"type": "content_block_stop", "index": index})
    out += sse("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                                 "usage": {"output_tokens": 20}})
    return out + sse("message_stop", {"type": "message_stop"})


class NativeServer:
    """A scripted server of the Responses (``POST /v1/responses``) and
    Messages (``POST /v1/messages``) APIs on 127.0.0.1: each request that
    offers tools takes the next streamed answer of ``script``; one without
    tools (a title, a quota probe) is answered with a short text. Looks at
    the calling agent's processes as :class:`WatchingServer` does."""

    def __init__(self, script: list[bytes], token: str, fallback: bytes = b""):
        self.script = list(script)
        self.token = token
        self.fallback = fallback
        self.requests: list[tuple[str, dict]] = []
        self.headers: list[dict] = []
        self.seen: list[dict[int, dict[str, str]]] = []
        self.homes: list[dict[str, bytes]] = []
        self.lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _json(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            def do_HEAD(self):
                self._json(200, {})

            def do_GET(self):
                self._json(200, {"object": "list", "data": [{"id": "scripted", "object": "model"}]})

            def do_POST(self):
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = {}
                route = self.path.split("?", 1)[0]
                if route.endswith("/count_tokens"):
                    self._json(200, {"input_tokens": 10})
                    return
                stream = owner.answer(route, body, dict(self.headers))
                if stream is None:
                    self._json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", str(len(stream)))
                self.end_headers()
                self.wfile.write(stream)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def answer(self, route: str, body: dict, headers: dict) -> bytes | None:
        if not route.endswith(("/responses", "/messages")):
            return None
        with self.lock:
            self.requests.append((route, body))
            self.headers.append({name.lower(): value for name, value in headers.items()})
            processes = processes_with(f"OPENAI_API_KEY={self.token}")
            self.seen.append(processes)
            for home in {env.get("HOME") for env in processes.values()}:
                if home:
                    self.homes.append(home_files(Path(home)))
            if body.get("tools") and self.script:
                return self.script.pop(0)
            return self.fallback

    def __enter__(self) -> "NativeServer":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
