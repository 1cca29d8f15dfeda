"""A storm of SIGKILLs spread across whole steps, with real processes and a
real HTTP server: every failpoint, and random times from the process's
start to its end (importing, reading, calling, streaming, applying,
running a command, committing, recording, writing the views). About one
answer in three is a real command that takes a while and writes into the
workspace; a command a kill interrupted is held for a person, who runs it
again or skips it (``job approve-command``, ``job skip-command``).

After each kill, with nothing repaired yet: both files parse with a plain
``json.load``; every entry written before the kill is still there,
unchanged and in order; no lock is left held; what ``job status`` shows is
the history's last entry. A paid answer the killed step had received is on
record (its entry, or the repair note that dropped it). At the end, after a
step that runs through: manifest, history and workspace agree, no journal
is left, and ``git fsck`` finds the repository sound.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest

from conftest import logist_forked as logist_process, processes_with
from forked import ForkedPopen
from logist.store.session import JobFiles
from logist.engine.create import create_job
from logist.failpoints import COMMAND_POINTS, POINTS
from logist.replay.scripted import LLMServer, Reply, answer

pytestmark = [pytest.mark.slow, pytest.mark.scale]

#: Sized by ``LOGIST_SCALE``: in the suite each failpoint once and a few kills at random times,
#: 12 of 14 to land (test_kill_storm_mixed.py's storm kills at random times over every kind of work
#: too); with ``LOGIST_SCALE=full`` each failpoint twice and the rest at random times, 30 of 32.
FULL = os.environ.get("LOGIST_SCALE") == "full"
#: Kills in all, how often each failpoint is among them, and how many must land.
KILLS, EACH_POINT, LANDED = (32, 2, 30) if FULL else (14, 1, 12)


#: The command a CMD answer runs: slow enough for kills to land in it.
#: Its file is this storm's own (the mixed storm's commands write notes/commands.txt): the end looks
#: for a command left running by the file in its command line, and the two storms may run at once.
COMMAND = "sleep 0.3; date >> notes/storm-commands.txt; ls notes | wc -l"


class Answers(LLMServer):
    """Answers every request with a new progress note that writes a file,
    or (when ``command_next`` is set) with that note and a command, streamed
    in a few pieces (so a kill can land mid-answer)."""

    command_next = False

    def reply_for(self, body: dict, headers: dict) -> Reply:
        n = len(self.requests)
        changes = [{"path": f"notes/n{n:04d}.txt", "content": f"note {n}\n" * 20}]
        if self.command_next:
            content = answer("CMD", command=COMMAND, thought=f"note {n:04d}", file_changes=changes)
        else:
            content = answer("MESSAGE", message=f"note {n:04d}", file_changes=changes)
        return Reply(content, pieces=6, piece_delay=0.02)


def _step(server, **env: str) -> subprocess.Popen:
    return ForkedPopen(
        [sys.executable, "-m", "logist", "job", "step", "--oneshot", "storm", "--base-url", server.base_url],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, **env},
    )


def _files(job) -> tuple[dict, list[dict]]:
    """Manifest and entries with a plain json.load (the test fails here on any unparseable file)."""
    with open(job.manifest_path, encoding="utf-8") as handle:
        manifest = json.load(handle)
    with open(job.history_path, encoding="utf-8") as handle:
        entries = json.load(handle)["interactions"]
    return manifest, entries


def _lock_is_free(job) -> bool:
    from logist.errors import JobBusyError

    try:
        with job.lock(0):
            return True
    except JobBusyError:
        return False


def test_a_storm_of_kills_loses_and_breaks_nothing(jobs):
    random.seed(18)
    job = create_job(jobs, "storm", "Write notes", max_steps=500, allowed_commands=[COMMAND])
    points = [*POINTS, *COMMAND_POINTS]
    plan = points * EACH_POINT + [None] * (KILLS - EACH_POINT * len(points))
    random.shuffle(plan)
    step_seconds = 2.0  # refined from each step that runs through
    kills = completed = held = 0
    answered_before_kill: list[str] = []
    with Answers() as server:
        i = 0
        # A random-time kill lands only if the step is still running: on a
        # loaded machine a few run through, so more are tried until LANDED land.
        while i < len(plan) or (kills < LANDED and i < len(plan) + 20):
            point = plan[i] if i < len(plan) else None
            i += 1
            _, before = _files(job)
            served = len(server.requests)
            server.command_next = point in COMMAND_POINTS or (point is None and random.random() < 0.4)
            if point is not None:
                child = _step(server, LOGIST_FAILPOINT=point)
                child.wait(timeout=120)
            else:
                started = time.monotonic()
                child = _step(server)
                try:
                    child.wait(timeout=random.uniform(0.05, 1.2) * step_seconds)
                except subprocess.TimeoutExpired:
                    os.kill(child.pid, signal.SIGKILL)
                    child.wait(timeout=30)
                else:  # it ran through before its kill time
                    step_seconds = time.monotonic() - started
            out, err = child.communicate()
            if child.returncode == -signal.SIGKILL:
                kills += 1
            elif child.returncode == 3:  # a command a kill interrupted is held: a person decides
                assert "held command" in err, err
                held += 1
                decided = logist_process("job", random.choice(["approve-command", "skip-command"]), "storm")
                assert decided.returncode in (0, 3) and "Traceback" not in decided.stderr, decided.stderr
            else:
                assert child.returncode == 0, f"kill {i} ({point}): rc={child.returncode}\n{err}"
                completed += 1
            assert "Traceback" not in err and "internal error" not in err, err
            if point is not None and point != "mid_transcript" and len(server.requests) > served:
                answered_before_kill.append(f"note {len(server.requests):04d}")

            # Right after the kill, nothing repaired yet.
            manifest, entries = _files(job)
            assert entries[: len(before)] == before, f"kill {i} ({point}): an earlier entry was lost or changed"
            assert [e["sequence"] for e in entries] == list(range(1, len(entries) + 1)), f"kill {i}: reordered"
            assert _lock_is_free(job), f"kill {i} ({point}): the job's lock is still held"
            assert JobFiles(job.dir).manifest().last_sequence == entries[-1]["sequence"]
            assert manifest["last_sequence"] in (entries[-1]["sequence"], entries[-1]["sequence"] - 1)
            if i % 8 == 7:  # the real command, now and then (each is a process)
                status = logist_process("job", "status", "storm", "--json")
                assert status.returncode == 0 and "Traceback" not in status.stderr, status.stderr
                assert json.loads(status.stdout)["last_sequence"] == entries[-1]["sequence"]

        assert kills >= LANDED, f"only {kills} kills landed ({completed} steps ran through)"
        assert held >= 1, "no kill landed in a command"
        # A last step runs through, repairing what the last kill left.
        server.command_next = False
        final = logist_process("job", "step", "--oneshot", "storm", "--base-url", server.base_url)
        if final.returncode == 3:
            assert logist_process("job", "skip-command", "storm").returncode == 0
            final = logist_process("job", "step", "--oneshot", "storm", "--base-url", server.base_url)
        assert final.returncode == 0 and "Traceback" not in final.stderr, final.stderr

    manifest, entries = _files(job)
    status = json.loads(logist_process("job", "status", "storm", "--json").stdout)
    assert status["status"] == manifest["status"] == "RUNNING"
    assert status["last_sequence"] == manifest["last_sequence"] == entries[-1]["sequence"]
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=job.workspace, capture_output=True, text=True).stdout.strip()
    assert manifest["workspace_commit"] == head
    assert subprocess.run(["git", "status", "--porcelain"], cwd=job.workspace, capture_output=True, text=True).stdout == ""
    assert not (job.dir / "step_journal.json").exists() and not (job.dir / "jobHistory.json.append").exists()
    fsck = subprocess.run(["git", "fsck", "--no-progress"], cwd=job.workspace, capture_output=True, text=True)
    assert fsck.returncode == 0, fsck.stdout + fsck.stderr
    # Every answer a killed step had received is on record, in its entry or in the repair note that dropped it.
    history = job.history_path.read_text(encoding="utf-8")
    assert [note for note in answered_before_kill if note not in history] == []
    assert [p.name for p in job.dir.iterdir() if ".corrupt-" in p.name] == []
    assert processes_with("notes/storm-commands.txt") == [], "a killed step's command outlived it"
