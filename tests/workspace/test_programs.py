"""The programs Logist runs (git, unshare, mount) come from the system's own
folders, never from PATH, which a model's command can write
(logist.programs).

Each case plants spies named git, unshare and mount where a command could
put them (a folder first on PATH, and the working directory through an
empty PATH entry), then makes Logist commit and run a sandboxed command: no
spy may run, and the work still happens with the real programs.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from logist import programs
from logist.engine.commands import run_command
from logist.errors import LogistError
from logist.workspace import sandbox
from logist.workspace.git import git_program
from logist.workspace.repository import Workspace

PLANTED = ("git", "unshare", "mount")


def plant(folder: Path, ran: Path) -> None:
    """Spies that record that they ran, then fail."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in PLANTED:
        spy = folder / name
        spy.write_text(f"#!/bin/sh\necho \"$0 $*\" >> '{ran}'\nexit 1\n")
        spy.chmod(0o755)


@pytest.mark.parametrize("where", ["first on PATH", "the working directory through an empty PATH entry"])
def test_no_program_planted_on_path_runs(tmp_path, monkeypatch, where):
    ran = tmp_path / "ran.log"
    ws = Workspace.init(tmp_path / "jobs" / "j" / "workspace", "j")
    if where == "first on PATH":
        plant(tmp_path / "bin", ran)
        monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    else:
        plant(ws.path, ran)
        monkeypatch.chdir(ws.path)
        monkeypatch.setenv("PATH", f":{os.environ['PATH']}")
        (ws.path / ".gitignore").write_text("git\nunshare\nmount\n")

    (ws.path / "a.txt").write_text("one\n")
    commit = ws.commit_all("a file")
    result = run_command("echo made > made.txt", ws.path, timeout=30, read_only=[tmp_path / "jobs"])

    assert not ran.exists(), f"a planted program ran: {ran.read_text()}"
    assert commit and (ws.path / "made.txt").read_text() == "made\n", result
    assert git_program().startswith(programs.SYSTEM_DIRS), git_program()
    argv = sandbox.launcher("true", "auto", ws.path, [tmp_path / "jobs"])
    assert os.path.isabs(argv[0]), argv


def test_a_program_in_a_folder_others_can_write_is_not_taken(tmp_path):
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "tool").write_text("#!/bin/sh\n")
    (folder / "tool").chmod(0o755)
    # tmp_path's parents include the world-writable temp folder: not root's alone.
    assert not programs.owned_by_root(folder / "tool")
    assert programs.owned_by_root(Path(git_program()))


def test_git_missing_from_the_system_folders_is_one_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr(programs, "SYSTEM_DIRS", (str(tmp_path),))
    programs.program.cache_clear()
    try:
        with pytest.raises(LogistError, match=r"no git program in .* \(Logist does not take git from PATH"):
            git_program()
    finally:
        monkeypatch.undo()
        programs.program.cache_clear()
    assert git_program() == programs.program("git")
