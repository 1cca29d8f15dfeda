"""The model's file changes against a real workspace: no spelling of .git,
no write through a hard link (logist.workspace.changes)."""

from __future__ import annotations

import os
import subprocess

import pytest

from logist.protocol.answer import DeleteFile, InvalidAnswer, ReplaceInFile, WriteFile
from logist.workspace.repository import Workspace


def snapshot(root):
    """Every file and folder under ``root`` (inside .git too) with its bytes."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames:
            out[os.path.relpath(os.path.join(dirpath, name), root) + "/"] = None
        for name in filenames:
            path = os.path.join(dirpath, name)
            with open(path, "rb") as handle:
                out[os.path.relpath(path, root)] = handle.read()
    return out


@pytest.fixture
def ws(tmp_path):
    workspace = Workspace.init(tmp_path / "ws", "j")
    (workspace.path / "sub").mkdir()
    for args in (["init", "-q"], ["commit", "-q", "--allow-empty", "-m", "x"]):  # a nested repository
        subprocess.run(["git", *args], cwd=workspace.path / "sub", check=True)
    (workspace.path / "keep.txt").write_text("keep\n")
    workspace.commit_all("files")
    return workspace


GIT_SPELLINGS = [
    ".GIT/hooks/post-commit", ".Git/config", ".git/config", "sub/.git/hooks/post-commit", "sub/.GIT/config",
    "a/b/.git", ".git", "sub/.git", ".git./config", ".git /config", ".git::$INDEX_ALLOCATION/config",
    "GIT~1/config", "git~1", ".g\u200cit/config", "sub/.\u200dgit/hooks/pre-commit",
]


@pytest.mark.parametrize("path", GIT_SPELLINGS)
@pytest.mark.parametrize("change", ["write", "replace", "delete"])
def test_every_spelling_of_git_is_refused_in_one_line_and_nothing_is_written(ws, path, change):
    made = {"write": WriteFile(path=path, content="#!/bin/sh\ntouch /tmp/pwned\n"),
            "replace": ReplaceInFile(path=path, old="[core]", new="[core]\n\tfsmonitor = ./x"),
            "delete": DeleteFile(path=path, delete=True)}[change]
    before = snapshot(ws.path)
    with pytest.raises(InvalidAnswer) as caught:
        ws.apply_changes([WriteFile(path="first.txt", content="x"), made])
    assert "inside .git" in str(caught.value) and "\n" not in str(caught.value)
    assert snapshot(ws.path) == before


@pytest.fixture
def linked(ws, tmp_path):
    """``ln /outside/target ws/hl``, as a command could do."""
    outside = tmp_path / "outside"
    outside.mkdir()
    target = outside / "target"
    target.write_text("outside line\n")
    target.chmod(0o640)
    os.link(target, ws.path / "hl")
    assert os.stat(ws.path / "hl").st_nlink == 2
    return target


def test_a_write_to_a_hard_link_replaces_the_link_not_the_outside_file(ws, linked):
    ws.apply_changes([WriteFile(path="hl", content="written by the model\n")])
    assert linked.read_text() == "outside line\n"
    assert (ws.path / "hl").read_text() == "written by the model\n"
    assert os.stat(ws.path / "hl").st_nlink == 1 and os.stat(linked).st_nlink == 1
    assert oct(os.stat(ws.path / "hl").st_mode & 0o777) == oct(0o640), "the file's permission bits are kept"


def test_a_replacement_in_a_hard_link_replaces_the_link_not_the_outside_file(ws, linked):
    ws.apply_changes([ReplaceInFile(path="hl", old="outside", new="inside")])
    assert linked.read_text() == "outside line\n"
    assert (ws.path / "hl").read_text() == "inside line\n"


def test_a_delete_of_a_hard_link_leaves_the_outside_file(ws, linked):
    ws.apply_changes([DeleteFile(path="hl", delete=True)])
    assert linked.read_text() == "outside line\n" and not (ws.path / "hl").exists()


def test_a_hard_link_to_the_repositorys_own_config_is_not_written_through(ws):
    config = ws.path / ".git" / "config"
    before = config.read_bytes()
    os.link(config, ws.path / "cfg")
    ws.apply_changes([WriteFile(path="cfg", content='[core]\n\tfsmonitor = "touch /tmp/x"\n')])
    assert config.read_bytes() == before


def test_writes_leave_no_temp_files_and_keep_an_executable_bit(ws):
    (ws.path / "run.sh").write_text("echo 1\n")
    (ws.path / "run.sh").chmod(0o755)
    ws.apply_changes([ReplaceInFile(path="run.sh", old="1", new="2"), WriteFile(path="new/dir/f.txt", content="f")])
    assert os.stat(ws.path / "run.sh").st_mode & 0o111
    assert sorted(p.name for p in ws.path.rglob("*.tmp")) == []
    assert (ws.path / "new" / "dir" / "f.txt").read_text() == "f"
