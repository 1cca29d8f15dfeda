"""The git processes a step starts, through a real git behind a logging
wrapper (given to Logist as its git: it never takes one from PATH), and :meth:`Workspace.commit_paths` on real repositories."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from logist.engine.create import create_job
from logist.engine.step import step_once
from logist.protocol.answer import WriteFile
from logist.replay.scripted import answer
from logist.workspace.repository import Workspace


def git(cwd, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()


def committed(repo, rev="HEAD") -> list[str]:
    """The paths commit ``rev`` changed."""
    return git(repo, "diff-tree", "--no-commit-id", "--name-only", "-r", rev).splitlines()


@pytest.fixture
def git_calls(tmp_path, monkeypatch):
    """The subcommands of every git process Logist starts from now on (a
    wrapper that logs its arguments and runs the real git)."""
    log = tmp_path / "git-calls.log"
    wrapper = tmp_path / "wrapped"
    wrapper.mkdir()
    (wrapper / "git").write_text(f"#!/bin/sh\necho \"$@\" >> '{log}'\nexec '{shutil.which('git')}' \"$@\"\n")
    (wrapper / "git").chmod(0o755)
    monkeypatch.setattr("logist.workspace.git.git_program", lambda: str(wrapper / "git"))

    def calls() -> list[str]:
        lines = log.read_text().splitlines() if log.exists() else []
        log.unlink(missing_ok=True)
        subcommands = []
        for line in lines:
            words = line.split()
            i = 0
            while i < len(words) and words[i].startswith("-"):
                i += 2 if words[i] == "-c" else 1
            subcommands.append(words[i] if i < len(words) else "?")
        return subcommands

    return calls


def test_a_step_that_changes_tracked_files_commits_them_by_name(jobs, llm, git_calls):
    job = create_job(jobs, "named", "Keep notes")
    llm.add(answer("MESSAGE", message="new", file_changes=[{"path": "notes/a.txt", "content": "1\n"}]),
            answer("MESSAGE", message="edit", file_changes=[{"path": "notes/a.txt", "content": "2\n"}]),
            answer("MESSAGE", message="gone", file_changes=[{"path": "notes/a.txt", "delete": True}]))
    git_calls()
    step_once(job, endpoints=llm.endpoints)  # a new file: git add -A finds it
    assert git_calls() == ["status", "add", "commit"]
    assert committed(job.workspace) == ["notes/a.txt"]
    git_calls()
    second = step_once(job, endpoints=llm.endpoints)
    assert git_calls() == ["status", "commit"]
    assert second.commit == git(job.workspace, "rev-parse", "HEAD")
    assert (job.workspace / "notes" / "a.txt").read_text() == "2\n"
    assert git(job.workspace, "show", "HEAD:notes/a.txt") == "2"
    git_calls()
    step_once(job, endpoints=llm.endpoints)
    assert git_calls() == ["status", "commit"]
    assert committed(job.workspace) == ["notes/a.txt"] and not (job.workspace / "notes" / "a.txt").exists()
    assert git(job.workspace, "status", "--porcelain") == ""


def test_hand_edits_are_still_committed_on_their_own_before_a_step_by_name(jobs, llm, git_calls):
    job = create_job(jobs, "hands", "Keep notes")
    llm.add(answer("MESSAGE", message="a", file_changes=[{"path": "a.txt", "content": "1\n"}]),
            answer("MESSAGE", message="a again", file_changes=[{"path": "a.txt", "content": "2\n"}]))
    step_once(job, endpoints=llm.endpoints)
    (job.workspace / "b.txt").write_text("by hand\n")
    git_calls()
    step_once(job, endpoints=llm.endpoints)
    assert git_calls() == ["status", "add", "commit", "commit"]
    assert committed(job.workspace) == ["a.txt"]
    assert committed(job.workspace, "HEAD~1") == ["b.txt"]
    assert "changes made by hand" in git(job.workspace, "log", "-1", "--format=%s", "HEAD~1")


@pytest.fixture
def repo(tmp_path) -> Workspace:
    repo = Workspace.init(tmp_path / "ws", "job")
    for name in ("a.txt", "b.txt", "*.txt"):
        (repo.path / name).write_text(f"{name}\n")
    (repo.path / ".gitignore").write_text("ignored.txt\n")
    repo.commit_all("seed")
    return repo


def test_commit_paths_commits_those_paths_and_nothing_else(repo):
    (repo.path / "*.txt").write_text("changed\n")
    (repo.path / "b.txt").unlink()
    (repo.path / "a.txt").write_text("left for the next hand-edit check\n")
    sha = repo.commit_paths("named", ["*.txt", "b.txt"])  # "*.txt" is a name, not a pattern
    assert sha == repo.head() and sorted(committed(repo.path)) == ["*.txt", "b.txt"]
    assert git(repo.path, "status", "--porcelain") == "M a.txt"


def test_commit_paths_falls_back_to_adding_everything_for_a_path_git_does_not_track(repo):
    (repo.path / "new.txt").write_text("new\n")
    (repo.path / "a.txt").write_text("changed\n")
    assert repo.commit_paths("new", ["new.txt"]) == repo.head()
    assert sorted(committed(repo.path)) == ["a.txt", "new.txt"]
    (repo.path / "ignored.txt").write_text("ignored\n")
    assert repo.commit_paths("ignored", ["ignored.txt"]) is None
    assert git(repo.path, "log", "-1", "--format=%s") == "new"


def test_commit_paths_returns_none_when_the_files_did_not_change(repo):
    head = repo.head()
    repo.apply_changes([WriteFile(path="a.txt", content="a.txt\n")])
    assert repo.commit_paths("same bytes", ["a.txt"]) is None and repo.head() == head


def test_the_hand_edit_check_only_reads_the_index(repo):
    index = repo.path / ".git" / "index"
    before = index.stat()
    (repo.path / "a.txt").write_text("a.txt\n")  # the same bytes, a new time: git status would refresh the index
    os.utime(repo.path / "a.txt", ns=(before.st_mtime_ns + 10**9, before.st_mtime_ns + 10**9))
    assert not repo.is_dirty()
    after = index.stat()
    assert (after.st_ino, after.st_mtime_ns, after.st_size) == (before.st_ino, before.st_mtime_ns, before.st_size)
    (repo.path / "a.txt").write_text("changed\n")
    assert repo.is_dirty()
