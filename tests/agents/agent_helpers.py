"""Helpers of the coding-agent tests: the agents .ci/agents.sh installs, a
workspace, and a look at the running agent's processes from outside.

An agent's test skips, saying why, when its program is not installed;
with ``LOGIST_AGENTS_REQUIRED=1`` (CI, once it installs them) it fails instead.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from logist.agents.providers import find_program, provider
from logist.replay.scripted import ScriptedLLMServer
from logist.workspace.repository import Workspace

REPO_ROOT = Path(__file__).resolve().parents[2]
#: Where .ci/agents.sh links the programs it installs.
AGENTS_BIN = REPO_ROOT / ".ci" / "agents" / "bin"
#: Written into the user's home by :func:`user_home`: must never reach an agent's home.
USER_HOME_MARKER = "user-home-marker-5c1f0e"


@pytest.fixture(autouse=True)
def agents_on_path(monkeypatch):
    """The agents .ci/agents.sh installed, on PATH (after the user's own)."""
    if AGENTS_BIN.is_dir():
        monkeypatch.setenv("PATH", f"{os.environ.get('PATH', os.defpath)}:{AGENTS_BIN}")


def require_agent(name: str) -> str:
    """The program of agent ``name``, or a skip saying how to install it
    (a failure with ``LOGIST_AGENTS_REQUIRED=1``)."""
    program = find_program(provider(name).program)
    if program is None:
        reason = (f"agent '{name}' ({provider(name).program}) is not installed: bash .ci/agents.sh installs it "
                  f"into .ci/agents/")
        if os.environ.get("LOGIST_AGENTS_REQUIRED") == "1":
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

    def __init__(self, script, token: str, **kwargs):
        super().__init__(script, **kwargs)
        self.token = token
        #: One entry per request: {pid: environment} of the agent's processes.
        self.seen: list[dict[int, dict[str, str]]] = []
        #: The agent's home as it was at each request (relative path -> bytes).
        self.homes: list[dict[str, bytes]] = []

    def reply_for(self, body, headers):
        processes = processes_with(f"OPENAI_API_KEY={self.token}")
        self.seen.append(processes)
        homes = {env.get("HOME") for env in processes.values()}
        for home in homes:
            if home:
                self.homes.append(home_files(Path(home)))
        return super().reply_for(body, headers)


def wait_for(predicate, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()
