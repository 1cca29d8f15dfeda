"""seek.last_entry parses a history's last entry once per change of the file,
and never answers from what it parsed before the file changed."""

from __future__ import annotations

import os
import subprocess
import sys

from logist.engine.create import create_job
from logist.engine.step import post_answer
from logist.replay.scripted import answer
from logist.store.history import history_path
from logist.store.seek import last_entry


def test_the_last_entry_is_parsed_once_until_the_history_changes(jobs):
    job = create_job(jobs, "cached", "Keep notes")
    post_answer(job, answer("MESSAGE", message="one"))
    first = last_entry(job.dir)
    assert last_entry(job.dir) is first, "an unchanged file is not parsed again"
    post_answer(job, answer("MESSAGE", message="two"))
    second = last_entry(job.dir)
    assert second is not first and second.sequence == first.sequence + 1


def test_another_process_append_and_a_rewrite_of_the_same_size_are_seen(jobs):
    job = create_job(jobs, "shared", "Keep notes")
    post_answer(job, answer("MESSAGE", message="aaa"))
    mine = last_entry(job.dir)
    script = ("import sys\nfrom logist.engine.step import post_answer\nfrom logist.store.jobsdir import JobsDir\nfrom logist.replay.scripted import answer\n"
              "post_answer(JobsDir(sys.argv[1]).job('shared'), answer('MESSAGE', message='from elsewhere'))\n")
    subprocess.run([sys.executable, "-c", script, str(jobs.path)], check=True)
    theirs = last_entry(job.dir)
    assert theirs.sequence == mine.sequence + 1 and "from elsewhere" in theirs.response.raw_response
    # A rewrite (a new file renamed over it) with the same size and times: another file.
    path = history_path(job.dir)
    data = path.read_bytes()
    stat = path.stat()
    changed = data.replace(b"from elsewhere", b"from ELSEWHERE")
    assert len(changed) == len(data) and changed != data
    (job.dir / "rewritten").write_bytes(changed)
    os.utime(job.dir / "rewritten", ns=(stat.st_atime_ns, stat.st_mtime_ns))
    os.replace(job.dir / "rewritten", path)
    assert "from ELSEWHERE" in last_entry(job.dir).response.raw_response



def test_entries_parsed_before_are_not_trusted_once_the_file_was_edited_in_place(jobs):
    """The entries a process parsed are reused only while the bytes they were
    parsed from are still there: a history edited in place (an editor that
    writes over the file, or a rewrite under a reused inode number) keeps its
    device and inode, and may be as long or longer."""
    from logist.store.seek import entries_since

    job = create_job(jobs, "edited", "Keep notes")
    post_answer(job, answer("MESSAGE", message="first words"))
    post_answer(job, answer("MESSAGE", message="second words"))
    assert "second words" in entries_since(job.dir, 2)[3]["response"]["raw_response"]
    path = history_path(job.dir)
    inode = path.stat().st_ino
    data = path.read_bytes()
    edited = data.replace(b"second words", b"SECOND WORDS, longer now")
    with open(path, "r+b") as handle:  # the same inode
        handle.write(edited)
    assert path.stat().st_ino == inode and len(edited) > len(data)
    assert "SECOND WORDS, longer now" in entries_since(job.dir, 2)[3]["response"]["raw_response"]
