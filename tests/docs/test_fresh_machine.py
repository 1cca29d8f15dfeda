"""Acceptance 1 of issue 32, first half: on a fresh machine, the README's two
commands install Logist, and then every command of its tour works as typed.

In a copy of the checkout (its files as a fresh clone has them, in a temporary
directory): the README's first command as written (a venv, ``pip install .``,
``logist demo``) and the install part of its second (the same venv, the test
extra, editable; the whole suite it then runs is this suite), read from the
README's first code block; then the tour's commands exactly as the README
types them, with that venv's ``bin`` first on PATH (as installing it as a
tool leaves ``logist``), against the scripted model tests/docs/test_examples.py
declares for the tour. pip's cache is the user's (the test's HOME is a fresh
one), so nothing is downloaded twice.
"""

from __future__ import annotations

import os
import pwd
import re
import subprocess
import time
from pathlib import Path

import pytest

from conftest import REPO_ROOT
from runnable import parse, run_example
from test_examples import MODELS

README = REPO_ROOT / "README.md"


def readme_first_commands() -> list[str]:
    """The command lines of the README's first code block (the fresh machine's
    two commands), with a ``$ `` prompt taken off if the block shows one."""
    text = README.read_text(encoding="utf-8")
    block = re.search(r"^```[a-z]*\n(.*?)^```", text, re.S | re.M)
    assert block, "README.md has no code block"
    lines = [line.removeprefix("$ ").strip() for line in block.group(1).splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def install_part(command: str) -> str:
    """``command`` up to and including its last ``pip install`` (what it runs
    after that, the test suite, is left out)."""
    steps = command.split(" && ")
    last = max(n for n, step in enumerate(steps) if " pip install " in f" {step} " or "/pip install " in step)
    return " && ".join(steps[: last + 1])


def _checkout_copy(destination: Path) -> None:
    """The checkout's files as a clone has them (tracked, and new ones not ignored)."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO_ROOT,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = REPO_ROOT / name
        if source.is_file():
            target = destination / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read_bytes())
            target.chmod(source.stat().st_mode)


def _pip_cache() -> str:
    if os.environ.get("PIP_CACHE_DIR"):
        return os.environ["PIP_CACHE_DIR"]
    return str(Path(pwd.getpwuid(os.getuid()).pw_dir) / ".cache" / "pip")


def test_the_readme_first_commands_are_the_two_for_a_fresh_machine():
    first, second = readme_first_commands()[:2]
    assert first.startswith("python3 -m venv .venv && ") and first.endswith(" && .venv/bin/logist demo"), first
    assert install_part(second).startswith("python3 -m venv .venv && .venv/bin/pip install "), second
    assert not install_part(second).endswith("pytest"), second


@pytest.mark.slow
def test_a_fresh_machine_installs_with_the_readme_commands_then_runs_the_tour(tmp_path):
    started = time.monotonic()
    checkout = tmp_path / "clone"
    _checkout_copy(checkout)
    first, second = readme_first_commands()[:2]
    # A fresh machine: no virtualenv active and no Logist settings (the suite's LOGIST_JOBS_DIR would put
    # the demo's jobs directory above the tour's folder, where the tour's commands would find it).
    env = {name: value for name, value in os.environ.items()
           if name not in ("VIRTUAL_ENV", "PYTHONHOME") and not name.startswith(("LOGIST_", "OPENAI_"))}
    env.update(PIP_CACHE_DIR=_pip_cache(), PIP_DISABLE_PIP_VERSION_CHECK="1")
    for command in (first, install_part(second)):
        result = subprocess.run(["bash", "-c", command], cwd=checkout, env=env, capture_output=True, text=True,
                                timeout=600)
        assert result.returncode == 0, f"README.md's `{command}` failed (exit {result.returncode}):\n{result.stdout}{result.stderr}"
        if command == first:
            assert "Job 'demo' is APPROVAL_REQUIRED." in result.stdout, result.stdout
    installed = time.monotonic() - started

    bin_dir = checkout / ".venv" / "bin"
    (tour,) = [e for e in parse(README)[0] if e.name == "tour"]
    where = subprocess.run(["bash", "-c", "command -v logist"], env={**env, "PATH": f"{bin_dir}{os.pathsep}{env['PATH']}"},
                           capture_output=True, text=True)
    assert where.stdout.strip() == str(bin_dir / "logist")
    (tmp_path / "tour").mkdir()
    problems = run_example(tour, MODELS["tour"], tmp_path / "tour", bin_dir)
    assert not problems, "\n\n".join(problems)
    print(f"installed in {installed:.0f} s, the tour in {time.monotonic() - started - installed:.0f} s")
