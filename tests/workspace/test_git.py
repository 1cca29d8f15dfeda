"""Logist's git never runs a program a model planted (logist.workspace.git).

Each case plants one of git's ways to run a program in a real workspace
repository, as a model's command could (``git config``, files in ``.git``),
then runs every kind of git process Logist starts on a workspace. Each planted
program would leave a file in ``ran/`` with its environment: none may appear.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import CANARY_KEY
from logist.errors import LogistError
from logist.workspace.git import KEPT, git_env, kept_config
from logist.workspace.repository import Workspace
from logist.protocol.answer import WriteFile


def spy(tmp_path: Path, name: str) -> str:
    """A program that records that it ran (with its environment), passing stdin through."""
    ran = tmp_path / "ran"
    ran.mkdir(exist_ok=True)
    path = tmp_path / "bin" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(f"#!/bin/sh\nenv > '{ran / name}'\ncat\nexit 0\n")
    path.chmod(0o755)
    return str(path)


def ran(tmp_path: Path) -> list[str]:
    """The planted programs that ran."""
    return sorted(p.name for p in (tmp_path / "ran").iterdir()) if (tmp_path / "ran").exists() else []


def as_command(ws: Path, *args: str) -> None:
    """What a model's command can do: run git in the workspace with the person's environment."""
    subprocess.run(["git", *args], cwd=ws, check=True, capture_output=True)


def plant_hooks(ws, tmp_path):
    hooks = ws / ".git" / "hooks"
    for name in ("pre-commit", "post-commit", "commit-msg", "prepare-commit-msg", "reference-transaction",
                 "post-index-change", "post-checkout", "fsmonitor-watchman", "pre-auto-gc"):
        (hooks / name).write_text(f"#!/bin/sh\nexec {spy(tmp_path, name)} </dev/null\n")
        (hooks / name).chmod(0o755)


def plant_hooks_path(ws, tmp_path):
    other = tmp_path / "myhooks"
    other.mkdir()
    for name in ("pre-commit", "post-commit", "reference-transaction"):
        (other / name).write_text(f"#!/bin/sh\nexec {spy(tmp_path, 'hooksPath-' + name)} </dev/null\n")
        (other / name).chmod(0o755)
    as_command(ws, "config", "core.hooksPath", str(other))


def plant_fsmonitor(ws, tmp_path):
    (ws / "fm.sh").write_text(f"#!/bin/sh\n{spy(tmp_path, 'fsmonitor')} </dev/null\n")
    (ws / "fm.sh").chmod(0o755)
    as_command(ws, "config", "core.fsmonitor", "./fm.sh")


def plant_filter(ws, tmp_path):
    as_command(ws, "config", "filter.x.clean", spy(tmp_path, "clean"))
    as_command(ws, "config", "filter.x.smudge", spy(tmp_path, "smudge"))
    (ws / ".gitattributes").write_text("* filter=x\n")


def plant_filter_process(ws, tmp_path):
    as_command(ws, "config", "filter.p.process", spy(tmp_path, "process"))
    (ws / ".gitattributes").write_text("* filter=p\n")


def plant_textconv_and_external_diff(ws, tmp_path):
    as_command(ws, "config", "diff.t.textconv", spy(tmp_path, "textconv"))
    as_command(ws, "config", "diff.t.command", spy(tmp_path, "diff-command"))
    as_command(ws, "config", "diff.external", spy(tmp_path, "external"))
    (ws / ".gitattributes").write_text("* diff=t\n")


def plant_include(ws, tmp_path):
    (ws / "evil.cfg").write_text(f"[filter \"i\"]\n\tclean = {spy(tmp_path, 'included-clean')}\n"
                                 f"[core]\n\tfsmonitor = {spy(tmp_path, 'included-fsmonitor')}\n")
    as_command(ws, "config", "include.path", "../evil.cfg")
    as_command(ws, "config", "includeIf.gitdir:/.path", "../evil.cfg")
    (ws / ".gitattributes").write_text("* filter=i\n")


def plant_pager_editor_gpg(ws, tmp_path):
    for key, name in (("core.pager", "pager"), ("core.editor", "editor"), ("gpg.program", "gpg"),
                      ("core.sshCommand", "ssh"), ("credential.helper", "credential"), ("core.askPass", "askpass")):
        as_command(ws, "config", key, spy(tmp_path, name))
    as_command(ws, "config", "commit.gpgSign", "true")
    as_command(ws, "config", "log.showSignature", "true")
    as_command(ws, "config", "gc.auto", "1")


def plant_nested_repository(ws, tmp_path):
    """A repository inside the workspace (committed as a gitlink), with a filter of its own."""
    sub = ws / "sub"
    sub.mkdir()
    as_command(sub, "init", "-q")
    (sub / "a.txt").write_text("a\n")
    as_command(sub, "add", "a.txt")
    as_command(sub, "-c", "user.name=x", "-c", "user.email=x@x", "commit", "-q", "-m", "sub")
    as_command(sub, "config", "filter.n.clean", spy(tmp_path, "nested-clean"))
    as_command(sub, "config", "core.fsmonitor", spy(tmp_path, "nested-fsmonitor"))
    (sub / ".gitattributes").write_text("* filter=n\n")
    Workspace(ws).commit_all("the nested repository as a gitlink")
    (sub / "a.txt").write_text("changed\n")


PLANTS = [plant_hooks, plant_hooks_path, plant_fsmonitor, plant_filter, plant_filter_process,
          plant_textconv_and_external_diff, plant_include, plant_pager_editor_gpg, plant_nested_repository]


@pytest.mark.parametrize("plant", PLANTS, ids=[p.__name__[6:] for p in PLANTS])
def test_no_planted_program_runs_in_any_git_process_logist_starts(tmp_path, plant, monkeypatch):
    monkeypatch.setenv("LOGIST_API_KEY", CANARY_KEY)
    ws = Workspace.init(tmp_path / "ws", "j")
    base = ws.head()
    (ws.path / "f.txt").write_text("one\n")
    first = ws.commit_all("one")
    plant(ws.path, tmp_path)
    (ws.path / "f.txt").write_text("two\n")
    (ws.path / "new.txt").write_text("new\n")
    assert ws.is_dirty()
    second = ws.commit_all("two")
    assert second and second != first
    ws.apply_changes([WriteFile(path="g.txt", content="g\n")])
    ws.commit_all("three")
    ws.diff(base, second)
    ws.diff(base, second, stat=True)
    ws.diffs([(base, first), (first, second)])
    ws.file_at(second, "f.txt")
    ws.format_patch(base, second)
    ws.keep_ref("refs/logist/kept", second)
    ws.reset_to(first)
    ws.reset_to(second)
    assert ran(tmp_path) == []
    # The repository is left as a person may use it: no planted setting or hook remains.
    config = (ws.path / ".git" / "config").read_text()
    assert config == kept_config(config) and "filter" not in config and "include" not in config
    assert [h.name for h in (ws.path / ".git" / "hooks").iterdir() if not h.name.endswith(".sample")] == []


def test_a_clone_gets_no_program_from_its_source(tmp_path):
    source = tmp_path / "src"
    source.mkdir()
    as_command(source, "init", "-q", "-b", "main")
    (source / "a.txt").write_text("a\n")
    (source / ".gitattributes").write_text("* filter=x\n")
    as_command(source, "config", "filter.x.smudge", spy(tmp_path, "source-smudge"))
    as_command(source, "add", "-A")
    as_command(source, "-c", "user.name=x", "-c", "user.email=x@x", "commit", "-q", "-m", "a")
    ws = Workspace.clone(source, None, tmp_path / "ws", "j")
    assert (ws.path / "a.txt").read_text() == "a\n"
    assert ran(tmp_path) == []
    assert "remote" not in (ws.path / ".git" / "config").read_text()
    # Objects are copied, never hard-linked to the source's files.
    objects = [p for p in (ws.path / ".git" / "objects").rglob("*") if p.is_file()]
    assert objects and all(p.stat().st_nlink == 1 for p in objects)


def test_a_worktree_elsewhere_is_never_used(tmp_path):
    """core.worktree pointing outside: Logist's add/clean/reset stay in the workspace."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_text("keep me\n")
    ws = Workspace.init(tmp_path / "ws", "j")
    as_command(ws.path, "config", "core.worktree", str(outside))
    (ws.path / "mine.txt").write_text("mine\n")
    sha = ws.commit_all("mine")
    assert ws.file_at(sha, "mine.txt") == "mine\n"
    ws.reset_to(ws.head())
    assert (outside / "precious.txt").read_text() == "keep me\n"
    with pytest.raises(LogistError):
        ws.file_at(sha, "precious.txt")


@pytest.mark.parametrize("replace", ["gitfile", "symlink", "missing"])
def test_a_replaced_git_folder_is_refused_not_followed(tmp_path, replace):
    other = tmp_path / "other"
    other.mkdir()
    as_command(other, "init", "-q")
    ws = Workspace.init(tmp_path / "ws", "j")
    git_dir = ws.path / ".git"
    import shutil

    shutil.rmtree(git_dir)
    if replace == "gitfile":
        git_dir.write_text(f"gitdir: {other / '.git'}\n")
    elif replace == "symlink":
        git_dir.symlink_to(other / ".git")
    (ws.path / "f.txt").write_text("x\n")
    with pytest.raises(LogistError) as caught:
        ws.commit_all("x")
    assert "\n" not in str(caught.value)
    assert subprocess.run(["git", "rev-parse", "-q", "--verify", "HEAD"], cwd=other, capture_output=True).returncode != 0


@pytest.mark.parametrize("link", ["logs/HEAD", "logs"])
def test_a_linked_reflog_is_never_written_through(tmp_path, link):
    """A command replaces a reflog (or the logs folder) with a link outside
    the workspace: Logist's commits append nothing there."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_text("keep me\n")
    ws = Workspace.init(tmp_path / "ws", "j")
    (ws.path / "a.txt").write_text("a\n")
    ws.commit_all("a")
    planted = ws.path / ".git" / link
    assert planted.exists(), "git keeps this reflog"
    import shutil

    shutil.rmtree(planted) if planted.is_dir() else planted.unlink()
    planted.symlink_to(outside if link == "logs" else outside / "precious.txt")
    (ws.path / "b.txt").write_text("b\n")
    sha = ws.commit_all("b")
    assert ws.file_at(sha, "b.txt") == "b\n"
    assert sorted(p.name for p in outside.iterdir()) == ["precious.txt"]
    assert (outside / "precious.txt").read_text() == "keep me\n"
    assert not planted.is_symlink()


def test_git_runs_without_secrets_or_tracing_from_logists_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("LOGIST_API_KEY", CANARY_KEY)
    monkeypatch.setenv("GH_PAT", CANARY_KEY)
    monkeypatch.setenv("GIT_TRACE", str(tmp_path / "trace"))
    monkeypatch.setenv("GIT_TRACE2_EVENT", str(tmp_path / "trace2"))
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", f"'core.hooksPath'='{tmp_path}'")
    monkeypatch.setenv("GIT_EXTERNAL_DIFF", spy(tmp_path, "external-env"))
    env = git_env()
    assert CANARY_KEY not in "".join(f"{k}={v}" for k, v in env.items())
    assert not {"GIT_TRACE", "GIT_TRACE2_EVENT", "GIT_CONFIG_PARAMETERS", "GIT_EXTERNAL_DIFF"} & set(env)
    assert env["GIT_AUTHOR_NAME"] == "Logist Test"  # the identity the person set is kept
    ws = Workspace.init(tmp_path / "ws", "j")
    (ws.path / "f.txt").write_text("x\n")
    sha = ws.commit_all("x")
    ws.diff(ws.head(), sha)
    assert not (tmp_path / "trace").exists() and not (tmp_path / "trace2").exists()
    assert ran(tmp_path) == []


def test_kept_config_keeps_only_plain_settings():
    text = ('[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n'
            '\tfsmonitor = ./fm.sh\n\thooksPath = /x\n[remote "origin"]\n\turl = /src\n[include]\n\tpath = ../x\n'
            '[core]\n\tpager = less; touch /tmp/x\n\tBare = true\n[filter "x"]\n\tclean = cat\n')
    assert kept_config(text) == ("[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n"
                                 "\tlogallrefupdates = true\n")
    assert kept_config(kept_config(text)) == kept_config(text)
    assert set(KEPT) >= {"core.repositoryformatversion", "core.bare"}


PLANT_ALL = """
import os, subprocess, sys
git, spy_dir = sys.argv[1], sys.argv[2]
def cfg(*a): subprocess.run([git, "config", *a], check=True)
for hook in ("pre-commit", "post-commit", "reference-transaction", "post-index-change"):
    path = os.path.join(".git", "hooks", hook)
    open(path, "w").write("#!/bin/sh\\nenv > leaked-" + hook + ".txt\\nenv > " + spy_dir + "/" + hook + "\\n")
    os.chmod(path, 0o755)
open("fm.sh", "w").write("#!/bin/sh\\nenv > " + spy_dir + "/fsmonitor\\n")
os.chmod("fm.sh", 0o755)
cfg("core.fsmonitor", "./fm.sh")
cfg("filter.x.clean", "sh -c 'env > " + spy_dir + "/clean; cat'")
open(".gitattributes", "w").write("* filter=x\\n")
open("work.txt", "w").write("made by the command\\n")
"""


@pytest.mark.wire
def test_a_command_plants_hooks_fsmonitor_and_filters_then_logist_steps_and_commits(jobs, llm, tmp_path):
    """Through real processes: the key is in Logist's environment, a command
    run without a sandbox (where it can write ``.git``: with one, ``.git`` is
    read-only to it, tests/engine/test_command_safety.py) plants a hook,
    fsmonitor and a filter, the next steps commit. Nothing planted runs, git
    never sees the key, GIT_TRACE set around Logist traces nothing, and the
    key is in no file of the jobs directory nor in any git object; the git a
    folder first on PATH holds is never the one Logist runs."""
    import shutil

    from conftest import logist_process
    from logist.engine.create import create_job
    from logist.replay.scripted import answer

    real_git = shutil.which("git")
    spies = tmp_path / "ran"
    spies.mkdir()
    (tmp_path / "plant.py").write_text(PLANT_ALL)
    wrapper_dir = tmp_path / "wrapped"
    wrapper_dir.mkdir()
    (wrapper_dir / "git").write_text(f"#!/bin/sh\nenv >> '{tmp_path / 'git-env.log'}'\nexec '{real_git}' \"$@\"\n")
    (wrapper_dir / "git").chmod(0o755)
    plant = f"{sys.executable} {tmp_path / 'plant.py'} {real_git} {spies}"
    job = create_job(jobs, "planted", "Anything", allowed_commands=[plant], command_sandbox="none")
    llm.add(answer("CMD", command=plant),
            answer("MESSAGE", message="more", file_changes=[{"path": "b.txt", "content": "b\n"}]),
            answer("COMPLETED", "done", ["b.txt"]))
    env = {"LOGIST_API_KEY": CANARY_KEY, "GIT_TRACE": str(tmp_path / "trace"),
           "PATH": f"{wrapper_dir}{os.pathsep}{os.environ['PATH']}"}
    for _ in range(3):
        done = logist_process("job", "step", "--oneshot", job.id, "--base-url", llm.base_url, env=env)
        assert done.returncode in (0, 3), done.stderr
        assert CANARY_KEY not in done.stdout + done.stderr
    assert (job.workspace / "work.txt").exists() and (job.workspace / "b.txt").exists()
    assert sorted(p.name for p in spies.iterdir()) == []
    assert list(job.workspace.glob("leaked-*")) == []
    # The only git traced is the command's own (its environment is the command runner's business).
    traced = (tmp_path / "trace").read_text().splitlines() if (tmp_path / "trace").exists() else []
    assert [line for line in traced if "trace:" in line and "git config" not in line] == []
    # The git first on PATH is not Logist's: it runs git from the system's folders (logist.programs);
    # what git's environment holds is tests/workspace/test_git.py's test_git_runs_without_secrets_....
    assert not (tmp_path / "git-env.log").exists(), "Logist ran the git found on PATH"
    objects = subprocess.run(["git", "cat-file", "--batch-all-objects", "--batch"], cwd=job.workspace,
                             capture_output=True, check=True).stdout
    assert b"made by the command" in objects and CANARY_KEY.encode() not in objects
    for path in jobs.path.rglob("*"):
        if path.is_file():
            assert CANARY_KEY.encode() not in path.read_bytes(), path


def test_only_local_paths_are_reachable_and_no_url_rewrite_survives(tmp_path):
    from logist.workspace.git import run_git

    marker = tmp_path / "ext-ran"
    done = run_git(tmp_path, ["ls-remote", f"ext::sh -c touch% {marker}"])
    assert done.returncode != 0 and not marker.exists()
    # A rewrite planted in the workspace would turn the export's local push into an ext:: one.
    source = tmp_path / "src"
    source.mkdir()
    as_command(source, "init", "-q", "-b", "main")
    as_command(source, "-c", "user.name=x", "-c", "user.email=x@x", "commit", "-q", "--allow-empty", "-m", "a")
    ws = Workspace.clone(source, None, tmp_path / "ws", "j")
    as_command(ws.path, "config", f"url.ext::sh -c touch% {marker}% #.insteadOf", str(source))
    (ws.path / "f.txt").write_text("f\n")
    sha = ws.commit_all("f")
    ws.push_branch(source, "exported", sha)
    assert not marker.exists()
    assert subprocess.run(["git", "rev-parse", "exported"], cwd=source, capture_output=True, text=True).stdout.strip() == sha


def test_a_huge_evidence_file_is_read_only_as_far_as_it_is_shown(tmp_path):
    # A sparse file of 3 GB costs a model's command nothing to make; the
    # Supervisor's prompt shows its first bytes and its size, reading no more.
    import tracemalloc

    from logist.workspace.repository import Workspace

    workspace = Workspace.init(tmp_path / "job" / "workspace", "huge")
    with open(workspace.path / "huge.log", "wb") as handle:
        handle.write(b"first line\n")
        handle.truncate(3 * 1024**3)
    tracemalloc.start()
    try:
        text = workspace.read_text_file("huge.log", 4096)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert text.startswith("first line\n") and f"file is {3 * 1024**3} bytes, showing the first 4096" in text
    assert peak < 1024**2, f"read {peak} bytes into memory"
