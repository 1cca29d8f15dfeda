"""logist.store.history: the in-place, journaled append of jobHistory.json and its repair."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from logist.store.session import HISTORY_APPEND_NAME, HISTORY_NAME, JobFiles
from logist.errors import CorruptFileError
from logist.store.entries import HistoryEntry, Request, RequestMetadata, Response, Usage, UserInput
from logist.store.history import HISTORY_FORMAT, HISTORY_SCHEMA, TAIL, append_entry, layout, header, repair, salvage
from logist.store.manifest import Message

JOB = "hist-job"
JOURNAL = HISTORY_NAME + ".append"


def canonical(data: dict) -> str:
    """The file Logist writes for ``data``: the header, then one entry after
    another, a field per line."""
    body = b",".join(layout(e) for e in data["interactions"])
    return (header(data["job_id"]) + body + TAIL).decode("utf-8")


def document(entries) -> dict:
    return {"$schema": HISTORY_SCHEMA, "format": HISTORY_FORMAT, "job_id": JOB, "interactions": dumps(entries)}


def make_entry(sequence: int, big: bool = True) -> HistoryEntry:
    """A realistic entry; text with newlines, quotes and non-ASCII, as prompts have."""
    if not big:
        return HistoryEntry(
            sequence=sequence, timestamp="2026-01-01T00:00:00Z", kind="user_action",
            state_before="PENDING", state_after="PENDING", workspace_path="/ws",
            user_input=UserInput(action="note", text="x"), state={"status": "PENDING", "last_sequence": sequence},
        )
    return HistoryEntry(
        sequence=sequence,
        timestamp="2026-01-01T00:00:00Z",
        kind="llm_call",
        state_before="PENDING",
        state_after="RUNNING",
        role="Worker",
        workspace_path="/jobs/hist-job/workspace",
        request=Request(
            prompt=[
                Message(role="system", content="You are the Worker.\n--- Role: Worker ---\n{\"json\": [1, 2]}"),
                Message(role="user", content=f"Objective: grüße «{sequence}»\n\n[Step {sequence} of 100]"),
            ],
            files_context=["hello.py"],
            metadata=RequestMetadata(role="Worker", phase="work", model="gpt-4o-mini", temperature=0.2, max_tokens=None),
        ),
        response=Response(
            status="SUCCESS", actions=["MESSAGE"],
            raw_response=json.dumps({"action": "MESSAGE", "message": f"step {sequence}\n  ]\n}}\n"}),
        ),
        usage=Usage(prompt_tokens=100 + sequence, completion_tokens=7, cost_usd=0.0001),
        duration_ms=1250,
        workspace_commit="0" * 40,
        state={"status": "RUNNING", "calls": sequence, "last_sequence": sequence, "plan": ["a\n  ]\n}", "b"]},
    )


@pytest.fixture
def job_dir(tmp_path) -> Path:
    path = tmp_path / "job"
    path.mkdir()
    JobFiles(path).session.create_history(JOB)
    return path


def doc(job_dir: Path) -> dict:
    return json.loads(JobFiles(job_dir).history_path.read_bytes())


def dumps(entries) -> list[dict]:
    return [e.dump() for e in entries]


def build(job_dir: Path, count: int, big: bool = True) -> list[HistoryEntry]:
    entries = [make_entry(i, big) for i in range(1, count + 1)]
    for entry in entries:
        append_entry(JobFiles(job_dir), entry)
    return entries


def test_journal_name_is_as_documented():
    assert JOURNAL == HISTORY_APPEND_NAME == JobFiles("job").history_append_path.name == "jobHistory.json.append"


def test_new_history_is_valid_and_empty(job_dir):
    data = JobFiles(job_dir).history_path.read_bytes()
    assert data.endswith(TAIL)
    assert json.loads(data) == document([])
    assert JobFiles(job_dir).load_history().interactions == []
    assert JobFiles(job_dir).last_entry() is None
    assert repair(JobFiles(job_dir)) is None


def test_every_append_keeps_a_valid_canonical_document(job_dir):
    path = JobFiles(job_dir).history_path
    appended = []
    for n in range(1, 8):
        before = path.read_bytes()
        entry = make_entry(n, big=n % 2 == 1)
        append_entry(JobFiles(job_dir), entry)
        appended.append(entry)
        after = path.read_bytes()
        assert after.endswith(TAIL)
        assert after.startswith(before[: -len(TAIL)]), "append-only: earlier bytes are never rewritten"
        data = json.loads(after)
        assert data == document(appended)
        assert after.decode("utf-8") == canonical(data), "a field per line, UTF-8, stable keys: Logist's layout"
        assert all(len(line) < 200 or line.startswith('      "') for line in after.decode("utf-8").splitlines())
        assert not (job_dir / JOURNAL).exists()
        assert JobFiles(job_dir).last_entry() == entry


def test_entries_come_back_in_order(job_dir):
    entries = build(job_dir, 12)
    history = JobFiles(job_dir).load_history()
    assert history.job_id == JOB
    assert [e.sequence for e in history.interactions] == list(range(1, 13))
    assert history.interactions == entries
    assert JobFiles(job_dir).last_entry() == entries[-1]
    assert JobFiles(job_dir).last_entry().request.prompt[1].content.startswith("Objective: grüße «12»")


# --------------------------------------------------------------------------
# Interrupted appends


def _chunk_of_next_append(job_dir: Path, tmp_path: Path, entry: HistoryEntry) -> tuple[int, bytes, bytes]:
    """(offset, chunk, complete bytes) of appending ``entry``, measured on a copy."""
    copy = tmp_path / "copy-for-chunk"
    shutil.copytree(job_dir, copy)
    old = JobFiles(copy).history_path.read_bytes()
    append_entry(JobFiles(copy), entry)
    new = JobFiles(copy).history_path.read_bytes()
    offset = len(old) - len(TAIL)
    assert new[:offset] == old[:offset]
    shutil.rmtree(copy)
    return offset, new[offset:], new


def _interrupt(job_dir: Path, offset: int, written: bytes, sequence: int) -> None:
    """Leave the files exactly as append_entry leaves them when killed after writing ``written``."""
    (job_dir / JOURNAL).write_text(json.dumps({"offset": offset, "sequence": sequence}, indent=2) + "\n")
    with open(JobFiles(job_dir).history_path, "r+b") as handle:  # no truncate, as in append_entry
        handle.seek(offset)
        handle.write(written)


def test_interrupted_append_is_rolled_back(job_dir, tmp_path):
    entries = build(job_dir, 3)
    old = JobFiles(job_dir).history_path.read_bytes()
    new_entry = make_entry(4)
    offset, chunk, _ = _chunk_of_next_append(job_dir, tmp_path, new_entry)
    _interrupt(job_dir, offset, chunk[: len(chunk) // 2], 4)
    with pytest.raises(ValueError):
        json.loads(JobFiles(job_dir).history_path.read_bytes())  # the file itself is broken right now

    # A reader without the lock sees the committed prefix only.
    assert JobFiles(job_dir).load_history().interactions == entries
    assert JobFiles(job_dir).last_entry() == entries[-1]

    message = repair(JobFiles(job_dir))
    assert message and "half-written" in message
    assert JobFiles(job_dir).history_path.read_bytes() == old
    assert not (job_dir / JOURNAL).exists()
    assert repair(JobFiles(job_dir)) is None

    append_entry(JobFiles(job_dir), new_entry)
    assert JobFiles(job_dir).load_history().interactions == entries + [new_entry]


def test_interruption_at_many_bytes(job_dir, tmp_path):
    entries = build(job_dir, 2)
    old = JobFiles(job_dir).history_path.read_bytes()
    new_entry = make_entry(3)
    offset, chunk, new = _chunk_of_next_append(job_dir, tmp_path, new_entry)
    entry_complete_at = len(chunk) - len(TAIL)
    # Every byte near the start and the end of the chunk, and a stride through the middle
    # (each round fsyncs, so not all of them).
    points = set(range(20)) | set(range(entry_complete_at - 4, len(chunk) + 1)) | set(range(0, len(chunk), 61))
    for written in sorted(points):
        _interrupt(job_dir, offset, chunk[:written], 3)
        if written == 0 or written > len(TAIL):  # 1..len(TAIL): see test_reader_during_a_tiny_partial_write
            assert JobFiles(job_dir).load_history().interactions == entries, written
            assert JobFiles(job_dir).last_entry() == entries[-1], written
        repair(JobFiles(job_dir))
        after = JobFiles(job_dir).history_path.read_bytes()
        assert not (job_dir / JOURNAL).exists()
        if written < entry_complete_at:
            assert after == old, f"a partial entry must be cut ({written} of {len(chunk)} bytes)"
        elif written == len(chunk):
            assert after == new, "a complete append must be kept"
        else:
            assert after in (old, new), written
        if after == new:  # back to the starting point for the next round
            JobFiles(job_dir).history_path.write_bytes(old)


@pytest.mark.parametrize("written", [1, 3, len(TAIL)])
@pytest.mark.parametrize("reader", ["load_history", "last_entry"])
def test_reader_during_a_tiny_partial_write(job_dir, tmp_path, written, reader):
    entries = build(job_dir, 2)
    offset, chunk, _new = _chunk_of_next_append(job_dir, tmp_path, make_entry(3))
    _interrupt(job_dir, offset, chunk[:written], 3)
    if reader == "load_history":
        assert JobFiles(job_dir).load_history().interactions == entries
    else:
        assert JobFiles(job_dir).last_entry() == entries[-1]


def test_repair_after_a_tiny_partial_write(job_dir, tmp_path):
    build(job_dir, 2)
    old = JobFiles(job_dir).history_path.read_bytes()
    offset, chunk, _new = _chunk_of_next_append(job_dir, tmp_path, make_entry(3))
    for written in range(1, len(TAIL) + 1):
        _interrupt(job_dir, offset, chunk[:written], 3)
        assert JobFiles(job_dir).history_path.read_bytes() != old
        assert repair(JobFiles(job_dir))
        assert JobFiles(job_dir).history_path.read_bytes() == old


def test_complete_append_with_journal_left_behind_is_kept(job_dir, tmp_path):
    entries = build(job_dir, 3)
    new_entry = make_entry(4)
    offset, chunk, new = _chunk_of_next_append(job_dir, tmp_path, new_entry)
    _interrupt(job_dir, offset, chunk, 4)
    assert JobFiles(job_dir).history_path.read_bytes() == new
    # Until repaired, a reader sees only what the journal says was committed.
    assert JobFiles(job_dir).load_history().interactions == entries
    assert JobFiles(job_dir).last_entry() == entries[-1]

    assert repair(JobFiles(job_dir)) is None
    assert JobFiles(job_dir).history_path.read_bytes() == new
    assert not (job_dir / JOURNAL).exists()
    assert JobFiles(job_dir).load_history().interactions == entries + [new_entry]
    assert JobFiles(job_dir).last_entry() == new_entry


def test_interrupted_first_append_into_empty_history(job_dir, tmp_path):
    old = JobFiles(job_dir).history_path.read_bytes()
    offset, chunk, new = _chunk_of_next_append(job_dir, tmp_path, make_entry(1))
    _interrupt(job_dir, offset, chunk[: len(chunk) // 2], 1)
    assert JobFiles(job_dir).load_history().interactions == []
    assert JobFiles(job_dir).last_entry() is None
    repair(JobFiles(job_dir))
    assert JobFiles(job_dir).history_path.read_bytes() == old
    _interrupt(job_dir, offset, chunk, 1)
    assert repair(JobFiles(job_dir)) is None
    assert JobFiles(job_dir).history_path.read_bytes() == new


def test_unreadable_journal_is_discarded_and_file_left_alone(job_dir):
    build(job_dir, 2)
    before = JobFiles(job_dir).history_path.read_bytes()
    (job_dir / JOURNAL).write_text("{not json")
    assert JobFiles(job_dir).load_history().interactions[-1].sequence == 2
    assert repair(JobFiles(job_dir)) == "discarded an unreadable append journal"
    assert not (job_dir / JOURNAL).exists()
    assert JobFiles(job_dir).history_path.read_bytes() == before


def _power_lost(job_dir: Path, offset: int, written: bytes, journal: str | None = None) -> None:
    """Leave the files as a power loss during a step's append may: the bytes
    ``written`` from ``offset`` (zeros, a cut entry), the append journal
    (written without fsync) gone or left as ``journal``."""
    (job_dir / JOURNAL).unlink(missing_ok=True)
    if journal is not None:
        (job_dir / JOURNAL).write_text(journal)
    with open(JobFiles(job_dir).history_path, "r+b") as handle:
        handle.seek(offset)
        handle.write(written)
        handle.truncate()


@pytest.mark.parametrize("left", ["half", "zeros", "half-journal-empty"])
def test_an_append_the_step_journal_names_is_cut_back_without_an_append_journal(job_dir, tmp_path, left):
    entries = build(job_dir, 3)
    old = JobFiles(job_dir).history_path.read_bytes()
    offset, chunk, _ = _chunk_of_next_append(job_dir, tmp_path, make_entry(4))
    written = b"\0" * len(chunk) if left == "zeros" else chunk[: len(chunk) // 2]
    _power_lost(job_dir, offset, written, "" if left == "half-journal-empty" else None)
    assert repair(JobFiles(job_dir), offset) == "removed a half-written history entry left by an interrupted append"
    assert JobFiles(job_dir).history_path.read_bytes() == old
    assert not (job_dir / JOURNAL).exists()
    assert JobFiles(job_dir).load_history().interactions == entries


def test_entries_written_whole_after_the_step_journals_offset_are_kept(job_dir, tmp_path):
    # The journal outlived its step (its removal not yet on the disk): its
    # entry and a later one, each whole, stay.
    entries = build(job_dir, 3)
    offset = len(JobFiles(job_dir).history_path.read_bytes()) - len(TAIL)
    later = [make_entry(4), make_entry(5, big=False)]
    for entry in later:
        append_entry(JobFiles(job_dir), entry)
    whole = JobFiles(job_dir).history_path.read_bytes()
    assert repair(JobFiles(job_dir), offset) is None
    assert repair(JobFiles(job_dir), len(whole) - len(TAIL)) is None  # nothing appended after it
    assert JobFiles(job_dir).history_path.read_bytes() == whole
    assert JobFiles(job_dir).load_history().interactions == entries + later


def test_a_step_journals_offset_that_ends_no_entry_changes_nothing(job_dir, tmp_path):
    build(job_dir, 3)
    old = JobFiles(job_dir).history_path.read_bytes()
    offset, chunk, _ = _chunk_of_next_append(job_dir, tmp_path, make_entry(4))
    _power_lost(job_dir, offset, chunk[: len(chunk) // 2])
    torn = JobFiles(job_dir).history_path.read_bytes()
    for elsewhere in (offset - 7, len(torn) + 10, 0):  # inside an entry, past the end, the start
        assert repair(JobFiles(job_dir), elsewhere) is None
        assert JobFiles(job_dir).history_path.read_bytes() == torn
    assert old[:offset] == torn[:offset]


def test_a_step_journal_names_no_offset_in_a_history_an_append_rewrites_first(job_dir):
    from logist.store.history import entries_end

    build(job_dir, 2)
    files = JobFiles(job_dir)
    assert entries_end(files) == len(files.history_path.read_bytes()) - len(TAIL)
    files.history_path.write_text(json.dumps(doc(job_dir), indent=4))  # by hand: parses, not canonical
    assert entries_end(files) is None
    assert repair(files, 10) is None and json.loads(files.history_path.read_text())["interactions"]


def test_an_append_the_step_journal_names_writes_its_append_journal_without_fsync(job_dir, monkeypatch):
    import logist.store.atomic as atomic

    build(job_dir, 2)
    offset = len(JobFiles(job_dir).history_path.read_bytes()) - len(TAIL)
    synced: list[str] = []
    real_fsync = atomic.os.fsync
    seen: list[bool] = []

    def fsync(fd):
        synced.append(Path(f"/proc/self/fd/{fd}").resolve().name)
        return real_fsync(fd)

    monkeypatch.setattr(atomic.os, "fsync", fsync)
    monkeypatch.setattr("logist.store.history.failpoint",
                        lambda name: seen.append((job_dir / JOURNAL).exists()))
    append_entry(JobFiles(job_dir), make_entry(3), journalled=offset)
    # The append journal was there for readers during the append, never fsynced; the append was.
    assert seen == [True] and not (job_dir / JOURNAL).exists()
    assert synced == [HISTORY_NAME]
    synced.clear()
    append_entry(JobFiles(job_dir), make_entry(4), journalled=offset)  # not where it starts: fsynced
    assert len(synced) == 3 and synced[-1] == HISTORY_NAME


# --------------------------------------------------------------------------
# Files edited by hand, and damaged files


@pytest.mark.parametrize("indent", [4, None, "\t", 2], ids=["indent4", "compact", "tabs", "indent2-no-newline"])
def test_hand_reformatted_history_is_normalised_and_appended_to(job_dir, indent):
    entries = build(job_dir, 3)
    path = JobFiles(job_dir).history_path
    data = json.loads(path.read_bytes())
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=indent)
    assert not path.read_bytes().endswith(TAIL)
    assert JobFiles(job_dir).load_history().interactions == entries
    assert JobFiles(job_dir).last_entry() == entries[-1]

    append_entry(JobFiles(job_dir), make_entry(4))
    data = json.loads(path.read_bytes())
    assert data == document(entries + [make_entry(4)])
    assert path.read_text(encoding="utf-8") == canonical(data)
    assert JobFiles(job_dir).last_entry() == make_entry(4)

    # From now on appends are in place again.
    before = path.read_bytes()
    append_entry(JobFiles(job_dir), make_entry(5))
    assert path.read_bytes().startswith(before[: -len(TAIL)])


def test_hand_reformatted_empty_history_is_appended_to(job_dir):
    path = JobFiles(job_dir).history_path
    path.write_text(json.dumps(document([]), indent=4))
    append_entry(JobFiles(job_dir), make_entry(1))
    assert JobFiles(job_dir).load_history().interactions == [make_entry(1)]
    assert path.read_bytes().endswith(TAIL)


def _damage(job_dir: Path, entry_index: int) -> bytes:
    """Overwrite bytes in the middle of entry ``entry_index`` (0-based); return the damaged file."""
    path = JobFiles(job_dir).history_path
    data = bytearray(path.read_bytes())
    starts = [i for i in range(len(data)) if data.startswith(b"\n    {", i)]
    start = starts[entry_index]
    end = starts[entry_index + 1] if entry_index + 1 < len(starts) else len(data)
    middle = (start + end) // 2
    data[middle : middle + 6] = b"\x00@#$%\xff"
    path.write_bytes(bytes(data))
    return bytes(data)


def test_salvage_keeps_entries_before_the_damage(job_dir):
    entries = build(job_dir, 5)
    damaged = _damage(job_dir, 2)
    with pytest.raises(CorruptFileError, match="is corrupt"):
        JobFiles(job_dir).load_history()

    aside, kept = salvage(JobFiles(job_dir), JOB)
    assert kept == 2
    assert aside.parent == job_dir and aside.name.startswith(HISTORY_NAME + ".corrupt-")
    assert aside.read_bytes() == damaged, "the damaged file is kept byte for byte"
    assert JobFiles(job_dir).load_history().interactions == entries[:2]
    assert JobFiles(job_dir).history_path.read_text(encoding="utf-8") == canonical(doc(job_dir))

    append_entry(JobFiles(job_dir), make_entry(6))
    assert [e.sequence for e in JobFiles(job_dir).load_history().interactions] == [1, 2, 6]


def test_salvage_of_a_truncated_file_and_twice(job_dir):
    entries = build(job_dir, 4)
    path = JobFiles(job_dir).history_path
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 200])  # cut inside the last entry, no journal
    aside1, kept = salvage(JobFiles(job_dir), JOB)
    assert kept == 3 and JobFiles(job_dir).load_history().interactions == entries[:3]
    _damage(job_dir, 0)
    aside2, kept = salvage(JobFiles(job_dir), JOB)
    assert kept == 0 and JobFiles(job_dir).load_history().interactions == []
    assert aside1 != aside2 and aside1.exists() and aside2.exists()
    assert aside1.read_bytes() == data[: len(data) - 200]


# --------------------------------------------------------------------------
# Cost of an append


def _growth(tmp_path: Path, name: str, existing: int) -> int:
    job = tmp_path / name
    job.mkdir()
    JobFiles(job).session.create_history(JOB)
    build(job, existing, big=False)
    assert len(JobFiles(job).load_history().interactions) == existing
    size = JobFiles(job).history_path.stat().st_size
    append_entry(JobFiles(job), make_entry(424242))
    assert JobFiles(job).load_history().interactions[-1] == make_entry(424242)
    return JobFiles(job).history_path.stat().st_size - size


def test_bytes_written_per_append_do_not_depend_on_history_length(tmp_path):
    small = _growth(tmp_path, "ten", 10)
    large = _growth(tmp_path, "thousand", 1000)
    assert small == large
    entry_text = layout(make_entry(424242).dump())
    assert small == len(entry_text) + 1, "the growth is the entry itself and its comma"
