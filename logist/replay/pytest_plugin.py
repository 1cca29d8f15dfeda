"""pytest fixtures for testing roles, skills and jobs against a scripted
model in memory, or a real OpenAI-compatible server on 127.0.0.1 (no
network, no key).

Installed with Logist as a pytest plugin (entry point ``pytest11``), so the
fixtures are available in any test suite of an environment where Logist is
installed; ``pytest_plugins = ["logist.replay.pytest_plugin"]`` in a conftest.py does
the same where entry points are disabled. docs/replay.md's section "Testing
your roles and skills" has a whole test file (run by Logist's own tests)::

    def test_the_worker_writes_hello(scripted_llm, tmp_path):
        scripted_llm.add(worker_answer, supervisor_answer)  # JSON strings, in call order
        job = logist.open(tmp_path / "jobs", base_url=scripted_llm.base_url).create(
            "hello", objective="Write hello.py that prints a greeting")
        assert job.run()[-1].status == "APPROVAL_REQUIRED"

    def test_my_recording_still_replays(replay_llm, tmp_path):
        server = replay_llm("wordcount")        # strict by default; or "fixtures/NAME"
        job = logist.open(tmp_path / "jobs").create_from_fixture("wordcount")
        job.replay(server.history, base_url=server.base_url)
        assert server.mismatches == [] and server.remaining == 0

The servers themselves are in :mod:`logist.replay.scripted` and
:mod:`logist.replay.server`; this module only wraps them, so that code the
CLI imports never imports pytest.
"""

from __future__ import annotations

import pytest

from .fixtures import fixture_path
from .server import ReplayLLMServer
from .scripted import ScriptedLLMServer, ScriptedModel


@pytest.fixture
def scripted_model() -> ScriptedModel:
    """A :class:`~logist.replay.scripted.ScriptedModel` (in memory: no socket,
    no thread) with an empty script: ``scripted_model.add(answer, ...)``,
    ``run_job(job, endpoints=scripted_model.endpoints)`` or
    ``logist.open(path, model=scripted_model)``. The same script as
    :func:`scripted_llm`'s, for tests that are not about the wire."""
    return ScriptedModel()


@pytest.fixture
def scripted_llm():
    """A running :class:`~logist.replay.scripted.ScriptedLLMServer` with an empty
    script: ``scripted_llm.add(answer, ...)``, ``scripted_llm.base_url``."""
    with ScriptedLLMServer() as server:
        yield server


@pytest.fixture
def replay_llm():
    """Start a :class:`~logist.replay.server.ReplayLLMServer`:
    ``replay_llm(recording, strict=True)`` where ``recording`` is a
    jobHistory.json, a job or fixture folder, or a bundled fixture's name.
    Every server started is stopped after the test."""
    servers: list[ReplayLLMServer] = []

    def start(recording, *, strict: bool = True) -> ReplayLLMServer:
        if not hasattr(recording, "interactions"):
            recording = fixture_path(recording)
        server = ReplayLLMServer(recording, strict=strict).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()
