"""Logist's private directory (``logist serve``'s token) is hidden from a
command in the sandbox: empty and read-only in there, a file written into
it while the command runs included, for root and for an unprivileged user.

The unprivileged run (``nobody``, through ``runuser``) writes the secret
where :mod:`logist.secrets.private` keeps it by hand, so that what it
checks is the sandbox's mount, not the module."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from logist.secrets import private
from logist.workspace import sandbox

SECRET = "serve-token-canary-5b0e1d"

#: Runs a command under the sandbox's launcher in a scratch job; argv: the
#: folder to work in. Prints what the command saw, as JSON.
SCRIPT = r"""
import json, os, subprocess, sys, time
from pathlib import Path
from logist.workspace import sandbox
top = Path(sys.argv[1])
secret = sys.argv[2]
hidden = Path(os.environ["HOME"]) / ".local" / "state" / "logist"
hidden.mkdir(parents=True, exist_ok=True)
os.chmod(hidden, 0o700)
(hidden / "before.serve-token").write_text(secret)
jobs = top / "jobs"
workspace = jobs / "j" / "workspace"
(workspace / ".git").mkdir(parents=True, exist_ok=True)
if not sandbox.mounts_work():
    print(json.dumps({"mounts": False}))
    sys.exit(0)
command = ("sleep 1; cat {d}/before.serve-token {d}/after.serve-token > seen.txt 2>&1; "
           "ls -A {d} > listed.txt 2>&1; echo x > {d}/planted 2>> seen.txt; true").format(d=hidden)
argv = sandbox.launcher(command, "auto", workspace, [jobs])
proc = subprocess.Popen(argv, cwd=workspace, stdin=subprocess.PIPE, env=sandbox.command_env())
proc.stdin.write(b"go\n")
proc.stdin.flush()
(hidden / "after.serve-token").write_text(secret)  # written while the command runs
proc.stdin.close()
proc.wait(60)
print(json.dumps({"mounts": True, "uid": os.getuid(), "seen": (workspace / "seen.txt").read_text(),
                  "listed": (workspace / "listed.txt").read_text(), "planted": (hidden / "planted").exists()}))
"""


def check(result: dict) -> None:
    if not result["mounts"]:
        pytest.skip("this system cannot mount in a user namespace")
    assert SECRET not in result["seen"], result
    assert "No such file" in result["seen"], result  # the command looked, and found nothing
    assert result["listed"].strip() == "", "the folder is empty in there"
    assert not result["planted"], "and read-only"


def test_the_private_directory_is_hidden_from_a_command(tmp_path):
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path), SECRET], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, env=dict(os.environ))
    assert done.returncode == 0, done.stderr
    check(json.loads(done.stdout))


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("runuser") is None or not sys.platform.startswith("linux"),
                    reason="needs root to become an unprivileged user (runuser)")
def test_the_private_directory_is_hidden_from_an_unprivileged_users_command():
    import pydantic

    top = Path(tempfile.mkdtemp(prefix="logist-nobody-"))
    try:
        os.chmod(top, 0o777)
        paths = os.pathsep.join([str(Path(__file__).resolve().parents[2]), str(Path(pydantic.__file__).parent.parent)])
        env = {"PATH": os.environ["PATH"], "HOME": str(top / "home"), "PYTHONPATH": paths,
               "PYTHONDONTWRITEBYTECODE": "1", "LANG": "C.UTF-8"}
        (top / "home").mkdir()
        shutil.chown(top / "home", "nobody")
        python = shutil.which("python3", path="/usr/bin") or sys.executable
        done = subprocess.run(["runuser", "-u", "nobody", "--", "/usr/bin/env", f"HOME={top / 'home'}", python, "-c", SCRIPT,
                               str(top), SECRET], cwd=top,
                              env=env, capture_output=True, text=True, timeout=120)
        if done.returncode != 0 and ("ModuleNotFoundError" in done.stderr or "ImportError" in done.stderr):
            pytest.skip(f"nobody cannot import Logist here: {done.stderr.splitlines()[-1]}")
        assert done.returncode == 0, done.stderr
        result = json.loads(done.stdout)
        assert result.get("uid", 1) != 0
        check(result)
    finally:
        shutil.rmtree(top, ignore_errors=True)


def test_the_private_directory_is_made_private(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    path = private.ensure()
    assert path == tmp_path / "state" / "logist" and (path.stat().st_mode & 0o777) == 0o700
    os.chmod(path, 0o755)
    assert (private.ensure().stat().st_mode & 0o777) == 0o700, "made private again"
    assert sandbox.hidden_directories() == [os.path.realpath(path)]
