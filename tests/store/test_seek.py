"""Entries found by number in a real history, read forward and backward from an offset (logist.store.seek)."""

from __future__ import annotations

import json

import pytest

from logist.store.session import JobFiles
from logist.engine.create import create_job
from logist.store import seek

from conftest import long_job


@pytest.mark.parametrize("block", [64, 4096])
def test_every_entry_is_found_by_bisection_and_read_both_ways(jobs, llm, monkeypatch, block):
    job = long_job(jobs, llm, rounds=3)
    # Small blocks: the file is many blocks long, so the search bisects and entry starts straddle blocks.
    monkeypatch.setattr(seek, "BLOCK", block)
    whole = list(JobFiles(job.dir).entry_data())
    data = JobFiles(job.dir).history_path.read_bytes()
    assert len(data) > 8 * block
    with JobFiles(job.dir).offset_reader() as reader:
        offsets = [reader.locate(e["sequence"]) for e in whole]
        assert offsets == sorted(set(offsets)) and all(data[o:].startswith(seek.ENTRY_START) for o in offsets)
        assert reader.locate(len(whole) + 1) == reader.end and reader.locate(0) == offsets[0]
        for i, offset in enumerate(offsets):
            assert reader.sequence_at(offset) == whole[i]["sequence"]
            assert [json.loads(t) for _, t in reader.forward(offset)] == whole[i:]
            assert [json.loads(t) for _, t in reader.backward(offset)] == whole[:i][::-1]
        assert [o for o, _ in reader.forward(offsets[0] + 1)] == offsets[1:], "forward: from the next entry's start"


def test_an_append_in_progress_is_not_read_until_it_is_whole(jobs):
    job = create_job(jobs, "j", "Write hello.py")
    path = JobFiles(job.dir).history_path
    with JobFiles(job.dir).offset_reader() as reader:
        end = reader.end
        assert [json.loads(t)["sequence"] for _, t in reader.forward(0)] == [1]
        # The journal of an append says where the entries ended: what follows is not read.
        (job.dir / "jobHistory.json.append").write_text(json.dumps({"offset": end, "sequence": 2}))
        with open(path, "r+b") as handle:
            handle.seek(end)
            handle.write(b',\n    {\n      "sequence": 2, "kind": "llm_ca')
        assert reader.refresh() and reader.end == end
        assert [json.loads(t)["sequence"] for _, t in reader.forward(0)] == [1]
