"""``logist job fsck``: every file of a job checked, what was repaired and
what a person must do said, exit 0 when nothing is left to do and 1 when a
person must act. Hand edits of the history that recovery does not look for
(an entry pasted in twice, entries out of order, a number missing) are
reported. Through the real CLI."""

from __future__ import annotations

import json
import shutil

import pytest

from logist.store.session import JobFiles
from logist.engine.create import create_job
from logist.engine.step import step_once
from logist.replay.scripted import answer
from logist.store.calls import SavedAnswer

from conftest import via, logist_cli


def three_steps(jobs, llm):
    job = create_job(jobs, "hello", "Write hello.py that prints a greeting")
    llm.add(*[answer("MESSAGE", message=f"note {i}") for i in range(3)])
    for _ in range(3):
        step_once(job, **via(llm))
    return job


def entry_spans(data: bytes) -> list[tuple[int, int]]:
    """(start, end) byte offsets of each entry, its comma included, in a canonical history."""
    starts, pos = [], data.find(b"\n    {")
    while pos >= 0:
        starts.append(pos)
        pos = data.find(b"\n    {", pos + 1)
    return list(zip(starts, starts[1:] + [len(data) - len(b"\n  ]\n}\n")]))


def fsck(job_id: str, code: int) -> dict:
    done = logist_cli("job", "fsck", job_id, "--json")
    assert done.returncode == code, done.stderr
    return json.loads(done.stdout)


def test_a_sound_job_is_clean(jobs, llm):
    job = three_steps(jobs, llm)
    done = logist_cli("job", "fsck", "hello")
    assert (done.returncode, done.stdout) == (0, "Job 'hello': every file checked, nothing to repair.\n")
    assert fsck("hello", 0) == {"job_id": "hello", "clean": True, "findings": []}
    assert len(JobFiles(job.dir).load_history().interactions) == 4, "nothing recorded"


def edited(job, how) -> None:
    data = job.history_path.read_bytes()
    spans = entry_spans(data)
    pieces = [data[s:e] for s, e in spans]
    head, tail = data[: spans[0][0]], data[spans[-1][1]:]
    pieces = how(pieces)
    job.history_path.write_bytes(head + b",".join(p.rstrip(b",") for p in pieces) + tail)


@pytest.mark.parametrize("edit, reported", [
    (lambda p: p[:3] + [p[2]] + p[3:], "entry 3 appears again at position 4 (the same as the first): an entry pasted "
                                       "in by hand; remove the copy that does not belong from jobHistory.json"),
    (lambda p: p[:3] + [p[2].replace(b"note 1", b"note X")] + p[3:], "entry 3 appears again at position 4 (different "
                                                                       "from the first)"),
    (lambda p: [p[0], p[2], p[1], p[3]], "entry 2 comes after entry 3 (at position 3): put the entries back in the "
                                         "order of their numbers in jobHistory.json"),
    (lambda p: [p[0], p[1], p[3]], "no entry numbered 3: put the missing entries back from a copy of jobHistory.json"),
])
def test_an_entry_pasted_in_twice_out_of_order_or_missing_is_a_problem_for_a_person(jobs, llm, edit, reported):
    job = three_steps(jobs, llm)
    edited(job, edit)
    found = fsck("hello", 1)
    assert found["clean"] is False
    (problem,) = found["findings"]
    assert (problem["kind"], problem["file"]) == ("problem", "jobHistory.json") and reported in problem["what"]
    shown = logist_cli("job", "fsck", "hello")
    assert shown.returncode == 1 and shown.stdout.startswith("Job 'hello': 1 problem.\n  problem   jobHistory.json: ")


def test_what_recovery_repairs_is_reported_as_repaired(jobs, llm):
    """A torn history and the temp file of a killed write: repaired, said so,
    exit 0; the repair is recorded in the history as by any command."""
    job = three_steps(jobs, llm)
    data = job.history_path.read_bytes()
    start, end = entry_spans(data)[3]
    job.history_path.write_bytes(data[: (start + end) // 2])
    (job.dir / ".step_journal.json.k1w2x3y4.tmp").write_text('{"half": ')
    (job.dir / "notes.txt").write_text("mine\n")
    found = fsck("hello", 0)
    kinds = [(f["kind"], f["file"]) for f in found["findings"]]
    assert kinds[:2] == [("repaired", ".step_journal.json.k1w2x3y4.tmp"), ("repaired", "jobHistory.json")]
    assert "kept the 3 entries that could be read" in found["findings"][1]["what"]
    assert "recorded in history entry 4" in found["findings"][1]["what"]
    assert ("note", "notes.txt") in kinds and any(k == "note" and ".corrupt-" in f for k, f in kinds)
    assert JobFiles(job.dir).load_history().interactions[-1].kind == "repair"
    assert fsck("hello", 0)["findings"] == [f for f in found["findings"] if f["kind"] == "note"]


def test_a_call_waiting_in_the_journal_is_recorded_not_dropped(jobs):
    """fsck finishes an interrupted step as any command does: the saved answer is applied."""
    from logist.engine.call import request_of
    from logist.engine.prepare import prepare

    job = create_job(jobs, "hello", "Write hello.py that prints a greeting")
    request = request_of(prepare(job, job.manifest()))
    calling = JobFiles(job.dir).session.journal.begin_call(2, job.manifest().workspace_commit, "hello@t:2:abc", request)
    JobFiles(job.dir).session.journal.call_answered(calling, request, SavedAnswer(raw=answer("MESSAGE", message="saved"),
                                                                 prompt_tokens=10, completion_tokens=5))
    found = fsck("hello", 0)
    assert found["findings"] == []  # finishing a call is no repair
    call = JobFiles(job.dir).load_history().interactions[-1]
    assert (call.kind, call.response.actions) == ("llm_call", ["MESSAGE"])


def test_a_workspace_that_is_not_a_repository_is_a_problem(jobs, llm):
    job = three_steps(jobs, llm)
    shutil.rmtree(job.workspace / ".git")
    found = fsck("hello", 1)
    assert [(f["kind"], f["file"]) for f in found["findings"]] == [("problem", "workspace/")]
    assert "is not a git repository" in found["findings"][0]["what"]
