"""A job's session keeps the turn's conversation between the steps of one
process, and drops it when the file no longer holds what it was read from;
a lock-free reader (JobFiles) reads the file as it is."""

from __future__ import annotations

from logist.store.session import JobFiles
from logist.engine.create import create_job
from logist.engine.step import post_answer
from logist.replay.scripted import answer
from logist.store import requests
from logist.store.requests import HistoryReader


def test_the_conversation_is_kept_between_steps_and_dropped_when_the_file_is_edited_in_place(jobs, monkeypatch):
    monkeypatch.setattr(requests, "LOOKBACK", 1)  # the entries kept behind the conversation: one, here
    job = create_job(jobs, "kept", "Keep notes")
    for words in ("first words", "second words", "third words"):
        post_answer(job, answer("MESSAGE", message=words))
    kept = job.session.conversation
    assert kept is not None and kept[0] == 3, "the last call's conversation (entry 4 answered it) is held"
    assert min(job.session.entries_read) == kept[0] - 1, "only the tail a later round needs (LOOKBACK behind)"
    reader = job.session.reader()
    assert reader.conversation(job.manifest().turn)[-1]["content"] == answer("MESSAGE", message="third words")

    path = JobFiles(job.dir).history_path
    inode, data = path.stat().st_ino, path.read_bytes()
    edited = data.replace(b"third words", b"THIRD WORDS, longer now")
    with open(path, "r+b") as handle:  # the same inode, longer
        handle.write(edited)
    assert path.stat().st_ino == inode and len(edited) > len(data)
    reader = job.session.reader()
    assert job.session.conversation is None and job.session.entries_read == {}, "what was read no longer holds"
    assert "THIRD WORDS, longer now" in reader.conversation(job.manifest().turn)[-1]["content"]


def test_a_reader_without_the_session_keeps_nothing(jobs):
    job = create_job(jobs, "free", "Keep notes")
    post_answer(job, answer("MESSAGE", message="one"))
    post_answer(job, answer("MESSAGE", message="two"))
    before = (job.session.conversation, dict(job.session.entries_read))
    other = HistoryReader(JobFiles(job.dir))
    assert other.messages(3)[-1]["role"] == "user"
    assert (job.session.conversation, job.session.entries_read) == before


def test_what_the_session_holds_of_the_history_is_the_files_own_and_another_process_entry_is_read(jobs):
    from logist.engine.session import open_locked
    from logist.store import seek

    job = create_job(jobs, "held", "Keep notes")
    post_answer(job, answer("MESSAGE", message="one"))
    with open_locked(job) as session:
        assert session.held_mark == seek.file_mark(JobFiles(job.dir)), "the mark read under the lock is the file's"
        assert session.last_entry().model_dump() == seek.last_entry(JobFiles(job.dir)).model_dump()
    assert job.session.held_mark is None and job.session.held_last is None, "dropped when the lock is released"

    post_answer(job, answer("MESSAGE", message="two"))
    last = job.manifest().last_sequence
    kept = job.session.entries_read[last]
    assert kept == seek.entries_since(JobFiles(job.dir), last)[last], "the entry appended is kept as a reader parses it"
    assert job.session.mark == seek.file_mark(JobFiles(job.dir)), "the kept reads' mark moved on with the append"

    other = JobFiles(job.dir, jobs_dir=job.jobs_dir)  # another process's session: its entry lands between this one's steps
    post_answer(other, answer("MESSAGE", message="three from elsewhere"))
    reader = job.session.reader()
    assert last + 1 not in job.session.entries_read, "an entry this session did not write is read from the file"
    assert reader.conversation(job.manifest().turn)[-1]["content"] == answer("MESSAGE", message="three from elsewhere")
    with open_locked(job) as session:
        assert session.held_last.sequence == other.manifest().last_sequence


def test_a_steps_calibration_reads_no_entry_again(jobs, monkeypatch):
    """The calibration of a request's size looks back LOOKBACK entries for a call whose usage was
    reported (each step whose answer came without usage): the session keeps them, so it reads none."""
    from logist.engine import context

    for module in (requests, context):
        monkeypatch.setattr(module, "LOOKBACK", 3)  # 20: as many steps here
    job = create_job(jobs, "calibrated", "Keep notes")
    for number in range(requests.LOOKBACK + 3):
        post_answer(job, answer("MESSAGE", message=f"words {number}"))
    manifest = job.manifest()
    reader = job.session.reader()
    reader.conversation(manifest.turn)  # what the next step's prepare reads

    def read_again(*args):
        raise AssertionError(f"entries read again from the file: {args[1:]}")

    monkeypatch.setattr(requests, "entries_since", read_again)
    assert context.calibration(job, manifest) == 1.0  # posted answers: no usage reported
    assert set(range(manifest.last_sequence - requests.LOOKBACK + 1, manifest.last_sequence + 1)) <= \
        set(job.session.entries_read)
