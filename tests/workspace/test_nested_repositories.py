"""Logist's git never enters a repository nested in the workspace (issue 27).

A command can make a folder a repository of its own (``git init sub``, a
submodule) and give it a config of its own: a filter, a textconv driver,
``core.fsmonitor``, a hook. Logist's ``git add -A`` / ``status`` / ``commit``
would run ``git status`` inside it, which runs what that config names,
outside any sandbox. Each case plants one, with a file of the nested
repository changed so that git must read it (same size, another mtime: git
hashes it, through the filter), then runs every git operation Logist does
on a workspace. A planted program leaves a file in ``ran/``: none may appear.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from logist.workspace.git import _GITLINK_MODE, guard_repository
from logist.workspace.repository import Workspace
from logist.protocol.answer import WriteFile


def spy(bin_dir: Path, ran: Path, name: str) -> str:
    """A program that records that it ran, passing stdin through."""
    bin_dir.mkdir(exist_ok=True)
    path = bin_dir / name
    path.write_text(f"#!/bin/sh\ntouch '{ran / name}'\ncat\nexit 0\n")
    path.chmod(0o755)
    return str(path)


def git(cwd: Path, *args: str) -> None:
    """A model's command running git, with whatever config it likes."""
    subprocess.run(["git", "-c", "user.name=m", "-c", "user.email=m@m", "-c", "protocol.file.allow=always", *args],
                   cwd=cwd, check=True, capture_output=True)


def nested_repo(path: Path) -> None:
    path.mkdir(parents=True)
    git(path, "init", "-q")
    (path / "a.txt").write_text("aaaa\n")
    git(path, "add", "a.txt")
    git(path, "commit", "-q", "-m", "nested")


def touch_changed(path: Path) -> None:
    """Same size, other bytes and mtime: git must read the file to know."""
    path.write_text("bbbb\n")
    os.utime(path, (1_000_000_000, 1_000_000_000))


def plant_filter(ws: Path, bins: Path, ran: Path) -> None:
    nested_repo(ws / "sub")
    git(ws / "sub", "config", "filter.pwn.clean", spy(bins, ran, "nested-clean"))
    git(ws / "sub", "config", "filter.pwn.smudge", spy(bins, ran, "nested-smudge"))
    git(ws / "sub", "config", "filter.proc.process", spy(bins, ran, "nested-process"))
    (ws / "sub" / ".gitattributes").write_text("*.txt filter=pwn\n* filter=proc\n")


def plant_textconv(ws: Path, bins: Path, ran: Path) -> None:
    """Diff drivers of the nested repository's own. git 2.39 runs none of
    them for any command Logist uses, even with every guard of Logist's
    removed (checked: the ``git status`` it runs inside a nested repository
    compares no content through a driver); the case stands so that a diff of
    Logist's that came to enter nested repositories would be caught."""
    nested_repo(ws / "sub")
    git(ws / "sub", "config", "diff.t.textconv", spy(bins, ran, "nested-textconv"))
    git(ws / "sub", "config", "diff.t.command", spy(bins, ran, "nested-diff-command"))
    git(ws / "sub", "config", "diff.external", spy(bins, ran, "nested-external-diff"))
    (ws / "sub" / ".gitattributes").write_text("* diff=t\n")
    (ws / ".gitattributes").write_text("* diff=t\n")  # the top repository names the driver too


def plant_fsmonitor(ws: Path, bins: Path, ran: Path) -> None:
    nested_repo(ws / "sub")
    git(ws / "sub", "config", "core.fsmonitor", spy(bins, ran, "nested-fsmonitor"))
    git(ws / "sub", "config", "core.fsmonitorHookVersion", "2")


def plant_hook(ws: Path, bins: Path, ran: Path) -> None:
    nested_repo(ws / "sub")
    hooks = ws / "sub" / ".git" / "hooks"
    for name in ("post-index-change", "reference-transaction", "post-checkout", "pre-auto-gc"):
        (hooks / name).write_text(f"#!/bin/sh\nexec {spy(bins, ran, 'nested-hook-' + name)} </dev/null\n")
        (hooks / name).chmod(0o755)
    git(ws / "sub", "config", "core.hooksPath", str(hooks))


def plant_submodule(ws: Path, bins: Path, ran: Path) -> None:
    """A real submodule (``git submodule add``: .gitmodules, a ``.git`` file,
    its repository in the workspace's ``.git/modules``) with a filter."""
    source = ws.parent / "upstream"
    nested_repo(source)
    git(ws, "submodule", "add", "-q", str(source), "mod")
    git(ws / "mod", "config", "filter.pwn.clean", spy(bins, ran, "submodule-clean"))
    (ws / "mod" / ".gitattributes").write_text("* filter=pwn\n")
    with open(ws / ".gitmodules", "a") as handle:
        handle.write("\tignore = none\n")


PLANTS = [plant_filter, plant_textconv, plant_fsmonitor, plant_hook, plant_submodule]


def every_git_operation(ws: Workspace, changed: Path) -> None:
    """What a step and the commands after it do with the workspace's git."""
    base = ws.head()
    ws.is_dirty()
    first = ws.commit_all("the nested repository appears")  # added as a gitlink
    touch_changed(changed)
    (ws.path / "top.txt").write_text("top\n")
    ws.is_dirty()
    second = ws.commit_all("a change beside it")
    touch_changed(changed)
    ws.commit_all("nothing of Logist's changed")  # git says "nothing to commit" after looking
    ws.apply_changes([WriteFile(path="top.txt", content="top 2\n")])
    ws.commit_paths("a tracked file", ["top.txt"])
    for old, new in ((base, first), (first, second)):
        ws.diff(old, new)
        ws.diff(old, new, stat=True)
    ws.diffs([(base, first), (first, second)])
    ws.format_patch(base, second)
    ws.reset_to(first)
    touch_changed(changed)
    ws.reset_to(second)
    ws.is_dirty()


@pytest.mark.parametrize("plant", PLANTS, ids=[p.__name__[6:] for p in PLANTS])
def test_no_program_of_a_nested_repository_runs(tmp_path, plant):
    ran = tmp_path / "ran"
    ran.mkdir()
    ws = Workspace.init(tmp_path / "ws", "j")
    plant(ws.path, tmp_path / "bin", ran)
    changed = ws.path / ("mod" if plant is plant_submodule else "sub") / "a.txt"
    touch_changed(changed)
    every_git_operation(ws, changed)
    assert sorted(p.name for p in ran.iterdir()) == []
    assert changed.read_text() == "bbbb\n", "the nested repository's files are left as the command left them"


def test_a_gitmodules_naming_a_command_stops_no_git_of_logists(tmp_path):
    """git refuses ``update = !cmd`` from ``.gitmodules`` with an error that
    would stop every patch Logist makes (reports, exports) and its commits."""
    ran = tmp_path / "ran"
    ran.mkdir()
    ws = Workspace.init(tmp_path / "ws", "j")
    plant_submodule(ws.path, tmp_path / "bin", ran)
    with open(ws.path / ".gitmodules", "a") as handle:
        handle.write(f"\tupdate = !{spy(tmp_path / 'bin', ran, 'submodule-update')}\n")
    every_git_operation(ws, ws.path / "mod" / "a.txt")
    assert sorted(p.name for p in ran.iterdir()) == []


def test_a_nested_repository_is_committed_as_a_link_and_its_removal_too(tmp_path):
    ws = Workspace.init(tmp_path / "ws", "j")
    nested_repo(ws.path / "sub")
    sha = ws.commit_all("sub")
    listed = subprocess.run(["git", "ls-tree", sha], cwd=ws.path, capture_output=True, text=True).stdout
    assert listed.startswith("160000 commit ") and listed.endswith("\tsub\n")
    assert guard_repository(ws.path / ".git") == []  # sealed already, by the guard of the commit's own git
    tags = subprocess.run(["git", "ls-files", "-t"], cwd=ws.path, capture_output=True, text=True).stdout
    assert tags == "S sub\n"
    shutil.rmtree(ws.path / "sub")
    removed = ws.commit_all("sub removed")
    assert removed and subprocess.run(["git", "ls-tree", removed], cwd=ws.path, capture_output=True,
                                      text=True).stdout == ""


def test_an_index_without_a_gitlink_costs_no_git_process(tmp_path, monkeypatch):
    """The guard reads ``.git/index`` and starts no process when no gitlink's mode is in it."""
    ws = Workspace.init(tmp_path / "ws", "j")
    for n in range(50):
        (ws.path / f"f{n}.txt").write_text(f"{n}\n")
    ws.commit_all("files")
    assert _GITLINK_MODE not in (ws.path / ".git" / "index").read_bytes()
    import logist.workspace.git as gitrun

    started = []
    real = gitrun._spawn
    monkeypatch.setattr(gitrun, "_spawn", lambda *a: started.append(a[1]) or real(*a))
    assert guard_repository(ws.path / ".git") == [] and started == []


@pytest.mark.wire
@pytest.mark.parametrize("sandbox", ["none", "auto"])
def test_the_nested_filter_attack_through_a_step_runs_nothing(jobs, llm, tmp_path, sandbox):
    """The attack as it was found, through the real program and real
    commands: a command makes a nested repository with a filter and changes
    its file, the step commits; the next step's command changes it again and
    the step commits. (``logist job step`` runs in this process: the
    commands and git are processes either way.)"""
    from conftest import CANARY_KEY, logist_cli
    from logist.engine.create import create_job
    from logist.replay.scripted import answer

    ran = tmp_path / "ran"
    ran.mkdir()
    os.chmod(ran, 0o777)
    clean = spy(tmp_path / "bin", ran, "nested-clean")
    script = tmp_path / "plant.sh"
    script.write_text(
        "set -e\nif [ ! -d sub ]; then git init -q sub; cd sub; echo aaaa > a.txt\n"
        "git -c user.name=m -c user.email=m@m add a.txt; git -c user.name=m -c user.email=m@m commit -qm s\n"
        f"git config filter.pwn.clean '{clean}'; echo '* filter=pwn' > .gitattributes; cd ..; fi\n"
        "echo bbbb > sub/a.txt; touch -d @$(( $(date +%s) - 100 )) sub/a.txt; echo planted\n")
    command = f"sh {script}"
    job = create_job(jobs, "nested", "Anything", allowed_commands=[command], command_sandbox=sandbox)
    llm.add(answer("CMD", command=command), answer("CMD", command=command), answer("COMPLETED", "done", []))
    for _ in range(3):
        done = logist_cli("job", "step", "--oneshot", job.id, "--base-url", llm.base_url,
                          env={"LOGIST_API_KEY": CANARY_KEY})
        assert done.returncode in (0, 3), done.stderr
    assert (job.workspace / "sub" / ".git").is_dir()
    assert sorted(p.name for p in ran.iterdir()) == []


UNPRIVILEGED = """
import os, sys
from pathlib import Path
sys.path.insert(0, sys.argv[3])
import test_nested_repositories as t
from logist.workspace.repository import Workspace
top, plant = Path(sys.argv[1]), getattr(t, sys.argv[2])
ws = Workspace.init(top / "ws", "j")
plant(ws.path, top / "bin", top / "ran")
changed = ws.path / ("mod" if plant is t.plant_submodule else "sub") / "a.txt"
t.touch_changed(changed)
t.every_git_operation(ws, changed)
print("uid", os.getuid())
"""


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("runuser") is None,
                    reason="needs root to become an unprivileged user (runuser)")
@pytest.mark.parametrize("plant", PLANTS, ids=[p.__name__[6:] for p in PLANTS])
def test_no_program_of_a_nested_repository_runs_for_an_unprivileged_user(tmp_path, plant):
    """Every variant, run by an unprivileged user (nobody) in a folder of its own."""
    import pydantic

    top = Path(tempfile.mkdtemp(prefix="logist-nobody-"))
    try:
        os.chmod(top, 0o777)
        ran = top / "ran"
        ran.mkdir()
        os.chmod(ran, 0o777)
        (top / "run.py").write_text(UNPRIVILEGED)
        here = Path(__file__).resolve().parent
        paths = os.pathsep.join([str(here.parent.parent), str(Path(pydantic.__file__).parent.parent)])
        env = {"PATH": os.environ["PATH"], "HOME": str(top), "PYTHONPATH": paths, "GIT_CONFIG_NOSYSTEM": "1",
               "PYTHONDONTWRITEBYTECODE": "1"}
        python = shutil.which("python3", path="/usr/bin") or sys.executable
        done = subprocess.run(["runuser", "-u", "nobody", "--", python, str(top / "run.py"), str(top),
                               plant.__name__, str(here)], cwd=top, env=env, capture_output=True, text=True,
                              timeout=120)
        if done.returncode != 0 and ("ModuleNotFoundError" in done.stderr or "ImportError" in done.stderr):
            pytest.skip(f"nobody cannot import Logist here: {done.stderr.splitlines()[-1]}")
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() != "uid 0" and done.stdout.startswith("uid ")
        assert sorted(p.name for p in ran.iterdir()) == []
    finally:
        shutil.rmtree(top, ignore_errors=True)
