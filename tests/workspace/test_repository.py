"""logist.workspace.repository.Workspace against real git repositories, and jobs created from a source repository."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest

from logist.store.session import JobFiles
from logist.engine.create import create_job
from logist.workspace.repository import Workspace
from logist.errors import LogistError
from logist.protocol.answer import DeleteFile, InvalidAnswer, ReplaceInFile, WriteFile


def git(cwd, *args: str) -> str:
    out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return out.stdout.strip()


def tree(repo, rev="HEAD") -> dict[str, str]:
    """path -> blob sha of every file in ``rev``."""
    out = subprocess.run(["git", "ls-tree", "-r", "-z", rev], cwd=repo, capture_output=True, text=True, check=True).stdout
    return {line.split("\t", 1)[1]: line.split()[2] for line in out.split("\0") if line}


def files_on_disk(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` except .git, with its bytes (symlinks as their target)."""
    found = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not (Path(dirpath) == root and d == ".git")]
        for name in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            full = Path(dirpath) / name
            rel = full.relative_to(root).as_posix()
            found[rel] = b"->" + os.readlink(full).encode() if full.is_symlink() else full.read_bytes()
    return found


def dirs_on_disk(root: Path) -> set[str]:
    return {
        Path(d).relative_to(root).as_posix()
        for d, _sub, _files in os.walk(root)
        if ".git" not in Path(d).relative_to(root).parts
    }


@pytest.fixture
def workspace(tmp_path) -> Path:
    path = tmp_path / "ws"
    repo = Workspace.init(path, "job")
    (path / "README.md").write_text("Hello world\nHello again\n")
    (path / "src").mkdir()
    (path / "src" / "app.py").write_text("print('Hi')\n")
    (path / "gone.txt").write_text("delete me\n")
    repo.commit_all("seed")
    return path


@pytest.fixture
def repo(workspace) -> Workspace:
    return Workspace(workspace)


# --------------------------------------------------------------------------
# init, apply, commit, reset


def test_init_workspace_gives_an_empty_baseline_commit(tmp_path):
    path = tmp_path / "new" / "ws"
    repo = Workspace.init(path, "my-job")
    sha = repo.head()
    assert sha == git(path, "rev-parse", "HEAD") and len(sha) == 40
    assert git(path, "rev-parse", "--abbrev-ref", "HEAD") == "logist/my-job"
    assert git(path, "rev-list", "--count", "HEAD") == "1"
    assert tree(path) == {}
    assert "baseline" in git(path, "log", "-1", "--format=%s")
    assert repo.path == path and not repo.is_dirty()


def test_apply_write_replace_delete_with_nested_dirs(workspace, repo):
    changes = [
        WriteFile(path="docs/deep/er/notes.md", content="# Notes\n"),
        WriteFile(path="src/app.py", content="print('Hello')\n"),
        ReplaceInFile(path="README.md", old="world", new="there"),
        DeleteFile(path="gone.txt", delete=True),
        WriteFile(path="unicode/日本.txt", content="é\n"),
    ]
    touched = repo.apply_changes(changes)
    assert touched == ["docs/deep/er/notes.md", "src/app.py", "README.md", "gone.txt", "unicode/日本.txt"]
    assert (workspace / "docs/deep/er/notes.md").read_text() == "# Notes\n"
    assert (workspace / "src/app.py").read_text() == "print('Hello')\n"
    assert (workspace / "README.md").read_text() == "Hello there\nHello again\n"
    assert not (workspace / "gone.txt").exists()
    assert (workspace / "unicode/日本.txt").read_bytes() == "é\n".encode()
    before = repo.head()
    sha = repo.commit_all("step 1")
    assert sha == repo.head() != before
    assert git(workspace, "rev-parse", "HEAD~1") == before
    assert set(tree(workspace)) == {"README.md", "src/app.py", "docs/deep/er/notes.md", "unicode/日本.txt"}
    assert not repo.is_dirty()


def test_changes_to_the_same_file_compose_in_order(workspace, repo):
    touched = repo.apply_changes(
        [
            WriteFile(path="new.txt", content="one two\n"),
            ReplaceInFile(path="new.txt", old="one", new="1"),
            ReplaceInFile(path="new.txt", old="two", new="2"),
            DeleteFile(path="gone.txt", delete=True),
            WriteFile(path="gone.txt", content="back\n"),
        ],
    )
    assert touched == ["new.txt", "gone.txt"]
    assert (workspace / "new.txt").read_text() == "1 2\n"
    assert (workspace / "gone.txt").read_text() == "back\n"


def test_replace_needs_the_old_text_once_in_the_changed_content(workspace, repo):
    # The second replacement sees the first one's result: "Hello" now occurs once.
    repo.apply_changes(
        [ReplaceInFile(path="README.md", old="Hello world", new="Bye"), ReplaceInFile(path="README.md", old="Hello", new="Hi")],
    )
    assert (workspace / "README.md").read_text() == "Bye\nHi again\n"


def _refused_and_untouched(workspace: Path, changes, match: str | None) -> None:
    repo = Workspace(workspace)
    files, dirs = files_on_disk(workspace), dirs_on_disk(workspace)
    with pytest.raises(InvalidAnswer, match=match):
        repo.apply_changes(changes)
    assert files_on_disk(workspace) == files
    assert dirs_on_disk(workspace) == dirs, "not even an empty directory is left behind"
    assert not repo.is_dirty()


EARLIER = [
    WriteFile(path="brand/new/file.txt", content="new\n"),
    WriteFile(path="src/app.py", content="overwritten\n"),
    ReplaceInFile(path="README.md", old="world", new="there"),
    DeleteFile(path="gone.txt", delete=True),
]


@pytest.mark.parametrize(
    "bad, match",
    [
        (ReplaceInFile(path="src/app.py", old="not there", new="x"), "does not occur"),
        (ReplaceInFile(path="README.md", old="Hello", new="Bye"), "occurs 2 times"),
    ],
    ids=["zero-occurrences", "two-occurrences"],
)
@pytest.mark.parametrize("position", ["first", "last", "middle"])
def test_bad_replacement_refuses_the_whole_list(workspace, bad, match, position):
    if position == "first":
        changes = [bad, *EARLIER]
    elif position == "last":
        changes = [*EARLIER, bad]
    else:
        changes = [*EARLIER[:2], bad, *EARLIER[2:]]
    _refused_and_untouched(workspace, changes, match)


def test_replacement_counts_against_the_list_s_own_earlier_write(workspace):
    # src/app.py on disk has "Hi" once, but the earlier write replaced its content.
    _refused_and_untouched(
        workspace,
        [WriteFile(path="src/app.py", content="Hi Hi\n"), ReplaceInFile(path="src/app.py", old="Hi", new="Yo")],
        "occurs 2 times",
    )


@pytest.mark.parametrize(
    "bad, match",
    [
        (ReplaceInFile(path="missing.txt", old="a", new="b"), "no such file"),
        (DeleteFile(path="missing.txt", delete=True), "no such file"),
        (WriteFile(path="src", content="x"), "is a directory"),
        (DeleteFile(path="src", delete=True), "is a directory"),
        (WriteFile(path="../escape.txt", content="x"), "leaves the workspace"),
        (WriteFile(path=".git/config", content="x"), "inside .git"),
        (WriteFile(path="/tmp/abs.txt", content="x"), "is absolute"),
    ],
    ids=["replace-missing", "delete-missing", "write-dir", "delete-dir", "dotdot", "dotgit", "absolute"],
)
def test_other_refusals_also_write_nothing(workspace, tmp_path, bad, match):
    _refused_and_untouched(workspace, [*EARLIER, bad], match)
    assert not (tmp_path / "escape.txt").exists()


def test_deleted_then_replaced_in_same_list_is_refused(workspace):
    _refused_and_untouched(
        workspace, [DeleteFile(path="gone.txt", delete=True), ReplaceInFile(path="gone.txt", old="delete", new="x")],
        "no such file",
    )


def test_replacement_in_a_binary_file_is_refused(workspace, repo):
    (workspace / "blob.bin").write_bytes(b"\xff\xfe\x00old")
    repo.commit_all("binary")
    _refused_and_untouched(workspace, [*EARLIER, ReplaceInFile(path="blob.bin", old="old", new="new")], "not UTF-8")


@pytest.mark.parametrize(
    "changes",
    [
        [WriteFile(path="a.txt", content="x"), WriteFile(path="gone.txt/inner.txt", content="y")],
        [WriteFile(path="a.txt", content="x"), WriteFile(path="q", content="x"), WriteFile(path="q/r", content="y")],
    ],
    ids=["below-existing-file", "below-file-from-same-list"],
)
def test_write_below_a_file_is_refused_before_anything_is_written(workspace, changes):
    _refused_and_untouched(workspace, changes, None)


# --------------------------------------------------------------------------
# Symlinks


def test_symlinked_directory_to_outside_is_refused(workspace, repo, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim.txt").write_text("original\n")
    (workspace / "link").symlink_to(outside, target_is_directory=True)
    repo.commit_all("link")
    for change in (
        WriteFile(path="link/evil.txt", content="x"),
        WriteFile(path="link/victim.txt", content="pwned"),
        ReplaceInFile(path="link/victim.txt", old="original", new="pwned"),
        DeleteFile(path="link/victim.txt", delete=True),
    ):
        _refused_and_untouched(workspace, [WriteFile(path="ok.txt", content="x"), change], "symlink")
    assert sorted(p.name for p in outside.iterdir()) == ["victim.txt"]
    assert (outside / "victim.txt").read_text() == "original\n"


def test_symlinked_file_is_refused(workspace, repo, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("secret\n")
    (workspace / "notes.txt").symlink_to(secret)
    (workspace / "inner-link.txt").symlink_to("README.md")
    (workspace / "dangling.txt").symlink_to(tmp_path / "does-not-exist.txt")
    repo.commit_all("links")
    for path in ("notes.txt", "inner-link.txt", "dangling.txt"):
        for change in (
            WriteFile(path=path, content="x"),
            ReplaceInFile(path=path, old="secret", new="x"),
            DeleteFile(path=path, delete=True),
        ):
            _refused_and_untouched(workspace, [change], "symlink")
    assert secret.read_text() == "secret\n"
    assert not (tmp_path / "does-not-exist.txt").exists()


def test_symlinked_dir_inside_the_workspace_is_refused_too(workspace, repo):
    (workspace / "alias").symlink_to("src", target_is_directory=True)
    repo.commit_all("alias")
    _refused_and_untouched(workspace, [WriteFile(path="alias/app.py", content="x")], "symlink")


def test_read_text_file_does_not_follow_symlinks(workspace, repo, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("secret\n")
    (workspace / "notes.txt").symlink_to(secret)
    assert repo.read_text_file("notes.txt", 100) is None
    assert repo.read_text_file("../secret.txt", 100) is None
    assert repo.read_text_file("src/app.py", 100) == "print('Hi')\n"
    cut = repo.read_text_file("README.md", 5)
    assert cut.startswith("Hello\n[... cut: file is 24 bytes")


# --------------------------------------------------------------------------
# commit_all and reset_to


def test_commit_all_returns_none_when_nothing_changed(workspace, repo):
    head = repo.head()
    assert repo.commit_all("nothing") is None
    repo.apply_changes([WriteFile(path="src/app.py", content="print('Hi')\n")])  # same bytes
    assert repo.commit_all("same bytes") is None
    assert repo.head() == head
    assert git(workspace, "rev-list", "--count", "HEAD") == "2"


def test_commit_all_includes_deletions_and_untracked_files(workspace, repo):
    (workspace / "gone.txt").unlink()
    (workspace / "extra" / "dir").mkdir(parents=True)
    (workspace / "extra" / "dir" / "x.txt").write_text("x")
    sha = repo.commit_all("mixed")
    assert sha is not None
    assert set(tree(workspace)) == {"README.md", "src/app.py", "extra/dir/x.txt"}
    assert git(workspace, "log", "-1", "--format=%s") == "mixed"


def test_reset_to_restores_tracked_and_removes_untracked(workspace, repo):
    seed = repo.head()
    expected = files_on_disk(workspace)
    (workspace / "README.md").write_text("changed\n")
    (workspace / "src" / "app.py").unlink()
    (workspace / "untracked.txt").write_text("u")
    (workspace / "new" / "deep").mkdir(parents=True)
    (workspace / "new" / "deep" / "f.txt").write_text("f")
    (workspace / "src" / "extra.py").write_text("e")
    repo.reset_to(seed)
    assert files_on_disk(workspace) == expected
    assert not (workspace / "new").exists()
    assert not repo.is_dirty()
    assert repo.head() == seed


def test_reset_to_an_earlier_commit(workspace, repo):
    seed = repo.head()
    expected = files_on_disk(workspace)
    repo.apply_changes([WriteFile(path="later.txt", content="l")])
    repo.commit_all("later")
    (workspace / "scratch.txt").write_text("s")
    repo.reset_to(seed)
    assert repo.head() == seed
    assert files_on_disk(workspace) == expected


# --------------------------------------------------------------------------
# Reading history: diffs, files at a commit, patches; keeping and pushing commits


@pytest.fixture
def three_commits(repo):
    """seed -> edit README -> add notes.txt, as (seed, second, third)."""
    seed = repo.head()
    repo.apply_changes([ReplaceInFile(path="README.md", old="world", new="there")])
    second = repo.commit_all("second")
    repo.apply_changes([WriteFile(path="notes.txt", content="n\n")])
    third = repo.commit_all("third")
    return seed, second, third


def test_diffs_from_one_process_match_diff_pair_by_pair(repo, three_commits):
    seed, second, third = three_commits
    pairs = [(seed, second), (second, third), (third, third), (seed, third)]
    patches = repo.diffs(pairs)
    assert patches == [repo.diff(old, new) for old, new in pairs]
    assert "-Hello world\n+Hello there\n" in patches[0] and "notes.txt" not in patches[0]
    assert "+n\n" in patches[1] and "README.md" not in patches[1]
    assert patches[2] == ""
    assert repo.diffs([]) == []
    assert "README.md" in repo.diff(seed, third, stat=True) and "2 files changed" in repo.diff(seed, third, stat=True)


def test_diffs_name_a_missing_commit(repo, three_commits):
    seed, _second, third = three_commits
    with pytest.raises(LogistError, match="diff-tree"):
        repo.diffs([(seed, third), (third, "0" * 40)])


def test_streamed_diffs_are_cut_and_go_on_past_a_missing_commit(repo, three_commits):
    seed, second, third = three_commits
    missing = "0123456789abcdef" * 2 + "01234567"
    pairs = [(seed, second), (second, missing), (missing, third), (second, third), (seed, third), (third, missing)]
    patches = list(repo.iter_diffs(iter(pairs), limit=60))
    assert len(patches) == len(pairs)
    full = [repo.diff(seed, second), repo.diff(second, third), repo.diff(seed, third)]
    for patch, whole in zip([patches[0], patches[3], patches[4]], full):
        assert patch.error is None and patch.text == whole[:60] and patch.cut == len(whole) - 60
    # A missing new commit (git skips it) and a missing old one (git stops at it).
    assert [p.error is not None for p in patches] == [False, True, True, False, False, True]
    assert missing in patches[1].error and missing in patches[2].error
    assert [p.text for p in repo.iter_diffs([(seed, second)])] == [full[0]], "no limit: whole"
    assert list(repo.iter_diffs([])) == []


def test_file_at_and_format_patch(repo, three_commits, tmp_path):
    seed, second, third = three_commits
    assert repo.file_at(seed, "README.md") == "Hello world\nHello again\n"
    assert repo.file_at(third, "README.md") == "Hello there\nHello again\n"
    with pytest.raises(LogistError, match="git show failed"):
        repo.file_at(seed, "notes.txt")
    patch = repo.format_patch(seed, third)
    assert patch.count("\nSubject: ") + patch.startswith("Subject: ") == 2
    # The series applies on a copy of the seed and gives the same tree.
    copy = tmp_path / "copy"
    git(tmp_path, "clone", "-q", str(repo.path), str(copy))
    git(copy, "checkout", "-q", seed)
    subprocess.run(["git", "am", "-q"], cwd=copy, input=patch, text=True, check=True, capture_output=True)
    assert tree(copy) == tree(repo.path, third)


def test_keep_ref_keeps_a_commit_a_reset_left_behind(repo, three_commits):
    seed, _second, third = three_commits
    repo.keep_ref("refs/logist/rewound/9", third)
    repo.reset_to(seed)
    assert repo.head() == seed
    assert git(repo.path, "rev-parse", "refs/logist/rewound/9") == third


def test_push_branch_writes_one_ref_and_refuses_what_it_must(repo, three_commits, tmp_path):
    _seed, second, third = three_commits
    target = Workspace.init(tmp_path / "target", "other")
    target_head = target.head()
    assert repo.push_branch(target.path, "from-job", second) is False
    assert git(target.path, "rev-parse", "refs/heads/from-job") == second
    with pytest.raises(LogistError, match="already exists"):
        repo.push_branch(target.path, "from-job", third)
    assert repo.push_branch(target.path, "from-job", third, force=True) is True
    assert git(target.path, "rev-parse", "refs/heads/from-job") == third
    with pytest.raises(LogistError, match="is checked out"):
        repo.push_branch(target.path, "logist/other", third, force=True)
    with pytest.raises(LogistError, match="not a valid branch name"):
        repo.push_branch(target.path, "bad..name", third)
    assert target.head() == target_head and not target.is_dirty()


# --------------------------------------------------------------------------
# Jobs created from a source repository


def fingerprint(root: Path) -> dict[str, str]:
    """sha256 of every file (and symlink target) under root, .git included, plus every directory."""
    found = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames:
            full = Path(dirpath) / name
            found[full.relative_to(root).as_posix() + "/"] = "link:" + os.readlink(full) if full.is_symlink() else "dir"
        for name in filenames:
            full = Path(dirpath) / name
            rel = full.relative_to(root).as_posix()
            if full.is_symlink():
                found[rel] = "link:" + os.readlink(full)
            else:
                found[rel] = hashlib.sha256(full.read_bytes()).hexdigest()
    return found


class Source:
    def __init__(self, path: Path):
        self.path = path
        p = path
        p.mkdir()
        git(p, "init", "-q", "-b", "main")
        (p / "README.md").write_text("v1\n")
        (p / "lib").mkdir()
        (p / "lib" / "core.py").write_text("VERSION = 1\n")
        git(p, "add", "-A")
        git(p, "commit", "-qm", "one")
        git(p, "tag", "v1")
        git(p, "tag", "-a", "v1-annotated", "-m", "annotated")
        self.first = git(p, "rev-parse", "HEAD")
        git(p, "checkout", "-qb", "feature")
        (p / "feature.txt").write_text("feature\n")
        git(p, "add", "-A")
        git(p, "commit", "-qm", "feature")
        self.feature = git(p, "rev-parse", "HEAD")
        git(p, "checkout", "-q", "main")
        (p / "README.md").write_text("v2\n")
        (p / "lib" / "core.py").write_text("VERSION = 2\n")
        git(p, "commit", "-qam", "two")
        self.main = git(p, "rev-parse", "HEAD")
        # A dirty source: local edits and an untracked file that must stay as they are.
        (p / "README.md").write_text("local edit\n")
        (p / "scratch.txt").write_text("untracked\n")

    def state(self):
        fp = fingerprint(self.path)  # before any git command that might touch the index
        head = git(self.path, "rev-parse", "HEAD")
        branch = git(self.path, "symbolic-ref", "HEAD")
        status = git(self.path, "--no-optional-locks", "status", "--porcelain")
        return fp, head, branch, status


@pytest.fixture
def source(tmp_path):
    src = Source(tmp_path / "source repo")
    before = src.state()
    assert before[3] == "M README.md\n?? scratch.txt"
    yield src
    assert src.state() == before, "the source repository was changed"


@pytest.mark.parametrize(
    "ref, expected_attr",
    [(None, "main"), ("main", "main"), ("feature", "feature"), ("v1", "first"), ("v1-annotated", "first"),
     ("SHA", "first"), ("SHORT", "feature")],
    ids=["default-HEAD", "branch-main", "branch-feature", "tag", "annotated-tag", "sha", "short-sha"],
)
def test_job_from_repo_at_ref(jobs, source, ref, expected_attr):
    expected = getattr(source, expected_attr)
    if ref == "SHA":
        ref = source.first
    elif ref == "SHORT":
        ref = source.feature[:10]
    job = create_job(jobs, "from-src", "Improve the library", from_repo=str(source.path), ref=ref)
    wsp = job.workspace
    assert git(wsp, "rev-parse", "HEAD") == expected
    assert git(wsp, "rev-parse", "--abbrev-ref", "HEAD") == "logist/from-src"
    assert tree(wsp) == tree(source.path, expected)
    for rel, blob in tree(wsp).items():
        blob_bytes = subprocess.run(["git", "cat-file", "blob", blob], cwd=source.path, capture_output=True, check=True).stdout
        assert (wsp / rel).read_bytes() == blob_bytes
    assert not (wsp / "scratch.txt").exists(), "uncommitted source files are not copied"
    assert not job.repo.is_dirty()
    manifest = job.manifest()
    assert manifest.baseline_commit == manifest.workspace_commit == manifest.source.commit == expected
    assert manifest.source.repo == str(source.path.resolve()) and manifest.source.ref == ref
    (entry,) = JobFiles(job.dir).load_history().interactions
    assert entry.workspace_commit == expected


def test_job_workspace_changes_never_reach_the_source(jobs, source):
    job = create_job(jobs, "edit", "Edit", from_repo=str(source.path))
    job.repo.apply_changes([WriteFile(path="README.md", content="changed in job\n")])
    assert job.repo.commit_all("job change") is not None
    job.repo.reset_to(job.manifest().baseline_commit)
    # the fixture checks the source byte for byte


@pytest.mark.parametrize("ref", ["no-such-branch", "0" * 40, "v1^^^^^", "--all"])
def test_bad_ref_is_a_clear_error_and_leaves_no_job(jobs, source, ref):
    with pytest.raises(LogistError, match="names no commit") as info:
        create_job(jobs, "bad-ref", "x", from_repo=str(source.path), ref=ref)
    assert ref in str(info.value)
    assert not (jobs.path / "bad-ref").exists()
    assert "bad-ref" not in jobs.read_index().jobs


@pytest.mark.parametrize("kind", ["plain-dir", "missing", "file"])
def test_non_repo_is_a_clear_error_and_leaves_no_job(jobs, tmp_path, kind):
    target = tmp_path / "not-a-repo"
    if kind == "plain-dir":
        target.mkdir()
        (target / "a.txt").write_text("a")
    elif kind == "file":
        target.write_text("a")
    with pytest.raises(LogistError, match="not a git repository"):
        create_job(jobs, "no-repo", "x", from_repo=str(target))
    assert not (jobs.path / "no-repo").exists()
    assert "no-repo" not in jobs.read_index().jobs
    if kind == "plain-dir":
        assert sorted(p.name for p in target.iterdir()) == ["a.txt"]


def test_ref_without_from_repo_is_refused(jobs):
    with pytest.raises(LogistError, match="--ref goes with --from-repo"):
        create_job(jobs, "no-src", "x", ref="main")
    assert not (jobs.path / "no-src").exists()


def test_files_are_copied_into_workspace_and_baseline(jobs, tmp_path):
    (tmp_path / "inputs").mkdir()
    spec = tmp_path / "inputs" / "spec.md"
    spec.write_bytes(b"# Spec\n\xc3\xa9\n")
    data = tmp_path / "data.csv"
    data.write_text("a,b\n1,2\n")
    job = create_job(jobs, "with-files", "Use the files", files=[str(spec), "data.csv"])  # relative to cwd
    wsp = job.workspace
    assert (wsp / "spec.md").read_bytes() == spec.read_bytes()
    assert (wsp / "data.csv").read_bytes() == data.read_bytes()
    manifest = job.manifest()
    assert manifest.files == ["spec.md", "data.csv"]
    head = git(wsp, "rev-parse", "HEAD")
    assert manifest.baseline_commit == manifest.workspace_commit == head
    assert set(tree(wsp)) == {"spec.md", "data.csv"}
    assert git(wsp, "rev-list", "--count", "HEAD") == "2", "the empty baseline, then the files"
    assert tree(wsp, "HEAD~1") == {}
    assert not job.repo.is_dirty()
    assert spec.read_bytes() == b"# Spec\n\xc3\xa9\n", "the local file is left as it was"


def test_files_with_from_repo(jobs, source, tmp_path):
    extra = tmp_path / "brief.txt"
    extra.write_text("brief\n")
    job = create_job(jobs, "repo-files", "x", from_repo=str(source.path), files=["lib/core.py", str(extra)])
    wsp = job.workspace
    manifest = job.manifest()
    assert manifest.files == ["lib/core.py", "brief.txt"]
    assert (wsp / "brief.txt").read_text() == "brief\n"
    assert git(wsp, "rev-parse", "HEAD~1") == source.main == manifest.source.commit
    assert manifest.baseline_commit == git(wsp, "rev-parse", "HEAD")
    assert tree(wsp) == {**tree(source.path, source.main), "brief.txt": git(wsp, "rev-parse", "HEAD:brief.txt")}


@pytest.mark.parametrize("files", [["missing.txt"], ["a.txt", "sub/a.txt"]], ids=["missing", "same-name"])
def test_bad_files_leave_no_job(jobs, tmp_path, files):
    (tmp_path / "a.txt").write_text("a")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.txt").write_text("other a")
    with pytest.raises(LogistError, match="--file"):
        create_job(jobs, "bad-files", "x", files=files)
    assert not (jobs.path / "bad-files").exists()
    assert "bad-files" not in jobs.read_index().jobs
