"""Running ``git`` so that nothing a model can write makes it run a program.

A model's commands run in the job's workspace, so they can write
``.git/config`` (filters, ``core.fsmonitor``, pagers, ``include.path``...),
``.git/hooks/*`` and ``.gitattributes``; Logist's own git (``git status``,
``add``, ``commit``, ``reset``...) runs right after them. Every git process
Logist starts is therefore made here, the same way:

* its environment is built from an allowlist (:data:`ENV_NAMES`,
  :data:`ENV_PREFIXES`), never copied from Logist's own, so it never holds the
  API key or any other secret, and ``GIT_TRACE``, ``GIT_EXTERNAL_DIFF``,
  ``GIT_SSH_COMMAND`` or ``GIT_CONFIG_PARAMETERS`` set around Logist do not
  reach it;
* no system or global configuration (``GIT_CONFIG_NOSYSTEM``,
  ``GIT_CONFIG_GLOBAL=/dev/null``), and command-line settings
  (:data:`SAFE_CONFIG`), which win over any file, turn off hooks
  (``core.hooksPath=/dev/null``), ``core.fsmonitor``, pagers, editors,
  signing, automatic gc, submodule recursion and every transport but local
  paths (diffs also run with ``--no-ext-diff --no-textconv``);
* in a job's workspace the repository is named explicitly (``GIT_DIR``,
  ``GIT_WORK_TREE``), and before each git process :func:`guard_repository`
  puts the repository's own configuration back to the few plain settings
  Logist allows (:data:`KEPT`) and removes planted hooks. What is left in
  ``.git`` cannot name a program: a filter or textconv driver named by a
  ``.gitattributes`` has no definition, so git applies none. (Nothing
  else stops one in git 2.39: ``-c`` cannot name every driver,
  ``GIT_ATTR_NOSYSTEM`` and ``core.attributesFile`` touch only other
  attribute files, and ``add``, ``status`` and ``commit`` have no
  ``--no-filters``.)
* git never enters a **nested repository** (a folder with a ``.git`` of its
  own that the index records as a gitlink: ``git init sub``, a submodule).
  ``git add``, ``status`` and ``commit`` would otherwise run ``git status``
  inside it, which reads *its* config and runs its filters, outside any
  sandbox. The ``-c`` settings above reach that process (through
  ``GIT_CONFIG_PARAMETERS``) and stop its hooks and fsmonitor, but not a
  filter; ``diff.ignoreSubmodules`` is not read by ``git add``. So before
  each git process :func:`guard_repository` marks every such gitlink
  ``skip-worktree`` (:func:`seal_nested`), and git's worktree scan skips it
  whatever any config or ``.gitmodules`` says: the nested repository is
  committed as an opaque link to the commit it had when it was first added,
  its files are never read. A gitlink whose folder no longer holds a
  ``.git`` is unmarked, so its removal is committed. Finding gitlinks costs
  one read of ``.git/index`` (a gitlink's mode bytes absent: none), and a
  ``git ls-files`` only when one may be there.

Where commands run in the namespace with read-only mounts
(:mod:`logist.workspace.sandbox`), Logist's own git does not run inside it: it
needs ``.git`` writable, and it runs no program any repository names (the
points above), so nothing it starts can write the jobs directory or see
Logist's memory; git itself is trusted as Logist is.

The repository stays in the workspace (a person's ``git -C workspace log``
and a model's ``git diff`` keep working); the check costs a few system calls
per git process, where a git process costs milliseconds. What it cannot
stop: a process a command left running that rewrites ``.git/config`` between
the check and git's own read of it (the command runner ends a command's
whole process group; a sandbox ends the rest).
"""

from __future__ import annotations

import logging
import os
import re
import secrets
import shutil
import stat
import subprocess
from pathlib import Path
from typing import NamedTuple, Optional, Sequence

from .. import programs
from ..errors import LogistError

log = logging.getLogger(__name__)

COMMITTER = ("Logist", "logist@localhost")

#: Variables of Logist's environment that git gets (nothing else does).
ENV_NAMES = ("PATH", "HOME", "LANG", "TZ", "TMPDIR", "SYSTEMROOT", "USER", "LOGNAME")
ENV_PREFIXES = ("LC_", "GIT_AUTHOR_", "GIT_COMMITTER_")

#: ``-c`` settings of every git process: they win over every config file.
SAFE_CONFIG = (
    f"core.hooksPath={os.devnull}",
    "core.fsmonitor=false",
    "core.pager=cat",
    "core.editor=false",
    "core.sshCommand=false",
    "core.askPass=",
    "credential.helper=",
    "log.showSignature=false",
    "commit.gpgSign=false",
    "tag.gpgSign=false",
    "gc.auto=0",
    "maintenance.auto=false",
    "submodule.recurse=false",
    "protocol.allow=never",
    "protocol.file.allow=always",
)

#: The repository settings Logist keeps (``section.key``: allowed values); any
#: other line of ``.git/config`` is removed before Logist's next git process.
KEPT = {
    "core.repositoryformatversion": r"[01]",
    "core.filemode": r"true|false",
    "core.bare": r"false",
    "core.logallrefupdates": r"true|false",
    "core.ignorecase": r"true|false",
    "core.precomposeunicode": r"true|false",
    "core.symlinks": r"true|false",
    "extensions.objectformat": r"sha1|sha256",
    "extensions.refstorage": r"files|reftable",
}

_SECTION = re.compile(r"^\s*\[([A-Za-z][A-Za-z0-9-]*)\]\s*$")
_SETTING = re.compile(r"^\s*([A-Za-z][A-Za-z0-9-]*)\s*=\s*([A-Za-z0-9]+)\s*$")


class Done(NamedTuple):
    """A finished git process: its exit code and output as bytes."""

    returncode: int
    stdout: bytes
    stderr: bytes


def git_env(git_dir: Optional[Path] = None) -> dict:
    """The environment of a git process (see the module's docstring)."""
    env = {k: v for k, v in os.environ.items() if k in ENV_NAMES or k.startswith(ENV_PREFIXES)}
    env.update({
        # git's messages in English whatever the locale ("nothing to commit" is read).
        "LANGUAGE": "C", "LC_ALL": "C",
        "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_TERMINAL_PROMPT": "0", "GIT_PAGER": "cat", "PAGER": "cat",
    })
    env.setdefault("PATH", os.defpath)
    if git_dir is not None:
        env["GIT_DIR"] = str(git_dir)
        env["GIT_WORK_TREE"] = str(git_dir.parent)
    return env


def git_argv(args: Sequence[str]) -> list[str]:
    """``git`` with the safe settings, a fallback identity, then ``args``.
    GIT_AUTHOR_* / GIT_COMMITTER_* in the environment still win, as git documents."""
    settings = [*SAFE_CONFIG, f"user.name={COMMITTER[0]}", f"user.email={COMMITTER[1]}"]
    return [git_program(), *(arg for s in settings for arg in ("-c", s)), *args]


def git_program() -> str:
    """The absolute path of git in the system's own folders (:mod:`logist.programs`:
    never a ``git`` found through ``PATH``, which a command can write)."""
    found = programs.program("git")
    if found is None:
        raise LogistError(f"cannot run git: no git program in {programs.where_looked()} owned by root "
                          "(Logist does not take git from PATH, which a command can write; install git)")
    return found


def run_git(cwd: Path, args: Sequence[str], git_dir: Optional[Path] = None,
            good_configs: Optional[set[bytes]] = None) -> Done:
    """One ``git`` process in ``cwd``, no standard input, output as bytes.
    With ``git_dir`` (a job's workspace repository) that repository is
    checked by :func:`guard_repository` first and named explicitly
    (``good_configs``: see there)."""
    if not Path(cwd).is_dir():
        raise LogistError(f"cannot run git in {cwd}: no such folder")
    if git_dir is not None:
        guard_repository(git_dir, good_configs)
    return _spawn(cwd, args, git_dir)


def _spawn(cwd: Path, args: Sequence[str], git_dir: Optional[Path]) -> Done:
    """One git process, the repository already guarded."""
    try:
        proc = subprocess.run(git_argv(args), cwd=str(cwd), env=git_env(git_dir), stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except FileNotFoundError:
        raise LogistError(f"cannot run git: {git_program()} is gone") from None
    except OSError as exc:
        raise LogistError(f"cannot run git in {cwd}: {exc.strerror or exc}") from None
    return Done(proc.returncode, proc.stdout, proc.stderr)


def kept_config(text: str) -> str:
    """``.git/config`` with only the settings of :data:`KEPT`, in git's own layout."""
    section, kept = "", {}
    for line in text.splitlines():
        header = _SECTION.match(line)
        if header:
            section = header.group(1).lower()
            continue
        setting = _SETTING.match(line)
        if setting and section:
            name, value = f"{section}.{setting.group(1).lower()}", setting.group(2).lower()
            if name in KEPT and re.fullmatch(KEPT[name], value):
                kept[name] = value
    kept.setdefault("core.repositoryformatversion", "0")
    kept["core.bare"] = "false"
    out, current = [], None
    for name in sorted(kept, key=lambda n: (n.split(".")[0] != "core", list(KEPT).index(n))):
        part, key = name.split(".")
        if part != current:
            out.append(f"[{part}]")
            current = part
        out.append(f"\t{key} = {kept[name]}")
    return "\n".join(out) + "\n"


def settle_config(git_dir: Path) -> None:
    """Write a new repository's config as :func:`guard_repository` wants it
    (a clone's ``remote.origin`` goes: Logist never fetches)."""
    config = Path(git_dir) / "config"
    _replace(config, kept_config(config.read_text(encoding="utf-8", errors="replace")).encode())


def _lstat(path) -> Optional[os.stat_result]:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None


def guard_repository(git_dir: Path, good_configs: Optional[set[bytes]] = None) -> list[str]:
    """Put a workspace's repository back to what Logist allows: ``.git`` a
    real folder, its config reduced to :data:`KEPT`, no hooks (only git's
    ``*.sample`` files), no ``commondir``, no link among its reflogs
    (:func:`_unlink_reflogs`), no nested repository git would
    enter (:func:`seal_nested`). Returns what was put back (also logged);
    :class:`LogistError` when ``.git`` is not a folder. A handful of system
    calls and one read of the index when nothing changed. ``good_configs``:
    the config texts the caller (a :class:`logist.workspace.repository.Workspace`) has
    already found to be as :func:`kept_config` wants, so a text is parsed
    once per workspace object; the config found good is added to it."""
    done: list[str] = []
    git_dir = str(git_dir)
    try:
        found = _lstat(git_dir)
        if found is None or not stat.S_ISDIR(found.st_mode):
            raise LogistError(f"{git_dir} is missing or not a folder (a link or a file); "
                              "Logist runs git only in the workspace's own repository")
        config = os.path.join(git_dir, "config")
        found = _lstat(config)
        data = b""
        if found is not None and stat.S_ISREG(found.st_mode):
            with open(config, "rb") as handle:
                data = handle.read()
        if good_configs is None or data not in good_configs:
            wanted = kept_config(data.decode("utf-8", "replace")).encode()
            if found is None or not stat.S_ISREG(found.st_mode) or data != wanted:
                if found is not None and stat.S_ISDIR(found.st_mode):
                    _remove(Path(config))
                _replace(Path(config), wanted)
                done.append(".git/config (settings Logist does not allow were removed)")
            if good_configs is not None:
                good_configs.add(wanted)
        hooks = os.path.join(git_dir, "hooks")
        found = _lstat(hooks)
        if found is not None and not stat.S_ISDIR(found.st_mode):
            os.unlink(hooks)
        elif found is not None:
            with os.scandir(hooks) as entries:
                for entry in entries:
                    if not entry.name.endswith(".sample") or not entry.is_file(follow_symlinks=False):
                        _remove(Path(entry.path))
                        done.append(f".git/hooks/{entry.name} (removed)")
        for name in ("commondir", "config.worktree"):
            if _lstat(os.path.join(git_dir, name)) is not None:
                _remove(Path(git_dir, name))
                done.append(f".git/{name} (removed)")
        done += _unlink_reflogs(git_dir)
        done += seal_nested(Path(git_dir))
    except OSError as exc:
        raise LogistError(f"cannot check {git_dir}: {exc.strerror or exc}") from None
    if done:
        log.warning("%s: put back %s", git_dir, "; ".join(done))
    return done


def _unlink_reflogs(git_dir: str) -> list[str]:
    """Remove every link in ``.git/logs`` (``logs`` itself included): git
    appends to a reflog in place, through a link, so a command's
    ``logs/HEAD -> ~/.bashrc`` would have Logist's next commit write a line
    there. A reflog is a record, not the repository: losing a planted one
    loses nothing git needs."""
    logs = os.path.join(git_dir, "logs")
    found = _lstat(logs)
    if found is None:
        return []
    if not stat.S_ISDIR(found.st_mode):
        _remove(Path(logs))
        return [".git/logs (not a folder: removed)"]
    done = []
    for folder, names, files in os.walk(logs):  # links to folders are listed, never entered
        for name in [*names, *files]:
            path = os.path.join(folder, name)
            if os.path.islink(path):
                os.unlink(path)
                done.append(f".git/{os.path.relpath(path, git_dir)} (a link: removed)")
    return done


#: A gitlink's mode as the index stores it (32 bits, big-endian, in every index version).
_GITLINK_MODE = (0o160000).to_bytes(4, "big")


def _may_hold_gitlinks(git_dir: Path) -> bool:
    """Whether the index (or a shared index it was split into) may record a
    gitlink: False when no file holds a gitlink's mode bytes, which git
    writes for every gitlink. A rare false True costs a ``git ls-files``."""
    for name in os.listdir(git_dir):
        if name != "index" and not name.startswith("sharedindex."):
            continue
        path = os.path.join(git_dir, name)
        found = os.lstat(path)
        if not stat.S_ISREG(found.st_mode):
            raise LogistError(f"{path} is not a file (a link or a folder); Logist runs git only on its own index")
        with open(path, "rb") as handle:
            if _GITLINK_MODE in handle.read():
                return True
    return False


def _populated(work_tree: Path, rel: bytes) -> bool:
    """Whether git would take the gitlink at ``rel`` for a repository it can
    enter (anything named ``.git`` there; in doubt, yes)."""
    try:
        os.lstat(os.path.join(os.fsencode(work_tree), rel, b".git"))
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError:
        return True
    return True


def seal_nested(git_dir: Path) -> list[str]:
    """Mark every gitlink of the index whose folder holds a repository
    ``skip-worktree``, and unmark those whose folder no longer does, so
    that no git process Logist starts enters a nested repository (see the
    module's docstring). Returns what changed."""
    git_dir = Path(git_dir)
    if not _may_hold_gitlinks(git_dir):
        return []
    work_tree = git_dir.parent
    listed = _spawn(work_tree, ["ls-files", "--stage", "-t", "-z"], git_dir)
    if listed.returncode != 0:
        raise LogistError(f"cannot list the index of {git_dir}: git ls-files exit code {listed.returncode}")
    seal, unseal = [], []
    for record in listed.stdout.split(b"\0"):
        head, _, rel = record.partition(b"\t")
        fields = head.split(b" ")
        if len(fields) != 4 or fields[1] != b"160000" or fields[3] != b"0":
            continue
        populated, sealed = _populated(work_tree, rel), fields[0] == b"S"
        if populated and not sealed:
            seal.append(rel)
        elif sealed and not populated:
            unseal.append(rel)
    done = []
    for flag, paths, what in (("--skip-worktree", seal, "a nested repository: git will not look inside it"),
                              ("--no-skip-worktree", unseal, "no longer a repository")):
        if paths:
            proc = _spawn(work_tree, ["update-index", flag, "--", *map(os.fsdecode, paths)], git_dir)
            if proc.returncode != 0:
                raise LogistError(f"cannot mark the nested repositories of {git_dir}: "
                                  f"git update-index exit code {proc.returncode}")
            done += [f"{os.fsdecode(p)} ({what})" for p in paths]
    return done


def _replace(path: Path, data: bytes) -> None:
    """``path`` written whole under a name of its own (two Logist processes
    may put the same file back at once), then renamed over it."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.logist.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()
