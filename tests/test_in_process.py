"""``conftest.logist_cli`` runs the real program in the test's process
(tests/in_process.py): what it prints and exits with is what a child
process prints and exits with, each run starts from fresh caches, and the
test's process is left as it was found."""

from __future__ import annotations

import ctypes
import json
import os
import sys
from pathlib import Path

import pytest

import in_process
from conftest import logist_cli, logist_process
from logist.store.session import JobFiles
from logist.engine.create import create_job
from logist.engine.step import post_answer
from logist.replay.scripted import answer
from logist.store import seek

LINUX = sys.platform.startswith("linux")


def test_a_run_here_prints_and_exits_as_a_child_process(jobs, tmp_path):
    job = create_job(jobs, "hello", "Write hello.py that prints a greeting " * 4, acceptance=["prints Hello"])
    post_answer(job, answer("MESSAGE", message="Planning the greeting, at some length. " * 4))
    broken = create_job(jobs, "broken", "Say hi")
    JobFiles(broken.dir).transcript_path.unlink()
    JobFiles(broken.dir).transcript_path.mkdir()  # each poststep warns (the core's logging, on stderr)
    cases = [
        ((), {}), (("--help",), {}), (("job", "create", "--help"), {}),  # click's help, at the program's width
        (("job", "status", "hello"), {}), (("job", "show", "hello"), {}), (("job", "transcript", "hello"), {}),
        (("job", "history", "hello"), {}), (("job", "history", "hello"), {"COLUMNS": "60"}),
        (("job", "list"), {"COLUMNS": ""}),  # tables: COLUMNS, or whole lines on a pipe
        (("job", "status", "nosuch"), {}), (("job", "create", "bad id!", "-o", "x"), {}),  # errors: exit 1
        (("job", "reject", "hello"), {}), (("job", "frobnicate"), {}),  # usage errors: exit 2
        ((), {"_LOGIST_COMPLETE": "bash_complete", "COMP_WORDS": "logist job status h", "COMP_CWORD": "3"}),
    ]
    differ = []
    for args, env in cases:
        here, there = logist_cli(*args, env=env), logist_process(*args, env=env)
        if (here.returncode, here.stdout, here.stderr) != (there.returncode, there.stdout, there.stderr):
            differ.append(f"{args} {env}:\n  here  {here.returncode} {here.stdout!r} {here.stderr!r}\n"
                          f"  child {there.returncode} {there.stdout!r} {there.stderr!r}")
    # A command that changes a job, and whose core warns: the same change, twice.
    posts = [run("job", "poststep", "broken", "--response-string", answer("MESSAGE", message="note"))
             for run in (logist_cli, logist_process)]
    assert posts[0].returncode == posts[1].returncode == 0
    assert posts[0].stderr.replace("#2 ", "#N ") == posts[1].stderr.replace("#3 ", "#N "), [p.stderr for p in posts]
    assert "logist: could not update" in posts[0].stderr
    assert differ == [], "\n".join(differ)


def test_a_traceback_and_its_exit_status_are_the_interpreters(jobs):
    here = logist_cli("job", "status", "nosuch", env={"LOGIST_DEBUG": "1"})
    there = logist_process("job", "status", "nosuch", env={"LOGIST_DEBUG": "1"})
    assert here.returncode == there.returncode == 1
    assert here.stdout == there.stdout == ""
    for result in (here, there):
        lines = result.stderr.splitlines()
        assert lines[0] == "Traceback (most recent call last):"
    assert here.stderr.splitlines()[-1] == there.stderr.splitlines()[-1]
    assert here.stderr.splitlines()[-1].startswith("logist.errors.NoSuchNameError: no job 'nosuch'")


def test_the_environment_given_is_the_runs_only(jobs):
    os.environ.pop("LOGIST_DEBUG", None)
    result = logist_cli("job", "status", "nosuch", env={"LOGIST_DEBUG": "1", "NEW_NAME": "x"})
    assert "Traceback" in result.stderr
    assert "LOGIST_DEBUG" not in os.environ and "NEW_NAME" not in os.environ


#: A module-level cache put into a real module for the test below (Logist keeps none).
TEST_CACHE = ("logist.store.seek", "_TEST_CACHE")


@pytest.fixture
def test_cache(monkeypatch):
    """``logist.store.seek._TEST_CACHE``, filled by every read of entries by number, as a cache would be."""
    cache: dict = {}
    monkeypatch.setattr(seek, "_TEST_CACHE", cache, raising=False)
    real = seek.read_entries

    def reading(job_dir, sequences):
        found = real(job_dir, sequences)
        cache.setdefault("seen", []).append(dict(cache))
        cache.update(found)
        return found

    monkeypatch.setattr(seek, "read_entries", reading)
    return cache


def test_a_failpoint_is_refused_here(jobs):
    with pytest.raises(in_process.InProcessError, match="logist_process"):
        logist_cli("job", "list", env={"LOGIST_FAILPOINT": "after_call"})


def test_a_module_level_value_a_run_changes_must_be_declared(jobs, monkeypatch, test_cache):
    """The guard for caches to come: Logist keeps no per-process cache, and one that is not
    a declared fact of the machine or package (SHARED) fails the test."""
    job = create_job(jobs, "hello", "Write hello.py")
    post_answer(job, answer("MESSAGE", message="one"))
    test_cache.clear()
    with pytest.raises(AssertionError, match=r"logist\.store\.seek\._TEST_CACHE changed"):
        logist_cli("job", "history", "hello", "--entry", "2", "--json")


def test_every_declared_cache_exists():
    import importlib

    for module, name in in_process.SHARED:
        assert hasattr(importlib.import_module(module), name), f"{module}.{name}"


@pytest.mark.wire
@pytest.mark.skipif(not LINUX, reason="prctl and /proc/self/environ")
def test_hiding_the_secrets_before_a_command_is_undone_after_the_run(jobs, llm):
    """Before it runs a command Logist makes its process non-dumpable and
    blanks the secrets in /proc/self/environ (logist.workspace.sandbox); here that
    process is pytest's, so the run's end puts both back."""
    from logist.secrets import process as secrecy

    libc = ctypes.CDLL(None, use_errno=True)
    during = []
    original = secrecy.hide_secrets_from_proc

    def spy():
        original()
        during.append(libc.prctl(3, 0, 0, 0, 0))  # PR_GET_DUMPABLE

    secrecy.hide_secrets_from_proc = spy
    was = libc.prctl(3, 0, 0, 0, 0)  # 0 already, if a step of the library ran a command in this process
    libc.prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE
    environ_before = Path("/proc/self/environ").read_bytes()
    try:
        create_job(jobs, "cmd", "Run a command", command_policy="allow", allowed_commands=["true"],
                   command_sandbox="none")
        llm.add(answer("CMD", command="true"))
        assert logist_cli("job", "step", "cmd", "--oneshot", "--base-url", llm.base_url).returncode == 0
        assert during and set(during) == {0}, "the command ran with the process non-dumpable"
        assert libc.prctl(3, 0, 0, 0, 0) == 1
        assert Path("/proc/self/environ").read_bytes() == environ_before
    finally:
        secrecy.hide_secrets_from_proc = original
        libc.prctl(4, was, 0, 0, 0)


@pytest.mark.skipif(not LINUX, reason="/proc/self/environ")
def test_the_environment_block_is_put_back():
    state = in_process._State()
    start, data = in_process._environ_block()
    at = data.index(b"=") + 1  # the first value's first byte
    ctypes.memset(start + at, ord("*") if data[at] != ord("*") else ord("#"), 1)
    assert Path("/proc/self/environ").read_bytes() != data
    assert state.restore() == []
    assert Path("/proc/self/environ").read_bytes() == data
