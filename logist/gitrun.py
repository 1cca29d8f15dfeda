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
  ``.gitattributes`` has no definition, so git applies none.

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
import subprocess
from pathlib import Path
from typing import NamedTuple, Optional, Sequence

from .errors import LogistError

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
    return ["git", *(arg for s in settings for arg in ("-c", s)), *args]


def run_git(cwd: Path, args: Sequence[str], git_dir: Optional[Path] = None) -> Done:
    """One ``git`` process in ``cwd``, no standard input, output as bytes.
    With ``git_dir`` (a job's workspace repository) that repository is
    checked by :func:`guard_repository` first and named explicitly."""
    if not Path(cwd).is_dir():
        raise LogistError(f"cannot run git in {cwd}: no such folder")
    if git_dir is not None:
        guard_repository(git_dir)
    try:
        proc = subprocess.run(git_argv(args), cwd=str(cwd), env=git_env(git_dir), stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except FileNotFoundError:
        raise LogistError("cannot run git: no 'git' program on PATH (install git)") from None
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


#: Config texts already found to be as :func:`kept_config` wants (parsed once per process).
_GOOD_CONFIGS: set[bytes] = set()


def _lstat(path) -> Optional[os.stat_result]:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None


def guard_repository(git_dir: Path) -> list[str]:
    """Put a workspace's repository back to what Logist allows: ``.git`` a
    real folder, its config reduced to :data:`KEPT`, no hooks (only git's
    ``*.sample`` files), no ``commondir``. Returns what was put back (also
    logged); :class:`LogistError` when ``.git`` is not a folder. A handful of
    system calls when nothing changed."""
    import stat

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
        if data not in _GOOD_CONFIGS:
            wanted = kept_config(data.decode("utf-8", "replace")).encode()
            if found is None or not stat.S_ISREG(found.st_mode) or data != wanted:
                if found is not None and stat.S_ISDIR(found.st_mode):
                    _remove(Path(config))
                _replace(Path(config), wanted)
                done.append(".git/config (settings Logist does not allow were removed)")
            _GOOD_CONFIGS.add(wanted)
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
    except OSError as exc:
        raise LogistError(f"cannot check {git_dir}: {exc.strerror or exc}") from None
    if done:
        log.warning("%s: put back %s", git_dir, "; ".join(done))
    return done


def _replace(path: Path, data: bytes) -> None:
    """``path`` written whole under a name of its own (two Logist processes
    may put the same file back at once), then renamed over it."""
    import secrets

    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.logist.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        import shutil

        shutil.rmtree(path)
    else:
        path.unlink()
