"""Held file changes on a job's page: each file a unified diff against the
workspace's content now, its text inert and escaped, bounded (a huge file
shows its first lines and says how much is cut). A real server process."""

from __future__ import annotations

import html
import json
import re

import pytest

from logist.engine.create import create_job
from logist.engine.step import post_answer
from logist.replay.scripted import answer
from logist.resources import data_dir

from serving import served  # noqa: F401 - fixture

pytestmark = pytest.mark.serve


def held(jobs, job_id: str, changes: list[dict], files: dict[str, str]):
    """A job whose Worker's file changes wait for a person, with ``files`` in its workspace first."""
    role = json.loads((data_dir("roles") / "worker.json").read_text())
    (jobs.path / "roles" / "worker.json").write_text(json.dumps({**role, "file_changes": "approval"}))
    job = create_job(jobs, job_id, "Edit the files")
    for name, text in files.items():
        (job.workspace / name).write_text(text)
    post_answer(job, answer("COMPLETED", "Edited.", [c["path"] for c in changes if "delete" not in c],
                             file_changes=changes))
    assert job.manifest().pending_changes is not None
    return job


def shown(server, job_id: str) -> str:
    page = server.request("GET", f"/jobs/{job_id}")
    assert page.status == 200
    return page.data.decode()


def diff_text(page: str) -> list[str]:
    """Each held file's diff as the person reads it (markup taken out, references read back)."""
    return [html.unescape(re.sub(r"<[^>]+>", "", block))
            for block in re.findall(r'<pre class="diff held-diff">\n(.*?)</pre>', page, re.S)]


def test_held_changes_are_a_diff_against_the_workspace_inert_and_escaped_or_say_why_they_no_longer_apply(jobs, served):
    held(jobs, "j", [
        {"path": "hello.py", "content": "print('Hello')\nprint('<script>alert(1)</script>')\n"},
        {"path": "notes.md", "old": "two", "new": "deux \u202eevil"},
        {"path": "old.txt", "delete": True},
        {"path": "new.txt", "content": "fresh"},
    ], {"hello.py": "print('Hi')\n", "notes.md": "one\ntwo\nthree\n", "old.txt": "gone\n"})
    server = served()
    page = shown(server, "j")
    assert "<script>alert" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    hello, notes, old, new = diff_text(page)
    assert hello.splitlines() == ["--- a/hello.py", "+++ b/hello.py", "@@ -1 +1,2 @@", "-print('Hi')",
                                  "+print('Hello')", "+print('<script>alert(1)</script>')"]
    assert "-two\n+deux <U+202E>evil\n" in notes and "\u202e" not in page  # a bidi override is shown, not obeyed
    assert old.splitlines()[:2] == ["--- a/old.txt", "+++ /dev/null"] and "-gone" in old
    assert new.splitlines() == ["--- /dev/null", "+++ b/new.txt", "@@ -0,0 +1 @@", "+fresh", "\\ No newline at end of file"]
    # The workspace changes by hand: the diff follows it (and so does the page's tag).
    tag = server.request("GET", "/jobs/j").getheader("ETag")
    (jobs.path / "j" / "workspace" / "hello.py").write_text("print('Hey')\n")
    again = server.request("GET", "/jobs/j", {"If-None-Match": tag})
    assert again.status == 200 and "-print('Hey')" in diff_text(again.data.decode())[0]
    # A replacement whose text the workspace no longer has (edited by hand since): the page says why.
    job = held(jobs, "stale", [{"path": "a.txt", "old": "two", "new": "2"}], {"a.txt": "one\ntwo\n"})
    (job.workspace / "a.txt").write_text("one\n")
    page = shown(server, "stale")
    assert "They no longer apply to the workspace as it is" in page and "does not occur" in page
    assert "<li><code>a.txt</code></li>" in page and not diff_text(page)


def test_a_huge_held_file_shows_its_first_lines_and_says_what_is_cut(jobs, served):
    big = "".join(f"line {n}\n" for n in range(5_000))
    held(jobs, "big", [{"path": "big.txt", "content": big.replace("line", "LINE")}], {"big.txt": big})
    server = served()
    page = shown(server, "big")
    (diff,) = diff_text(page)
    assert len(diff.splitlines()) == 400 and diff.startswith("--- a/big.txt\n+++ b/big.txt\n@@ -1,2000 +1,2000 @@\n")
    note = html.unescape(re.search(r'<div class="held-file">.*?<p class="hint">(.*?)</p>', page, re.S).group(1))
    assert note == ("the first 2,000 lines of each side are compared (the file is 5,000 lines, 48,890 bytes, "
                    "now and 5,000 lines, 48,890 bytes, after); 3,603 more lines of the diff are not shown."), note
    # A replacement in a file of megabytes: only its first megabyte is read, the replaced text shown alone.
    huge = "x" * 100 + "\n" + "y" * 2_000_000 + "\nthe end\n"
    held(jobs, "huge", [{"path": "huge.txt", "old": "the end", "new": "THE END"},
                        {"path": "small.txt", "content": "b\n"}], {"huge.txt": huge, "small.txt": "a\n"})
    page = shown(server, "huge")
    replaced, small = diff_text(page)
    assert replaced.splitlines() == ["--- a/huge.txt", "+++ b/huge.txt", "@@ -1 +1 @@", "-the end",
                                     "\\ No newline at end of file", "+THE END", "\\ No newline at end of file"]
    assert "the file is 2,000,110 bytes: the replaced text alone is shown" in page
    assert small.splitlines()[-2:] == ["-a", "+b"]
