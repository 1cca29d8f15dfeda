"""A damaged history a gigabyte long is repaired, shown, stepped and canceled
by a process limited to 512 MB of address space (``RLIMIT_AS``): what a crash
left (a tail of zeros a power loss leaves, a half-written entry whose rest
is zeros) is judged from the file's ends and read one entry at a time, never
whole, and nothing before the damage is lost.

The gigabyte is sparse (``truncate``): it costs no disk."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys

import pytest

from conftest import logist_cli
from logist.replay.scripted import ScriptedLLMServer, answer
from logist.store.history import TAIL

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS as Linux counts it")

LIMIT = 512 << 20
GIGABYTE = 1 << 30


def limited(*args: str) -> subprocess.CompletedProcess:
    """``logist ARGS`` in a child whose address space is limited to 512 MB."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))

    return subprocess.run([sys.executable, "-m", "logist", *args], preexec_fn=limit, capture_output=True, text=True,
                          timeout=120, env=dict(os.environ))


def entries_of(path) -> list[dict]:
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)["interactions"]


@pytest.fixture
def job_with_entries(jobs):
    """A job of four entries (created, suspended, resumed, suspended); its history path and entries."""
    for args in (["job", "create", "big", "-o", "Write notes"], ["job", "suspend", "big"], ["job", "resume", "big"],
                 ["job", "suspend", "big"]):
        done = logist_cli(*args)
        assert done.returncode == 0, done.stderr
    path = jobs.path / "big" / "jobHistory.json"
    return path, entries_of(path)


def test_a_gigabyte_of_zeros_after_the_history_is_shown_repaired_and_canceled_in_512_mb(job_with_entries):
    path, before = job_with_entries
    os.truncate(path, GIGABYTE)  # the file's blocks after its end: zeros, as a crash of the disk can leave
    status = limited("job", "status", "big", "--json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["status"] == "SUSPENDED"
    fsck = limited("job", "fsck", "big", "--json")
    assert fsck.returncode == 0, fsck.stderr
    report = json.loads(fsck.stdout)
    assert "ends in zeros" in json.dumps(report) and "kept the 4 entries" in json.dumps(report)
    cancel = limited("job", "cancel", "big")
    assert cancel.returncode == 0, cancel.stderr
    after = entries_of(path)
    assert after[:4] == before  # nothing before the damage lost
    assert [e["kind"] for e in after[4:]] == ["repair", "user_action"] and after[-1]["state_after"] == "CANCELED"
    [aside] = [p for p in path.parent.iterdir() if ".corrupt-" in p.name]
    assert aside.stat().st_size == GIGABYTE  # kept beside it, every byte


def test_a_half_written_entry_whose_rest_is_zeros_is_cut_back_by_a_step_in_512_mb(job_with_entries, jobs):
    path, before = job_with_entries
    assert logist_cli("job", "resume", "big").returncode == 0
    before = entries_of(path)
    # An append interrupted by a power loss: the journal names where it began, the entry's first bytes
    # reached the disk, the rest of the gigabyte did not (zeros).
    offset = path.stat().st_size - len(TAIL)
    (path.parent / "jobHistory.json.append").write_text(json.dumps({"offset": offset, "sequence": len(before) + 1}))
    with open(path, "r+b") as handle:
        handle.seek(offset)
        handle.write(b',\n    {\n      "sequence": %d, "kind": "llm_call", "note": "' % (len(before) + 1) + b"x" * 4096)
    os.truncate(path, GIGABYTE)
    assert limited("job", "status", "big").returncode == 0
    with ScriptedLLMServer([answer("MESSAGE", message="still here")]) as server:
        step = limited("job", "step", "--oneshot", "big", "--base-url", server.base_url)
    assert step.returncode == 0, step.stderr
    after = entries_of(path)
    assert after[: len(before)] == before
    assert [e["kind"] for e in after[len(before):]] == ["repair", "llm_call"]
    assert "half-written" in after[len(before)]["note"]
    assert path.stat().st_size < 1 << 20
