"""``logist.cli.main`` called in a program's own process (as tests/conftest.py's
``logist_cli`` calls it): the core's warnings reach the ``sys.stderr`` of each
run, and the process's logging is left as it was found."""

from __future__ import annotations

import logging

import pytest
from click.testing import CliRunner

import logist.cli
from logist.store.session import JobFiles
from logist.engine.create import create_job
from logist.cli import main
from logist.replay.scripted import answer
from logist.replay.server import ReplayLLMServer


def run_main(*args: str) -> tuple[int, str]:
    """Exit code and stderr of ``main(args)`` in this process, its streams in memory."""
    with CliRunner().isolation() as (_, err, _mixed):
        with pytest.raises(SystemExit) as exited:
            main(list(args))
    return exited.value.code, err.getvalue().decode()


def logging_of_logist():
    logger = logging.getLogger("logist")
    return logger.level, list(logger.handlers), logger.propagate


def test_each_run_shows_its_warnings_on_its_own_stderr_and_leaves_logging_as_it_was(jobs):
    job = create_job(jobs, "j", "Say hi")
    JobFiles(job.dir).transcript_path.unlink()
    JobFiles(job.dir).transcript_path.mkdir()  # the transcript cannot be written: one warning per step
    before = logging_of_logist()
    for n in (1, 2):
        code, err = run_main("job", "poststep", "j", "--response-string", answer("MESSAGE", message=f"note {n}"))
        assert code == 0, err
        warned = [line for line in err.splitlines() if "could not update" in line]
        assert len(warned) == 1 and warned[0].startswith("logist: ") and "transcript.md" in warned[0], err
        assert logging_of_logist() == before, "main took its handler and level back"
        assert logist.cli._warnings_to_stderr is False


def test_a_logger_configured_by_the_caller_is_left_to_the_caller(jobs, caplog):
    job = create_job(jobs, "j", "Say hi")
    JobFiles(job.dir).transcript_path.unlink()
    JobFiles(job.dir).transcript_path.mkdir()
    own = logging.NullHandler()
    logger = logging.getLogger("logist")
    logger.addHandler(own)
    try:
        with caplog.at_level(logging.WARNING, logger="logist"):
            code, err = run_main("job", "poststep", "j", "--response-string", answer("MESSAGE", message="note"))
        assert code == 0 and "could not update" not in err, "the caller's handlers, not stderr"
        assert any("could not update" in r.getMessage() for r in caplog.records)
        assert logger.handlers == [own]
    finally:
        logger.removeHandler(own)


def test_replay_server_puts_its_logger_and_sigterm_handler_back(monkeypatch):
    import signal

    def interrupted(self):
        raise KeyboardInterrupt  # Ctrl-C as soon as it serves

    monkeypatch.setattr(ReplayLLMServer, "serve_forever", interrupted)
    served = logging.getLogger("logist.replay.server")
    before = served.level, signal.getsignal(signal.SIGTERM)
    code, err = run_main("replay-server", "wordcount")
    assert code == 0 and "Stopped: answered 0 of" in err, err
    assert (served.level, signal.getsignal(signal.SIGTERM)) == before
