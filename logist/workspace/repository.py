"""The job's workspace: a git repository, its file changes and its commits.

:class:`Workspace` wraps the repository's path; every git operation a job
needs is one method on it, so "where does a step commit?" has one answer.
It holds no state besides the path (git is the state), so making one is
free and any number may point at the same repository.

Every git process gets its command line and environment from
:mod:`logist.workspace.git` (a clean environment, no hooks, no program named by
the repository's config, no nested repository entered). Patches leave
nested repositories out (``--ignore-submodules=all``): git would read
``.gitmodules`` for them, and one a command wrote (``update = !cmd``)
makes it stop with an error. A step that commits starts two when it changes
only files git tracks: ``git status`` (were there hand edits?) and ``git
commit --only`` of those paths (:meth:`Workspace.commit_paths`); three when
it creates a file or runs a command (``git add -A`` and ``git commit``).
HEAD is read from ``.git`` itself. The model's file changes are checked and
written by :mod:`logist.workspace.changes`.
"""

from __future__ import annotations

import difflib
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, Optional, Sequence, Union

from .diffs import SHA, Patch, stream_patches
from ..errors import LogistError
from .git import Done as _Done, git_argv, git_env, guard_repository, run_git as _run_git, settle_config
from .changes import plan, resolve_inside, write_as_new_file
from ..errors import InvalidAnswer
from ..protocol.file_changes import FileChange, ReplaceInFile, WriteFile

WORK_BRANCH = "logist/{job_id}"


def _decode(data: bytes) -> str:
    # Bytes that are not UTF-8 (a file's content in a patch) survive the round trip.
    return data.decode("utf-8", "surrogateescape")


def _git_detail(proc: _Done) -> str:
    """git's own message on one line."""
    lines = [line.strip() for line in _decode(proc.stderr or proc.stdout).splitlines() if line.strip()]
    return "; ".join(lines) or f"exit code {proc.returncode}"


#: git's words for a path it cannot read (``add``, ``status``, ``clean``).
_DENIED = re.compile(r"""could not open directory '(.+?)': Permission denied|open\("(.+?)"\): Permission denied""")


class UnreadableFiles(LogistError):
    """Files or folders of the workspace git cannot read (``chmod 000`` by a
    command, as a user that is not root): named, with what to do. ``commit``:
    the commit of everything else, when one was made."""

    def __init__(self, workspace: Path, paths: Sequence[str], doing: str, commit: Optional[str] = None):
        self.paths, self.commit = list(paths), commit
        shown = ", ".join(self.paths[:10]) + (f" and {len(self.paths) - 10} more" if len(self.paths) > 10 else "")
        super().__init__(f"cannot {doing}: git cannot read {shown} in {workspace} (permission denied); make "
                         "them readable (chmod -R u+rwX PATH) or remove them")


def _denied(proc: _Done) -> list[str]:
    """The paths git said it cannot read, in order, once each."""
    found = [a or b for a, b in _DENIED.findall(_decode(proc.stderr))]
    return list(dict.fromkeys(found))


#: The lines of each side a held change's diff compares at most, and the bytes read of a file for it.
COMPARED_LINES = 2000
COMPARED_BYTES = 1 << 20
#: The lines of a held change's diff shown at most.
DIFF_LINES = 400


@dataclass(frozen=True)
class ChangeDiff:
    """One file of held file changes as a unified diff against the
    workspace's content now: ``diff`` its first lines, ``cut`` how many
    lines of it are not shown, ``note`` what else a reader must know (the
    file was compared in part, or is not text)."""

    path: str
    diff: str
    cut: int = 0
    note: Optional[str] = None


def _first_lines(data: Optional[bytes], size: int) -> tuple[list[str], str]:
    """The first :data:`COMPARED_LINES` lines of ``data`` (a file of
    ``size`` bytes, read up to :data:`COMPARED_BYTES`), and what the file is
    ("" when all of it is there)."""
    if data is None:
        return [], ""
    lines = data.decode("utf-8", errors="replace").splitlines(keepends=True)
    if size > len(data):
        if lines and not lines[-1].endswith("\n"):
            lines.pop()  # a line cut by the bytes read
        return lines[:COMPARED_LINES], f"{size:,} bytes"
    if len(lines) > COMPARED_LINES:
        return lines[:COMPARED_LINES], f"{len(lines):,} lines, {size:,} bytes,"
    return lines, ""


def change_diff(rel: str, before: Optional[bytes], before_size: int, after: Optional[bytes],
                after_size: int) -> ChangeDiff:
    """``rel`` from ``before`` to ``after`` (None: no such file) as a unified
    diff, bounded (:data:`COMPARED_LINES`, :data:`DIFF_LINES`)."""
    if (before and b"\0" in before[:8192]) or (after and b"\0" in after[:8192]):
        return ChangeDiff(rel, "", note=f"not text ({before_size:,} bytes now, {after_size:,} after)")
    old, old_size = _first_lines(before, before_size)
    new, new_size = _first_lines(after, after_size)
    lines = difflib.unified_diff(old, new, "/dev/null" if before is None else f"a/{rel}",
                                 "/dev/null" if after is None else f"b/{rel}", n=3)
    shown: list[str] = []
    cut = 0
    for line in lines:
        if len(shown) < DIFF_LINES:
            shown.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
        else:
            cut += 1
    note = None
    if old_size or new_size:
        sizes = f"{old_size or f'{before_size:,} bytes'} now and {new_size or f'{after_size:,} bytes'} after"
        note = f"the first {COMPARED_LINES:,} lines of each side are compared (the file is {sizes})"
    return ChangeDiff(rel, "".join(shown), cut, note)


class Workspace:
    """A job's git repository at ``path``. ``guarded`` (a job's workspace):
    before each git process the repository is put back to what Logist
    allows (:func:`logist.workspace.git.guard_repository`); False only for a
    person's own repository (``--from-repo``, export), which Logist never
    changes but through git itself."""

    def __init__(self, path: Union[str, Path], guarded: bool = True):
        self.path = Path(path)
        self.guarded = guarded
        #: Its .git/config texts found as Logist wants them (a fact of this workspace; see guard_repository).
        self.good_configs: set[bytes] = set()

    def __repr__(self) -> str:
        return f"Workspace({str(self.path)!r})"

    # -- making one ---------------------------------------------------------

    @classmethod
    def init(cls, path: Path, job_id: str) -> "Workspace":
        """An empty repository with one empty baseline commit."""
        workspace = cls(path)
        workspace.path.mkdir(parents=True, exist_ok=True)
        proc = _run_git(workspace.path, ["init", "-q", "-b", WORK_BRANCH.format(job_id=job_id)])
        if proc.returncode != 0:
            raise LogistError(f"git init failed in {workspace.path}: {_git_detail(proc)}")
        settle_config(workspace.path / ".git")
        workspace._git("commit", "-q", "--allow-empty", "-m", f"logist: baseline of job {job_id} (empty workspace)")
        return workspace

    @classmethod
    def clone(cls, source: Path, ref: Optional[str], path: Path, job_id: str) -> "Workspace":
        """Clone ``source`` (never written to) and check out ``ref`` on a job branch."""
        source = Path(source).resolve()
        if not (source / ".git").exists() and not (source / "HEAD").exists():
            raise LogistError(f"--from-repo {source} is not a git repository")
        workspace = cls(path)
        # --no-hardlinks: the workspace's objects are its own, never the source's files.
        proc = _run_git(workspace.path.parent, ["clone", "-q", "--no-checkout", "--no-hardlinks", "--",
                                                str(source), str(workspace.path)])
        if proc.returncode != 0:
            raise LogistError(f"cannot clone {source}: {_git_detail(proc)}")
        settle_config(workspace.path / ".git")
        target = ref or "HEAD"
        try:
            sha = workspace._git("rev-parse", "--verify", "-q", f"{target}^{{commit}}")
        except LogistError:
            try:
                sha = workspace._git("rev-parse", "--verify", "-q", f"origin/{target}^{{commit}}")
            except LogistError:
                raise LogistError(f"--ref {target} names no commit in {source}") from None
        workspace._git("checkout", "-q", "-b", WORK_BRANCH.format(job_id=job_id), sha)
        return workspace

    # -- running git --------------------------------------------------------

    def _run(self, args: Sequence[str]) -> _Done:
        """One git process in the repository (guarded: see the class)."""
        return _run_git(self.path, args, self.path / ".git" if self.guarded else None, self.good_configs)

    def _raw(self, *args: str) -> str:
        """git's output as it is (patches); :class:`LogistError` with git's
        message when it fails."""
        proc = self._run(args)
        if proc.returncode != 0:
            raise LogistError(f"git {args[0]} failed in {self.path}: {_git_detail(proc)}")
        return _decode(proc.stdout)

    def _git(self, *args: str) -> str:
        """Like :meth:`_raw`, without the output's last newline."""
        out = self._raw(*args)
        return out[:-1] if out.endswith("\n") else out

    # -- reading ------------------------------------------------------------

    def exists(self) -> bool:
        """Whether the workspace's own repository is (still) there: ``.git``
        a folder. A link or a ``gitdir:`` file in its place is refused by
        Logist's git (:func:`logist.workspace.git.guard_repository`), so the
        views read no diffs from it and show the job without them."""
        git_dir = self.path / ".git"
        return git_dir.is_dir() and not git_dir.is_symlink()

    def head(self) -> str:
        """The commit HEAD points at. Read from .git directly when it is a plain
        loose ref (every step needs it; a git process costs milliseconds)."""
        git_dir = self.path / ".git"
        try:
            text = (git_dir / "HEAD").read_text().strip()
            if text.startswith("ref: refs/") and ".." not in text:
                text = (git_dir / text[5:]).read_text().strip()
            if SHA.match(text):
                return text
        except (OSError, ValueError):
            pass
        return self._git("rev-parse", "HEAD")

    def is_dirty(self) -> bool:
        # --no-optional-locks: the index is only read (status would write back
        # what it refreshed; the commit that follows does that anyway).
        return bool(self._git("--no-optional-locks", "status", "--porcelain", "--untracked-files=normal",
                              "--ignore-submodules=all"))

    def diff(self, old: str, new: str, stat: bool = False) -> str:
        args = ["diff", "--no-color", "--no-ext-diff", "--no-textconv", "--ignore-submodules=all"] + (["--stat"] if stat else ["--binary"])
        return self._raw(*args, old, new)

    def diffs(self, pairs: Sequence[tuple[str, str]]) -> list[str]:
        """The patch from ``old`` to ``new`` of each pair, in order (see :meth:`iter_diffs`)."""
        patches = list(self.iter_diffs(pairs))
        failed = next((p for p in patches if p.error), None)
        if failed is not None:
            raise LogistError(f"git diff-tree failed in {self.path}: {failed.error}")
        return [p.text for p in patches]

    def iter_diffs(self, pairs: Iterable[tuple[str, str]], limit: Optional[int] = None) -> Iterator[Patch]:
        """The patch from ``old`` to ``new`` of each pair, in order, streamed
        from one git process (``git diff-tree --stdin``): a report on a job of
        thousands of steps would otherwise start thousands of processes, or
        hold every patch at once. ``pairs`` (full shas) are all read before
        this returns, so they may come from a generator. Each patch is cut at
        ``limit`` characters; a pair git cannot read gets a :class:`Patch`
        saying why, and the pairs after it are still compared."""
        stdin = tempfile.TemporaryFile()
        count = 0
        for old, new in pairs:
            # Fixed-width lines (see logist.workspace.diffs; a bad sha becomes one git cannot read).
            stdin.write(f"{new if SHA.match(new) else '0' * 40} {old if SHA.match(old) else '0' * 40}\n".encode())
            count += 1
        if self.guarded:
            guard_repository(self.path / ".git", self.good_configs)
        git = git_argv(["diff-tree", "--stdin", "-r", "-p", "--always", "--no-color", "--no-ext-diff", "--no-textconv",
                        "--ignore-submodules=all"])
        return stream_patches(git, self.path, git_env(self.path / ".git" if self.guarded else None), stdin, count, limit)

    def work_patch(self, base: str) -> str:
        """Everything in the workspace that differs from commit ``base``
        (changed, added, deleted files; untracked ones too, ignored ones not),
        as a binary patch :meth:`apply_patch` applies: what a coding agent's
        run did. The changes are staged (the step's commit stages them anyway)."""
        added = self._run(["add", "-A", "--ignore-errors"])
        denied = _denied(added)
        if added.returncode != 0 and not denied:
            raise LogistError(f"git add failed in {self.path}: {_git_detail(added)}")
        return self._raw("diff", "--cached", "--binary", "--no-color", "--no-ext-diff", "--no-textconv",
                         "--no-renames", "--ignore-submodules=all", base)

    def apply_patch(self, patch: str) -> None:
        """Apply a patch of :meth:`work_patch` to the files (not committed);
        :class:`LogistError` with git's message when it does not apply."""
        if not patch.strip():
            return
        with tempfile.NamedTemporaryFile("w", encoding="utf-8", suffix=".patch", delete=False) as handle:
            handle.write(patch)
        try:
            self._git("apply", "--binary", "--whitespace=nowarn", handle.name)
        finally:
            os.unlink(handle.name)

    def file_at(self, sha: str, rel: str) -> str:
        """A workspace file's text as it was at commit ``sha``."""
        return self._raw("show", f"{sha}:{rel}")

    def format_patch(self, base: str, head: str) -> str:
        """The commits ``base..head`` as a patch series (``git am`` / ``git apply``)."""
        return self._raw("format-patch", "--stdout", "--binary", "--ignore-submodules=all", f"{base}..{head}")

    def subjects(self, base: str, head: str) -> list[str]:
        """The subjects of the commits ``base..head``, oldest first."""
        return self._git("log", "--reverse", "--format=%s", f"{base}..{head}").splitlines()

    def combined_patch(self, base: str, head: str, message: str) -> str:
        """The change from ``base`` to ``head`` as one patch ("" when there is
        none): a commit of ``head``'s tree on ``base`` is made for it (no
        branch names it) and written as ``git format-patch`` writes one, so
        that both ``git apply`` and ``git am`` give ``head``'s tree. A series
        of the commits would not: ``git apply`` of a file one commit creates
        and a later one deletes leaves the file."""
        tree = self._git("rev-parse", f"{head}^{{tree}}")
        if tree == self._git("rev-parse", f"{base}^{{tree}}"):
            return ""
        commit = self._git("commit-tree", tree, "-p", base, "-m", message)
        return self._raw("format-patch", "--stdout", "--binary", "--ignore-submodules=all", "-1", commit)

    def diff_changes(self, changes: Sequence[FileChange]) -> list[ChangeDiff]:
        """Each file ``changes`` would write or delete, as a unified diff
        against its content now (:func:`change_diff`). Checked as applying
        them checks (:class:`InvalidAnswer` for one that no longer applies);
        a file larger than :data:`COMPARED_BYTES` is read only that far, and
        a replacement in one is shown as the replaced text alone."""
        root = self.path.resolve()
        sizes = {}
        for change in changes:
            target = resolve_inside(root, change.path)
            sizes[change.path] = target.stat().st_size if target.is_file() else 0
        if all(size <= COMPARED_BYTES for size in sizes.values()):
            out = []
            for target, data, rel in plan(root, changes):
                before = target.read_bytes() if target.is_file() else None
                out.append(change_diff(rel, before, len(before or b""), data, len(data or b"")))
            return out
        out = []
        for change in changes:  # one at a time, each against the file as it is
            target = resolve_inside(root, change.path)
            before = None
            if target.is_file():
                with open(target, "rb") as handle:
                    before = handle.read(COMPARED_BYTES)
            size = sizes[change.path]
            if isinstance(change, ReplaceInFile) and size > COMPARED_BYTES:
                diff = change_diff(change.path, change.old.encode(), len(change.old.encode()),
                                   change.new.encode(), len(change.new.encode()))
                out.append(ChangeDiff(change.path, diff.diff, diff.cut,
                                      f"the file is {size:,} bytes: the replaced text alone is shown"))
                continue
            data = change.content.encode() if isinstance(change, WriteFile) else None
            out.append(change_diff(change.path, before, size, data, len(data or b"")))
        return out

    def read_text_file(self, rel: str, limit: int) -> Optional[str]:
        """A workspace file's text for a prompt (cut at ``limit``), or None."""
        try:
            target = resolve_inside(self.path.resolve(), rel)
        except InvalidAnswer:
            return None
        if not target.is_file():
            return None
        # Only what is shown is read: a file of gigabytes (a sparse one costs nothing
        # to make) is never loaded whole.
        with open(target, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            data = handle.read(limit)
        text = data.decode("utf-8", errors="replace")
        if size > limit:
            text += f"\n[... cut: file is {size} bytes, showing the first {limit}]"
        return text

    # -- writing ------------------------------------------------------------

    def clear_stale_locks(self) -> list[str]:
        """Remove the lock files a killed git process leaves (``index.lock``,
        ``HEAD.lock``, a ref's ``.lock``); their paths relative to ``.git``.
        Only for a caller that knows no git process can be running in the
        repository (recovery, under the job's lock, its step's command stopped)."""
        git_dir = self.path / ".git"
        found = [git_dir / "index.lock", git_dir / "HEAD.lock", git_dir / "packed-refs.lock"]
        refs = git_dir / "refs"
        if refs.is_dir() and not refs.is_symlink():
            found += [p for p in refs.rglob("*.lock") if not p.is_symlink()]
        cleared = []
        for lock in found:
            if lock.is_file() and not lock.is_symlink():
                lock.unlink()
                cleared.append(str(lock.relative_to(git_dir)))
        return cleared

    def reset_to(self, sha: str) -> None:
        """Put the tree back at ``sha``: tracked files restored, untracked ones
        removed. Files the workspace's .gitignore ignores are left alone, so a
        virtualenv or build cache a person keeps there survives."""
        self.check_resettable(sha)
        self._git("reset", "-q", "--hard", sha)
        proc = self._run(["clean", "-q", "-fd"])
        if proc.returncode != 0:
            denied = _denied(proc)
            if denied:
                raise UnreadableFiles(self.path, denied, f"put the workspace back at {sha[:12]}")
            raise LogistError(f"git clean failed in {self.path}: {_git_detail(proc)}")

    def check_resettable(self, sha: str) -> None:
        """:class:`UnreadableFiles` when :meth:`reset_to` could not remove
        every untracked file (``git clean`` cannot read a folder): checked
        before anything is changed (``git clean -n``)."""
        denied = _denied(self._run(["clean", "-n", "-d"]))
        if denied:
            raise UnreadableFiles(self.path, denied, f"put the workspace back at {sha[:12]}")

    def fold_to(self, sha: str) -> None:
        """Move HEAD back to ``sha`` keeping the files as they are (``git reset
        --soft``): the commits after it become part of the next commit."""
        self._git("reset", "-q", "--soft", sha)

    def keep_ref(self, ref: str, sha: str) -> None:
        """Keep ``sha`` reachable under ``ref`` (so rewinding never loses a commit)."""
        self._git("update-ref", ref, sha)

    def commit_all(self, message: str) -> Optional[str]:
        """Commit every change in the workspace; None when nothing changed.
        :class:`UnreadableFiles` when git cannot read some of it: everything
        else is committed first (its ``commit``)."""
        added = self._run(["add", "-A", "--ignore-errors"])
        denied = _denied(added)
        if added.returncode != 0 and not denied:
            raise LogistError(f"git add failed in {self.path}: {_git_detail(added)}")
        proc = self._run(["commit", "-q", "--no-verify", "-m", message])
        commit = None
        if proc.returncode != 0:
            out = _decode(proc.stdout)
            if not ("nothing to commit" in out or "nothing added to commit" in out or "no changes added" in out):
                raise LogistError(f"git commit failed in {self.path}: {_git_detail(proc)}")
        else:
            commit = self.head()
        if denied:
            raise UnreadableFiles(self.path, denied, "commit all of the workspace", commit)
        return commit

    def commit_paths(self, message: str, paths: Sequence[str]) -> Optional[str]:
        """Commit the changes of ``paths`` (relative, each already tracked)
        and nothing else, in one git process (``git commit --only``, paths
        taken literally) instead of ``git add -A`` and ``git commit``; None
        when nothing changed. If git refuses (a path it does not track, an
        ignored one), nothing was committed and :meth:`commit_all` does it."""
        if not paths or len(paths) > self.MAX_COMMIT_PATHS:
            return self.commit_all(message)
        proc = self._run(["--literal-pathspecs", "commit", "-q", "--no-verify", "--only", "-m", message, "--", *paths])
        if proc.returncode != 0:
            if "nothing to commit" in _decode(proc.stdout):
                return None
            return self.commit_all(message)
        return self.head()

    #: Paths :meth:`commit_paths` names on git's command line; more are committed with ``git add -A``.
    MAX_COMMIT_PATHS = 100

    def push_branch(self, source: Path, branch: str, sha: str, force: bool = False) -> bool:
        """Create ``branch`` in ``source`` at ``sha`` without touching its HEAD,
        index or working tree (a push only writes objects and one ref).
        Returns whether an existing branch was replaced."""
        ref = f"refs/heads/{branch}"
        target = Workspace(source, guarded=False)
        try:
            self._git("check-ref-format", "--branch", branch)
        except LogistError:
            raise LogistError(f"'{branch}' is not a valid branch name") from None
        for line in target._git("worktree", "list", "--porcelain").splitlines():
            if line == f"branch {ref}":
                raise LogistError(
                    f"branch '{branch}' is checked out in {source}; Logist never changes a checked-out branch "
                    "(export to a new branch and merge it yourself)"
                )
        exists = bool(target._git("for-each-ref", ref))
        if exists and not force:
            raise LogistError(f"branch '{branch}' already exists in {source} (choose another name, or --force)")
        self._git("push", "-q", *(["--force"] if force else []), str(source), f"{sha}:{ref}")
        return exists

    # -- the model's file changes -------------------------------------------

    def files(self, limit: int) -> Optional[list[str]]:
        """The workspace's files (relative, ``/``-separated, sorted; none in
        a ``.git``, no symlinks), or None when there are more than ``limit``."""
        found: list[str] = []
        pending = [(self.path, "")]
        while pending:
            folder, prefix = pending.pop()
            try:
                entries = list(os.scandir(folder))
            except OSError:
                continue
            for entry in entries:
                if entry.name == ".git" or entry.is_symlink():
                    continue
                if entry.is_dir(follow_symlinks=False):
                    pending.append((entry.path, f"{prefix}{entry.name}/"))
                elif entry.is_file(follow_symlinks=False):
                    found.append(prefix + entry.name)
                    if len(found) > limit:
                        return None
        return sorted(found)

    def plan_changes(self, changes: Sequence[FileChange]) -> list[tuple[Path, Optional[bytes], str]]:
        """Check every change and compute the final bytes of each file.

        Returns (absolute path, new bytes or None to delete, relative path).
        Raises :class:`InvalidAnswer` before anything is written.
        """
        return plan(self.path.resolve(), changes)

    def apply_changes(self, changes: Sequence[FileChange],
                      planned: Optional[list[tuple[Path, Optional[bytes], str]]] = None) -> list[str]:
        """Apply checked changes (``planned``: what :meth:`plan_changes`
        returned for them, if the caller has it); returns the relative paths
        touched."""
        if planned is None:
            planned = self.plan_changes(changes)
        for target, data, _rel in planned:
            if data is None:
                target.unlink()
            else:  # a delete unlinks this name only: a hard-linked file elsewhere keeps its bytes
                target.parent.mkdir(parents=True, exist_ok=True)
                write_as_new_file(target, data)
        return [rel for _t, _d, rel in planned]
