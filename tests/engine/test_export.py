"""``job export`` (a branch or a patch back to the source repository) and
``job diff``, through the real ``logist`` command against a real source
repository that a person is in the middle of working in."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from logist.store.session import JobFiles
from logist.engine.create import create_job
from logist.engine.loop import run_job
from logist.replay.scripted import answer

from conftest import via, logist_cli




def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout


def ok(result: subprocess.CompletedProcess, code: int = 0) -> subprocess.CompletedProcess:
    assert result.returncode == code, f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert "Traceback" not in result.stderr
    return result


def one_error_line(result: subprocess.CompletedProcess, code: int = 1) -> str:
    ok(result, code)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error:"), result.stderr
    return lines[0]


# The source repository ----------------------------------------------------------------


@pytest.fixture
def source(tmp_path) -> Path:
    """A repository with history, a checked-out feature branch, a staged change,
    an unstaged change to a tracked file and an untracked file."""
    src = tmp_path / "src"
    src.mkdir()
    git(src, "init", "-q", "-b", "main")
    (src / "README.md").write_text("# Project\n")
    (src / "app.py").write_text("print(1)\n")
    (src / "lib").mkdir()
    (src / "lib" / "util.py").write_text("def util():\n    return 1\n")
    git(src, "add", "-A")
    git(src, "commit", "-q", "-m", "initial")
    (src / "app.py").write_text("print(1)\nprint(2)\n")
    git(src, "commit", "-q", "-am", "second")
    git(src, "branch", "taken", "HEAD~1")  # a branch name export must not clobber
    git(src, "checkout", "-q", "-b", "feature")
    (src / "feature.txt").write_text("feature\n")
    git(src, "add", "feature.txt")
    git(src, "commit", "-q", "-m", "feature work")
    # Work in progress the person has not committed.
    (src / "README.md").write_text("# Project\n\nStaged, not committed.\n")
    git(src, "add", "README.md")
    (src / "app.py").write_text("print(1)\nprint(2)\n# unstaged edit\n")
    (src / "scratch.txt").write_text("untracked notes\n")
    return src


def snapshot_repo(src: Path) -> dict:
    """Everything a person's checkout is made of, read without letting git
    rewrite anything (no ``git status``, which may refresh the index)."""
    return {
        "HEAD file": (src / ".git" / "HEAD").read_bytes(),
        "HEAD ref": git(src, "symbolic-ref", "HEAD"),
        "HEAD sha": git(src, "rev-parse", "HEAD"),
        "index": (src / ".git" / "index").read_bytes(),
        "tree": {
            p.relative_to(src).as_posix(): p.read_bytes()
            for p in sorted(src.rglob("*"))
            if p.is_file() and ".git" not in p.relative_to(src).parts
        },
    }


def refs(src: Path) -> dict[str, str]:
    out = git(src, "for-each-ref", "--format=%(refname) %(objectname)")
    return dict(line.split() for line in out.splitlines())


STEP_A = answer("MESSAGE", message="editing app, adding mod, removing util", file_changes=[
    {"path": "app.py", "old": "print(2)\n", "new": "print(2)\nprint('job')\n"},
    {"path": "new/mod.py", "content": "VALUE = 42\n"},
    {"path": "lib/util.py", "delete": True},
])
STEP_B = answer("MESSAGE", message="looking around, changing nothing")
STEP_C = answer("COMPLETED", summary="Finished: app prints job twice.", file_changes=[
    {"path": "app.py", "old": "print('job')\n", "new": "print('job')\nprint('job again')\n"},
    {"path": "docs/guide.md", "content": "# Guide\n"},
])
REVIEW = answer("COMPLETED", summary="Checked app.py.")


def make_exported_job(jobs, llm, source, via_cli: bool):
    """A --from-repo job with three Worker steps (the middle one changing
    nothing) and a review; returns (source, snapshot before, job dir)."""
    before = snapshot_repo(source)
    llm.add(STEP_A, STEP_B, STEP_C, REVIEW)
    if via_cli:
        ok(logist_cli("job", "create", "exp", "-o", "Extend app.py", "--from-repo", str(source)))
        assert snapshot_repo(source) == before, "creating the job does not touch the source"
        ok(logist_cli("job", "run", "exp", "--base-url", llm.base_url), code=3)  # waits for approval
    else:
        job = create_job(jobs, "exp", "Extend app.py", from_repo=str(source))
        run_job(job, **via(llm))
    job_dir = jobs.path / "exp"
    manifest = json.loads((job_dir / "job_manifest.json").read_text())
    assert manifest["status"] == "APPROVAL_REQUIRED"
    assert manifest["source"]["commit"] == before["HEAD sha"].strip() == manifest["baseline_commit"]
    assert manifest["source"]["repo"] == str(source.resolve())
    return source, before, job_dir


@pytest.fixture
def exported_job(jobs, llm, source):
    return make_exported_job(jobs, llm, source, via_cli=False)


def manifest_of(job_dir: Path) -> dict:
    return json.loads((job_dir / "job_manifest.json").read_text())


def job_subjects(job_dir: Path) -> list[str]:
    m = manifest_of(job_dir)
    return git(job_dir / "workspace", "log", "--format=%s", f"{m['baseline_commit']}..{m['workspace_commit']}").splitlines()


# 4. export --branch -------------------------------------------------------------------


@pytest.mark.wire
def test_export_branch_leaves_the_checkout_untouched(jobs, llm, source):
    source, before, job_dir = make_exported_job(jobs, llm, source, via_cli=True)
    refs_before = refs(source)
    subjects = job_subjects(job_dir)
    assert len(subjects) == 2 and all(s.startswith("logist: exp entry") for s in subjects)

    result = ok(logist_cli("job", "export", "exp", "--branch", "logist/exp-result"))
    assert result.stdout == ""
    assert "logist/exp-result" in result.stderr

    m = manifest_of(job_dir)
    assert git(source, "rev-parse", "refs/heads/logist/exp-result").strip() == m["workspace_commit"]
    log = git(source, "log", "--format=%s", "logist/exp-result").splitlines()
    for subject in subjects:
        assert subject in log
    assert log[len(subjects):] == ["feature work", "second", "initial"], "the job's commits sit on its starting commit"
    # The exported tree is the job's tree, file by file.
    assert git(source, "ls-tree", "-r", "logist/exp-result") == git(job_dir / "workspace", "ls-tree", "-r", "HEAD")
    assert git(source, "show", "logist/exp-result:app.py") == "print(1)\nprint(2)\nprint('job')\nprint('job again')\n"

    assert snapshot_repo(source) == before, "HEAD, index and working tree are byte-for-byte unchanged"
    after_refs = refs(source)
    assert after_refs.pop("refs/heads/logist/exp-result") == m["workspace_commit"]
    assert after_refs == refs_before, "no other ref moved"


def test_export_to_an_existing_branch_needs_force(exported_job):
    source, before, job_dir = exported_job
    taken = git(source, "rev-parse", "taken").strip()

    line = one_error_line(logist_cli("job", "export", "exp", "--branch", "taken"))
    assert "taken" in line and "already exists" in line and "--force" in line
    assert git(source, "rev-parse", "taken").strip() == taken

    ok(logist_cli("job", "export", "exp", "--branch", "taken", "--force"))
    assert git(source, "rev-parse", "taken").strip() == manifest_of(job_dir)["workspace_commit"]
    assert snapshot_repo(source) == before

    # Exporting the same name again (the branch now exists) is refused as well.
    one_error_line(logist_cli("job", "export", "exp", "--branch", "taken"))


def test_export_never_moves_the_checked_out_branch(exported_job):
    """Even with --force, the branch the person has checked out is not
    replaced under their working tree."""
    source, before, _job_dir = exported_job
    line = one_error_line(logist_cli("job", "export", "exp", "--branch", "feature"))
    assert "is checked out" in line
    result = logist_cli("job", "export", "exp", "--branch", "feature", "--force")
    assert "is checked out" in one_error_line(result)
    assert snapshot_repo(source) == before


def test_export_never_moves_the_checked_out_branch_whatever_the_source_config(exported_job):
    """The refusal above must not rest on the source's git configuration: a
    person who set receive.denyCurrentBranch=ignore still keeps their HEAD."""
    source, before, _job_dir = exported_job
    git(source, "config", "receive.denyCurrentBranch", "ignore")
    result = logist_cli("job", "export", "exp", "--branch", "feature", "--force")
    assert snapshot_repo(source) == before
    one_error_line(result)


@pytest.mark.wire
def test_export_branch_needs_a_from_repo_job(jobs, llm):
    ok(logist_cli("job", "create", "plain", "-o", "Write a.txt"))
    llm.add(answer("MESSAGE", message="x", file_changes=[{"path": "a.txt", "content": "a\n"}]))
    ok(logist_cli("job", "step", "plain", "--oneshot", "--base-url", llm.base_url))
    line = one_error_line(logist_cli("job", "export", "plain", "--branch", "out"), code=2)
    assert "plain" in line and "--from-repo" in line and "--patch" in line


def test_export_branch_name_is_checked(exported_job):
    source, before, _ = exported_job
    refs_before = refs(source)
    line = one_error_line(logist_cli("job", "export", "exp", "--branch", "bad..name"))
    assert "bad..name" in line and "cmdline" not in line
    assert refs(source) == refs_before and snapshot_repo(source) == before


def test_export_needs_exactly_one_target(exported_job):
    result = logist_cli("job", "export", "exp")
    assert result.returncode == 2 and "--branch" in result.stderr and "Traceback" not in result.stderr
    result = logist_cli("job", "export", "exp", "--branch", "x", "--patch", "x.patch")
    assert result.returncode == 2 and "Traceback" not in result.stderr


# 4. export --patch ----------------------------------------------------------------------


def test_export_patch_applies_to_a_fresh_clone(exported_job, tmp_path):
    source, before, job_dir = exported_job
    m = manifest_of(job_dir)
    patch = tmp_path / "out" / "exp.patch"
    patch.parent.mkdir()
    result = ok(logist_cli("job", "export", "exp", "--patch", str(patch)))
    assert "2 commits, combined into one patch" in result.stderr
    warning = [line for line in result.stderr.splitlines() if line.startswith("Warning:")]
    assert warning == [f"Warning: job 'exp' is APPROVAL_REQUIRED, not approved: its work was exported as it stands "
                       f"(logist job approve exp first to export approved work)."]
    text = patch.read_text()
    assert text.count("\nSubject: ") + text.startswith("Subject: ") == 1, "one patch, the commits combined"

    fresh = tmp_path / "fresh"
    git(tmp_path, "clone", "-q", str(source), str(fresh))
    git(fresh, "checkout", "-q", "--detach", m["source"]["commit"])
    git(fresh, "apply", "--check", str(patch))
    git(fresh, "apply", str(patch))
    git(fresh, "add", "-A")
    assert git(fresh, "write-tree").strip() == git(job_dir / "workspace", "rev-parse", f"{m['workspace_commit']}^{{tree}}").strip()
    assert not (fresh / "lib" / "util.py").exists()
    assert (fresh / "new" / "mod.py").read_text() == "VALUE = 42\n"

    # git am commits it: one commit, the job's tree, naming the job's commits in its message.
    am = tmp_path / "am"
    git(tmp_path, "clone", "-q", str(source), str(am))
    git(am, "checkout", "-q", "--detach", m["source"]["commit"])
    git(am, "am", "-q", str(patch))
    assert git(am, "rev-parse", "HEAD^{tree}") == git(job_dir / "workspace", "rev-parse", f"{m['workspace_commit']}^{{tree}}")
    assert git(am, "log", "--format=%s", f"{m['source']['commit']}..HEAD").splitlines() == ["Extend app.py"]
    message = git(am, "log", "-1", "--format=%B")
    assert all(f"- {subject}" in message for subject in job_subjects(job_dir))

    assert snapshot_repo(source) == before


def test_export_patch_leaves_out_what_a_later_commit_took_back_and_the_help_says_how_to_apply_it(jobs, llm, tmp_path):
    """A file one step creates and a later one deletes, and a rejected
    attempt's file the Worker then removes, are not in the patch: the
    command the help gives (git apply) makes the job's tree."""
    from logist.engine.decide import user_action

    job = create_job(jobs, "tidy", "Write notes.txt")
    llm.add(
        answer("MESSAGE", message="a scratch file", file_changes=[{"path": "scratch.txt", "content": "tmp\n"}]),
        answer("COMPLETED", summary="Wrote it.", file_changes=[
            {"path": "scratch.txt", "delete": True}, {"path": "notes.txt", "content": "draft\n"},
            {"path": "rejected.txt", "content": "a wrong idea\n"}]),
        answer("COMPLETED", summary="Looks done."),
    )
    run_job(job, **via(llm))
    user_action(job, "reject", "No rejected.txt, and notes.txt says final")
    llm.add(
        answer("COMPLETED", summary="Fixed.", file_changes=[
            {"path": "rejected.txt", "delete": True}, {"path": "notes.txt", "content": "final\n"}]),
        answer("COMPLETED", summary="Good."),
    )
    run_job(job, **via(llm))
    ok(logist_cli("job", "approve", "tidy"))

    help_text = ok(logist_cli("job", "export", "--help")).stdout
    assert "logist job export hello --patch hello.patch && git apply hello.patch" in help_text
    patch = tmp_path / "tidy.patch"
    result = ok(logist_cli("job", "export", "tidy", "--patch", str(patch)))
    assert "Warning" not in result.stderr, "an approved job exports without a warning"
    m = manifest_of(jobs.path / "tidy")
    target = tmp_path / "target"
    git(tmp_path, "clone", "-q", str(jobs.path / "tidy" / "workspace"), str(target))
    git(target, "checkout", "-q", "--detach", m["baseline_commit"])
    git(target, "apply", str(patch))  # the command the help gives
    git(target, "add", "-A")
    assert git(target, "write-tree").strip() == git(job.workspace, "rev-parse", f"{m['workspace_commit']}^{{tree}}").strip()
    assert not (target / "scratch.txt").exists() and not (target / "rejected.txt").exists()
    assert (target / "notes.txt").read_text() == "final\n"
    assert "rejected.txt" not in patch.read_text() and "scratch.txt" not in patch.read_text()


def test_export_patch_with_nothing_to_export_is_a_clear_error(jobs, tmp_path):
    ok(logist_cli("job", "create", "empty", "-o", "Nothing yet"))
    line = one_error_line(logist_cli("job", "export", "empty", "--patch", str(tmp_path / "x.patch")))
    assert "nothing to export" in line
    assert not (tmp_path / "x.patch").exists()


# 4. job diff ------------------------------------------------------------------------------


def _files_in_diff(text: str) -> set[str]:
    return {line.split(" b/", 1)[1] for line in text.splitlines() if line.startswith("diff --git ")}


def test_diff_of_the_whole_job_and_of_one_step(exported_job):
    _source, _before, job_dir = exported_job
    entries = JobFiles(job_dir).load_history().interactions
    assert [e.kind for e in entries] == ["user_action", "llm_call", "llm_call", "llm_call", "llm_call"]

    whole = ok(logist_cli("job", "diff", "exp")).stdout
    assert _files_in_diff(whole) == {"app.py", "new/mod.py", "lib/util.py", "docs/guide.md"}
    assert "+print('job again')" in whole and "+VALUE = 42" in whole and "-def util():" in whole
    assert "feature.txt" not in whole and "Staged, not committed" not in whole and "unstaged edit" not in whole

    step_a = ok(logist_cli("job", "diff", "exp", "--entry", "2")).stdout
    assert _files_in_diff(step_a) == {"app.py", "new/mod.py", "lib/util.py"}
    assert "+print('job')" in step_a and "job again" not in step_a

    assert ok(logist_cli("job", "diff", "exp", "--entry", "3")).stdout == "", "a step that changed nothing has an empty diff"
    assert ok(logist_cli("job", "diff", "exp", "--entry", "5")).stdout == "", "nor does the review"

    step_c = ok(logist_cli("job", "diff", "exp", "--entry", "4")).stdout
    assert _files_in_diff(step_c) == {"app.py", "docs/guide.md"}
    assert "+print('job again')" in step_c

    stat = ok(logist_cli("job", "diff", "exp", "--stat")).stdout
    for name in ("app.py", "new/mod.py", "lib/util.py", "docs/guide.md"):
        assert name in stat
    assert "diff --git" not in stat


def test_diff_of_an_unknown_entry_is_a_clear_error(exported_job):
    line = one_error_line(logist_cli("job", "diff", "exp", "--entry", "99"), code=2)
    assert "99" in line and "exp" in line
