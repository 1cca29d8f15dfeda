"""A full disk and a read-only jobs directory: each command that must
write says so in one line naming the path (exit 1), never "internal error",
and once there is space again the job goes on, nothing lost.

The disk is a 600 KB tmpfs and the read-only jobs directory a read-only
bind mount, each in a mount namespace of the test's own (``unshare
--mount``, as root), so nothing outside the test is touched."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from logist.replay.scripted import LLMServer, Reply, answer

from conftest import logist_cli

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None
                                or not sys.platform.startswith("linux"),
                                reason="needs root to mount a small or read-only file system (unshare --mount)")


def in_a_mount_namespace(script: str, **env: str) -> list[tuple[str, int, str]]:
    """Run ``script`` (sh) in a mount namespace of its own; ``run ARGS`` in
    it runs ``logist ARGS`` and prints its exit code and stderr, one record
    a run."""
    helper = ('run() { err=$("$LOGIST_PY" -m logist "$@" 2>&1 >/dev/null); '
              'printf "%s\\037%s\\037%s\\036" "$*" "$?" "$err"; }; ')
    done = subprocess.run(["unshare", "--mount", "sh", "-c", helper + script], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "LOGIST_PY": sys.executable, **env})
    assert done.returncode == 0, done.stderr
    records = [r.split("\x1f") for r in done.stdout.split("\x1e") if r.strip()]
    return [(args, int(code), err) for args, code, err in records]


def test_a_read_only_jobs_directory_is_one_line_naming_the_path(tmp_path):
    jobs = tmp_path / "jobs"
    made = logist_cli("--jobs-dir", str(jobs), "job", "create", "j", "-o", "x")
    assert made.returncode == 0, made.stderr
    ran = in_a_mount_namespace(
        'mount --bind "$J" "$J" && mount -o remount,bind,ro "$J" && '
        'run --jobs-dir "$J" job create k -o y; run --jobs-dir "$J" job cancel j; run --jobs-dir "$J" job select j; '
        'run --jobs-dir "$J" job status j', J=str(jobs))
    assert [code for _, code, _ in ran] == [1, 1, 1, 0], ran
    for args, code, err in ran[:3]:
        assert err.count("\n") == 0 and err.startswith(f"Error: {jobs}"), (args, err)
        assert "Read-only file system" in err and "internal error" not in err, (args, err)
    assert "CANCELED" not in ran[3][2]


def test_a_full_disk_is_one_line_naming_the_path_and_loses_nothing(tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    ran = in_a_mount_namespace(
        'mount -t tmpfs -o size=600k none "$D" && run --jobs-dir "$D/jobs" job create j -o x && '
        'dd if=/dev/zero of="$D/fill" bs=4k 2>/dev/null; '
        'run --jobs-dir "$D/jobs" job cancel j; run --jobs-dir "$D/jobs" job select j; '
        'rm "$D/fill"; run --jobs-dir "$D/jobs" job cancel j; run --jobs-dir "$D/jobs" job fsck j; '
        'run --jobs-dir "$D/jobs" job history j', D=str(disk))
    assert [code for _, code, _ in ran] == [0, 1, 1, 0, 0, 0], ran
    for args, code, err in ran[1:3]:
        assert err.count("\n") == 0 and err.startswith(f"Error: {disk}/jobs"), (args, err)
        assert "No space left on device" in err and "internal error" not in err, (args, err)
    assert "now CANCELED" in ran[3][2], ran  # fsck (exit 0): nothing left to repair


class _FillsTheDiskWhileAnswering(LLMServer):
    """Answers once the disk is full: it says it was called (``called``) and
    waits for the test's shell to fill the disk (``filled``) before answering."""

    def __init__(self, markers):
        super().__init__()
        self.markers = markers

    def reply_for(self, body: dict, headers: dict) -> Reply:
        (self.markers / "called").touch()
        deadline = time.monotonic() + 60
        while not (self.markers / "filled").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        # Long (900 kB of the 1 MB an answer may have): the room its saved journal leaves is too
        # small for the step's next write, so the step stops there and the next command records it.
        return Reply(answer("MESSAGE", message="the answer that arrived on a full disk " + "x" * 900_000))


def test_an_answer_that_arrives_on_a_full_disk_is_recorded_when_space_returns_and_not_paid_again(tmp_path):
    disk, markers = tmp_path / "disk", tmp_path / "markers"
    disk.mkdir()
    markers.mkdir()
    with _FillsTheDiskWhileAnswering(markers) as server:
        ran = in_a_mount_namespace(
            'mount -t tmpfs -o size=4m none "$D" && run --jobs-dir "$D/jobs" job create j -o x && '
            '{ run --jobs-dir "$D/jobs" job step --oneshot j --base-url "$URL" & } ; '
            'while [ ! -e "$M/called" ]; do sleep 0.02; done; '
            'dd if=/dev/zero of="$D/fill" bs=4k 2>/dev/null; touch "$M/filled"; wait; '
            'rm "$D/fill"; run --jobs-dir "$D/jobs" job fsck j; cp "$D/jobs/j/jobHistory.json" "$M/"',
            D=str(disk), M=str(markers), URL=server.base_url)
        calls = len(server.requests)
    assert [code for _, code, _ in ran] == [0, 1, 0], ran
    step_error = ran[1][2]
    assert step_error.count("\n") == 0 and step_error.startswith(f"Error: {disk}/jobs"), step_error
    assert "No space left on device" in step_error and "internal error" not in step_error, step_error
    entries = json.loads((markers / "jobHistory.json").read_text())["interactions"]
    [call] = [e for e in entries if e["kind"] == "llm_call"]
    assert call["response"]["status"] == "SUCCESS", call["response"]
    assert "arrived on a full disk" in json.dumps(call["response"])
    assert "the saved answer was applied" in call["note"]
    assert calls == 1  # paid for once: recorded from what was saved, not asked again
