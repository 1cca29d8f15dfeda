"""A check's throwaway view of its workspace
(:func:`logist.workspace.sandbox.throwaway_view`): an overlay mount in the
check's namespace, so what it writes is seen by it and gone once it ends,
and its ``.git`` and the jobs directory stay read-only; and the mounts made
by one ``mount -a`` of a table (:func:`logist.workspace.sandbox._mount_table`),
taken only where no target is a mount point already."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from logist.workspace import sandbox

pytestmark = pytest.mark.skipif(not sandbox.mounts_work(), reason="this system cannot mount in a user namespace")

needs_view = pytest.mark.skipif(not sandbox.throwaway_works(), reason="no overlay mount in a user namespace here")

#: Writes, changes and removes in the workspace, reads back what it wrote,
#: then reports what else it could write.
WRITER = ("echo changed >> kept && grep -q changed kept && rm gone && test ! -e gone && mkdir -p cache/x "
          "&& echo 1 > cache/x/y && test \"$(cat cache/x/y)\" = 1 && echo saw-own-writes; "
          "for where in .git ../.. ~/.local/state/logist; do "
          "if touch \"$where/planted\" 2>/dev/null; then echo \"$where writable\"; fi; done; echo probed")


def scratch_job(top: Path) -> tuple[Path, Path]:
    jobs = top / "jobs"
    workspace = jobs / "j" / "workspace"
    (workspace / ".git").mkdir(parents=True)
    (workspace / "kept").write_text("kept\n")
    (workspace / "gone").write_text("gone\n")
    return jobs, workspace


def run(workspace: Path, jobs: Path, command: str) -> sandbox.Contained:
    return sandbox.run_contained(command, workspace, sandbox.command_env(), 60,
                                 lambda handle: sandbox.read_head_and_tail(handle, 10_000), sandbox="namespace",
                                 workspace=workspace, read_only=[jobs], throwaway=True)


@needs_view
def test_what_a_check_writes_is_seen_by_it_and_gone_after(tmp_path):
    jobs, workspace = scratch_job(Path(os.path.realpath(tmp_path)))
    ran = run(workspace, jobs, WRITER)
    assert ran.thrown_away and ran.exit_code == 0, ran
    assert ran.stdout.split() == ["saw-own-writes", "probed"], ran.stdout + ran.stderr
    assert sorted(p.name for p in workspace.iterdir()) == [".git", "gone", "kept"]
    assert (workspace / "kept").read_text() == "kept\n" and not any((workspace / ".git").iterdir())
    assert not (jobs / "planted").exists()
    folder = sandbox._writes_folder(workspace)
    assert folder is not None and not (folder / "upper").exists(), "what it wrote was removed"
    for _ in range(2):  # the view is made again, its folder kept (nothing written), and again
        again = run(workspace, jobs, "cat kept")
        assert again.thrown_away and again.stdout == "kept\n", again
    assert (folder / "upper").is_dir() and not (folder / "work" / "work").exists(), "no volatile marker left"
    # The last run's marker is moved aside as it ends, and removed while the next run's command runs.
    assert (folder / sandbox._SPENT).is_dir()
    (folder / sandbox._SPENT / "left").mkdir()
    again = run(workspace, jobs, "cat kept")
    assert again.thrown_away and again.stdout == "kept\n", again
    assert not (folder / sandbox._SPENT / "left").exists() and not (folder / "work" / "work").exists()


@needs_view
def test_writes_a_run_left_behind_are_removed_before_the_next(tmp_path):
    jobs, workspace = scratch_job(Path(os.path.realpath(tmp_path)))
    folder = sandbox._writes_folder(workspace)
    (folder / "upper").mkdir(parents=True)
    (folder / "work").mkdir()
    (folder / "upper" / "kept").write_text("left by a run Logist did not live to end\n")
    ran = run(workspace, jobs, "cat kept")
    assert ran.thrown_away and ran.stdout == "kept\n", ran


def test_without_the_view_a_check_writes_the_workspace(tmp_path, monkeypatch):
    monkeypatch.setattr(sandbox, "throwaway_works", lambda: False)
    jobs, workspace = scratch_job(Path(os.path.realpath(tmp_path)))
    ran = run(workspace, jobs, "echo changed >> kept")
    assert not ran.thrown_away and ran.exit_code == 0, ran
    assert (workspace / "kept").read_text() == "kept\nchanged\n"


#: Run as root of a user and mount namespace in which the jobs directory
#: ($1) is bound on itself (a mount point): a check under the launcher, $2
#: its workspace, prints what it could write.
IN_A_NAMESPACE = r"""
import sys
import time
from pathlib import Path
from logist.workspace import sandbox
jobs, workspace, probe = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
assert sandbox._mount_table(str(workspace), True, [str(jobs)], sandbox.hidden_directories(), None) is None
ran = sandbox.run_contained(probe, workspace, sandbox.command_env(), 60, lambda h: sandbox.read_end(h, 10000),
                            sandbox="namespace", workspace=workspace, read_only=[jobs], throwaway=True)
print(ran.stdout + ran.stderr)
"""


def test_a_jobs_directory_that_is_a_mount_point_stays_read_only(tmp_path):
    jobs, workspace = scratch_job(Path(os.path.realpath(tmp_path)))
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    bind = f'{sandbox.programs.program("mount")} --bind "$1" "$1" && exec "$0" -c "$4" "$1" "$2" "$3"'
    done = subprocess.run([sandbox.programs.program("unshare"), "--user", "--mount", "--map-root-user", "/bin/sh",
                           "-c", bind, sys.executable, str(jobs), str(workspace), "touch made; " + WRITER,
                           IN_A_NAMESPACE], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.rstrip().endswith("probed"), done.stdout + done.stderr
    assert "writable" not in done.stdout, done.stdout
    assert not (jobs / "planted").exists() and not (workspace / ".git" / "planted").exists()


def test_a_table_is_mounted_whole_in_one_process(tmp_path):
    jobs, workspace = scratch_job(Path(os.path.realpath(tmp_path)))
    hidden = sandbox.hidden_directories()
    table = sandbox._mount_table(str(workspace), True, [str(jobs)], hidden, None)
    assert table is not None and Path(table).parent == Path(hidden[0]) / sandbox.MOUNT_TABLES
    assert sandbox._mount_table(str(workspace), True, [str(jobs)], hidden, None) == table, "one file a table"
    mount = sandbox.programs.program("mount")
    script = (f'LC_ALL=C {mount} -a -v -T "$0" && cd "$1" && touch made && '
              '! touch .git/x 2>/dev/null && ! touch ../x 2>/dev/null && ! touch "$2/x" 2>/dev/null && echo held')
    done = subprocess.run([*sandbox.namespace_prefix(), "/bin/sh", "-c", script, table, str(workspace), hidden[0]],
                          capture_output=True, text=True, timeout=60)
    assert done.stdout.count(": successfully mounted") == 4, done.stdout + done.stderr
    assert done.stdout.rstrip().endswith("held"), done.stdout + done.stderr
    assert (workspace / "made").exists() and not (workspace / ".git" / "x").exists()


def test_no_table_for_a_path_that_would_need_an_escape(tmp_path):
    jobs, workspace = scratch_job(Path(os.path.realpath(tmp_path)) / "a b#c")
    assert sandbox._mount_table(str(workspace), True, [str(jobs)], sandbox.hidden_directories(), None) is None
    argv = sandbox.launcher("touch made; touch .git/planted; echo ran", "auto", workspace, [jobs])
    done = subprocess.run(argv, cwd=workspace, input=b"go\n", capture_output=True, env=sandbox.command_env(),
                          timeout=60)
    assert done.stdout.decode().strip() == "ran", done
    assert (workspace / "made").exists() and not (workspace / ".git" / "planted").exists()


def test_a_git_folder_made_after_the_table_is_read_only_all_the_same(tmp_path):
    jobs = Path(os.path.realpath(tmp_path)) / "jobs"
    workspace = jobs / "j" / "workspace"
    workspace.mkdir(parents=True)
    argv = sandbox.launcher("touch made; touch .git/planted; echo ran", "auto", workspace, [jobs])
    (workspace / ".git").mkdir()  # the table has no line for it
    done = subprocess.run(argv, cwd=workspace, input=b"go\n", capture_output=True, env=sandbox.command_env(),
                          timeout=60)
    assert done.stdout.decode().strip() == "ran", done
    assert (workspace / "made").exists() and not (workspace / ".git" / "planted").exists()


def test_the_tables_kept_are_bounded_and_one_in_use_is_never_removed(tmp_path):
    (tmp_path / "private").mkdir(mode=0o700)
    hidden = [os.path.realpath(tmp_path / "private")]
    tables = [sandbox._mount_table(f"/ws/{n}", True, ["/jobs"], hidden, None) for n in range(sandbox._KEPT_TABLES)]
    folder = Path(hidden[0]) / sandbox.MOUNT_TABLES
    assert len(set(tables)) == len(tables) and all(tables)
    # All idle for longer than a run takes to start, but the one another job's run has just looked up.
    idle = time.time() - sandbox._TABLE_IDLE - 5
    for table in tables:
        os.utime(table, (idle, idle))
    in_use = sandbox._mount_table("/ws/7", True, ["/jobs"], hidden, None)
    assert in_use == tables[7]
    last = sandbox._mount_table(f"/ws/{sandbox._KEPT_TABLES}", True, ["/jobs"], hidden, None)
    assert sorted(folder.iterdir()) == sorted([Path(in_use), Path(last)]), "the idle ones were removed as the last was written"
    assert b"/ws/64 /ws/64 none bind 0 0\n" in Path(last).read_bytes()
    # Tables used within the idle time are kept, however many there are: none is removed under a run.
    recent = [sandbox._mount_table(f"/ws/r{n}", True, ["/jobs"], hidden, None) for n in range(sandbox._KEPT_TABLES)]
    assert all(Path(t).exists() for t in [in_use, last, *recent])


@needs_view
def test_a_run_killed_mid_check_leaves_nothing_that_fails_the_next(tmp_path):
    # Logist killed while a check ran: its overlay's own folder, marked volatile, was left in
    # the writes folder's work/, and the next check's mount refused it (the check failed, exit
    # 125, without running). The next run makes the folder anew and runs.
    jobs, workspace = scratch_job(Path(os.path.realpath(tmp_path)))
    folder = sandbox._writes_folder(workspace)
    child = subprocess.Popen([sys.executable, "-c", (
        "import sys; from pathlib import Path; from logist.workspace import sandbox; "
        "w, j = Path(sys.argv[1]), Path(sys.argv[2]); "
        "sandbox.run_contained('sleep 30', w, sandbox.command_env(), 60, "
        "lambda h: sandbox.read_head_and_tail(h, 100), sandbox='namespace', workspace=w, read_only=[j], "
        "throwaway=True)"), str(workspace), str(jobs)])
    try:
        deadline = time.monotonic() + 30
        while not (folder / "work" / "work").exists():
            assert child.poll() is None and time.monotonic() < deadline, "the check never got its view"
            time.sleep(0.01)
    finally:
        child.kill()
        child.wait()
    again = run(workspace, jobs, "cat kept")
    assert again.thrown_away and again.exit_code == 0 and again.stdout == "kept\n", again
