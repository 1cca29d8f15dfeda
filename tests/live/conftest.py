"""The live engine as a pytest fixture (tests/live/liveserver.py holds the
engine itself, free of pytest, for bench/live.py too)."""

from __future__ import annotations

import os

import pytest

from . import enginelog
from .liveserver import LiveEngine, missing


@pytest.fixture(scope="session")
def live_engine(tmp_path_factory):
    """The engine (n_ctx 2048, seed 1) for this session's worker. Without
    the ``live`` extra the tests that use it skip, saying why; with
    ``LOGIST_LIVE_REQUIRED=1`` (as .ci/run sets it) they fail instead, so
    that a run meant to show them cannot pass without them."""
    why = missing()
    if why:
        if os.environ.get("LOGIST_LIVE_REQUIRED") == "1":
            pytest.fail(f"the live tests must run here (LOGIST_LIVE_REQUIRED=1) but {why}")
        pytest.skip(f"no live engine: {why}")
    log = tmp_path_factory.mktemp("engine") / "engine.log"
    with LiveEngine(n_ctx=2048, seed=1, log=log) as engine:
        yield engine


@pytest.fixture(autouse=True)
def engine_work(request):
    """What the engine did for this test (its log's part, :mod:`.enginelog`),
    kept as the test's ``engine`` property: the run's summary prints it
    (tests/conftest.py), the figures that say where a live test's time goes."""
    if "live_engine" not in request.fixturenames:
        yield
        return
    engine = request.getfixturevalue("live_engine")
    start = engine.log.stat().st_size
    yield
    with open(engine.log, "rb") as log:
        log.seek(start)
        work = enginelog.read(log.read().decode("utf-8", "replace"))
    request.node.user_properties.append(("engine", work.line()))
