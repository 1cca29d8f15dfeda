"""How a model's command is started, and stopped: out of sight of Logist.

Logist holds the API key; a command is code the model wrote. So a command:

* runs in its own **PID namespace** with ``/proc`` remounted, where the
  platform allows it (Linux with unprivileged user namespaces: ``unshare
  --user --map-current-user --pid --fork --kill-child --mount-proc``, probed
  once per process by :func:`namespace_prefix`). Inside it no Logist process
  exists: ``/proc/$PPID/environ`` and a walk of ``/proc/*/environ`` find
  only the command's own processes, and when the command's first process
  ends every process it left behind ends with it. The job's
  ``command_sandbox`` chooses: ``auto`` (the namespace when it works, else
  none), ``namespace`` (a command is refused where it does not work) or
  ``none``.
* sees Logist's files **read-only** in that namespace where mounts work
  (:func:`mount_prefix`): the workspace's ``.git`` and the jobs directory
  (every job's manifest, history, context and journal) are bind-mounted
  read-only, the workspace itself stays writable, and the command runs in a
  second, unprivileged user namespace, in which those mounts are locked: it
  cannot unmount them or make them writable again. So a command cannot
  plant a hook, rewrite a ref or the index, or edit what Logist injects
  into the next prompt. Logist's private directory (``logist serve``'s
  token: :mod:`logist.secrets.private`) is covered by an empty read-only
  file system there: a command cannot read a credential Logist keeps, nor
  decide for a person through ``logist serve`` with it. Where the namespace works but mounts do not, the
  command runs with the PID namespace alone (Logist's git then still
  resets what a command may have planted: :mod:`logist.workspace.git`).
  A job's check sees the workspace through a **throwaway view** where the
  system can make one (:func:`throwaway_view`: an overlay mount, its
  ``.git`` read-only on it as above): what it writes is seen by it and
  gone once it ends, so nothing has to be put back. The mounts are made by
  one ``mount -a`` of a table where that is safe, else one ``mount`` each
  (:data:`_MOUNTS`).
* gets an **allowlisted environment** (:func:`command_env`): :data:`PASSED`,
  ``LC_*`` and the variables the job names (``command_env``); never the key.
* without a PID namespace (``none``, ``auto``'s fallback) runs under a
  **reaper** (:data:`REAPER`, Linux): a child subreaper that every
  process the command orphans (``setsid``, a double fork) is handed to, and
  that kills and reaps them all when the command's first process ends, on
  a timeout (:func:`finish`) or when Logist dies. Logist itself never
  becomes a subreaper (its own children would be mixed with the command's).
* is started by a **launcher** (``/bin/sh``, given only that environment;
  where the mounts are made, the shell that makes them) whose last shell,
  the command's own, waits, before it reads the command, until Logist has
  recorded the command's process group in the step's journal
  (:data:`_GATE`, :func:`start`), so a command never runs unrecorded; with ``PR_SET_PDEATHSIG`` on Linux (util-linux's ``setpriv``
  sets it where it works: :func:`parent_death_head`) it is killed when
  Logist dies.
* Without a namespace, Logist hides what it can of itself
  (:func:`logist.secrets.process.hide_secrets_from_proc`: non-dumpable, the secrets
  blanked in ``/proc/self/environ``): the ``logist`` program as it starts
  (:mod:`logist.secrets.process`), the library before its first command. Processes
  other than Logist that were started with the key (the shell that exported
  it) stay readable: see the README's Safety section.

:func:`run_contained` is the whole of one run: the launcher, the start, the
wait under a timeout and the end of the group, its output in temporary files
read under a limit; a model's command (:mod:`logist.engine.commands`) and a
coding agent's run (:mod:`logist.agents.runner`) are both one call of it.

:func:`stop_group` ends a recorded process group (SIGKILL) and waits until
it is gone: the recovery of a step interrupted while its command ran calls
it before it resets the workspace, so the command cannot write into the
workspace afterwards.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import re
import select
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Callable, Iterator, Optional, Sequence

from .. import programs
from ..secrets import environment, private
from ..errors import LogistError
from ..secrets.process import _libc, hide_secrets_from_proc

#: Variables a command gets from Logist's environment (with every ``LC_*``).
PASSED = ("PATH", "HOME", "LANG", "LANGUAGE", "TERM", "TZ", "TMPDIR", "USER", "LOGNAME", "SHELL")
#: Never passed, even when a job names them.
NEVER_PASSED = ("LOGIST_API_KEY", "OPENAI_API_KEY")
SANDBOXES = ("auto", "namespace", "none")

#: The head of the command's own shell line (``/bin/sh -c``, the command's
#: text after it, on its first line): waits until Logist writes a line on
#: its standard input, a pipe (the command's group is then recorded), and
#: runs the command with no input; exits without running anything (125)
#: when Logist died first. The gate is the command's shell, not a shell
#: that starts it (an ``exec /bin/sh -c`` more, 1 ms of CPU a run, after
#: the gate opens): the command's text is read as ``sh -c`` reads it
#: (``$0``, no arguments, its lines numbered from 1), and one with a
#: syntax error on its first line runs nothing, gate included, as before.
_GATE = "IFS= read -r _ || exit 125; unset _; exec </dev/null; "
_UNSHARE = ("--user", "--pid", "--fork", "--kill-child", "--mount-proc")
#: Run as root of the outer user namespace (``$0`` = the workspace, ``$1``
#: its uid and ``$2`` its gid outside, ``$3`` the folder of a throwaway
#: view's writes or empty, ``$4`` a mount table or empty, ``$5`` its number
#: of lines and ``$6`` ``git`` when it has one for the workspace's
#: ``.git``, then the read-only directories, ``--``, the hidden ones,
#: ``--``, then the command's argv): makes the workspace a mount of its
#: own, or, given a folder of writes, mounts the throwaway view
#: (:func:`throwaway_view`) over the workspace; makes its ``.git`` (if any)
#: and the read-only directories read-only mounts, mounts an empty
#: read-only file system over each hidden directory (Logist's private
#: directory: :mod:`logist.secrets.private`, where the folder of writes
#: is), enters the workspace again through them (the working directory
#: inherited from Logist is below the mounts), and becomes the command's
#: shell (its gate first: :data:`_GATE`, the argv that follows) as the caller's uid in a new user
#: and mount namespace, where the mounts are locked. Any failure stops
#: here: the command does not run. All of it is done while Logist records
#: the command's group: once Logist writes its line, nothing is left to
#: start but what the command's shell runs. The view, and its ``.git`` read-only
#: on it, are mounted after the read-only directories (the workspace is
#: below the jobs directory, whose bind would cover them).
#:
#: Given a table (:func:`_mount_table`: the same mounts in the same order),
#: one ``mount -a`` makes them all, one process instead of one a mount, and
#: the command runs only if ``mount -v`` says every line was mounted:
#: ``mount -a`` skips a line whose target is mounted already, which would
#: leave it writable. A table is given only where no target is a mount
#: point (:func:`_mount_table`); where one became one since, the command
#: does not run. A ``.git`` the table has no line for (made since) sends
#: the mounts the way of one ``mount`` each.
#: ``{mount}`` and ``{unshare}`` are filled in with the programs' absolute
#: paths (:mod:`logist.programs`): the command's ``PATH`` is the user's, where
#: a planted ``mount`` would leave Logist's files writable.
_MOUNTS = (
    'set -e; ws=$0; uid=$1; gid=$2; writes=$3; table=$4; lines=$5; git=$6; shift 6; '
    'if [ -L "$ws/.git" ]; then echo "the workspace .git is a link, not a folder" >&2; exit 125; fi; '
    'if [ -n "$table" ] && {{ [ -n "$git" ] || [ ! -e "$ws/.git" ]; }}; then '
    'said=$(LC_ALL=C {mount} -a -v -T "$table" 2>&1) || {{ echo "$said" >&2; exit 125; }}; made=0; '
    'while :; do case $said in *": successfully mounted"*) said=${{said#*": successfully mounted"}}; '
    'made=$((made + 1));; *) break;; esac; done; '
    'if [ "$made" != "$lines" ]; then echo "the sandbox mounted $made of its $lines mounts" >&2; exit 125; fi; '
    'while [ "$1" != -- ]; do shift; done; shift; while [ "$1" != -- ]; do shift; done; shift; '
    'else '
    'if [ -z "$writes" ]; then {mount} --bind "$ws" "$ws"; '
    'if [ -e "$ws/.git" ]; then {mount} --bind -o ro "$ws/.git" "$ws/.git"; fi; fi; '
    'while [ "$1" != -- ]; do {mount} --rbind -o ro "$1" "$1"; shift; done; shift; '
    'if [ -n "$writes" ]; then {mount} -t overlay -o "lowerdir=$ws,upperdir=$writes/upper,workdir=$writes/work,volatile" '
    'logist-throwaway "$ws"; '
    'if [ -e "$ws/.git" ]; then {mount} --bind -o ro "$ws/.git" "$ws/.git"; fi; fi; '
    'while [ "$1" != -- ]; do {mount} -t tmpfs -o ro,mode=0555,size=4k logist-hidden "$1"; shift; done; shift; '
    'fi; '
    'cd "$ws"; exec {unshare} --user --mount --map-user="$uid" --map-group="$gid" "$@"'
)
#: The folder of Logist's private directory that holds the mount tables
#: (:func:`_mount_table`), hidden from a command with the rest of it: a
#: table a command could edit would decide what the next command may write.
MOUNT_TABLES = "mount-tables"
#: Past this many tables in that folder, those not used for :data:`_TABLE_IDLE`
#: seconds are removed as a new one is written. A table is read by ``mount``
#: milliseconds after it is looked up, and each look-up marks it used (its
#: mtime): one removed in between would fail its run (``mount`` cannot
#: parse a missing table; the command does not run), as runs of other jobs
#: at once did when every other table was removed.
_KEPT_TABLES = 64
_TABLE_IDLE = 60.0
#: What a path in a table is made of: printable ASCII but a space, ``#``,
#: a backslash, a quote or a colon (no escape needed, and none ends like
#: ``mount -v``'s report).
_PLAIN_PATH = re.compile(r"[!$-&(-9;-\[\]-~]+")
_PR_SET_PDEATHSIG = 1

#: Without a PID namespace, the command's first process runs under this
#: small Python program (``python -I -S -c``; ``$1`` is Logist's pid, the
#: rest the argv to run): it makes itself a child subreaper
#: (``PR_SET_CHILD_SUBREAPER``), so every process the command orphans, a
#: ``setsid`` or double-forked one included, becomes its child instead of
#: init's; when the command's first process ends, or on SIGTERM (a timeout,
#: recovery, or Logist dying: its parent-death signal), it kills every
#: process below it and reaps them until it has no child left, then exits
#: as the command did. Nothing the command started outlives it.
REAPER = r"""# logist: the reaper of a command
import ctypes, os, signal, sys, time
libc = ctypes.CDLL(None, use_errno=True)
if libc.prctl(36, 1, 0, 0, 0) != 0 or libc.prctl(1, signal.SIGTERM, 0, 0, 0) != 0:
    sys.exit(125)  # PR_SET_CHILD_SUBREAPER, PR_SET_PDEATHSIG
if os.getppid() != int(sys.argv[1]):
    sys.exit(125)  # Logist died before the signal was set: run nothing
class Stop(Exception):
    pass
def stop(*args):
    raise Stop
me = os.getpid()
signal.signal(signal.SIGTERM, stop)
first = os.fork()
if first == 0:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        os.execv(sys.argv[2], sys.argv[2:])
    finally:
        os._exit(127)
def below():
    parents = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open("/proc/" + name + "/stat", "rb") as f:
                    parents[int(name)] = int(f.read().rsplit(b")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    found, todo = [], [me]
    while todo:
        pid = todo.pop()
        kids = [c for c, p in parents.items() if p == pid]
        found += kids
        todo += kids
    return found
status = None
try:
    while status is None:
        pid, code = os.waitpid(-1, 0)
        if pid == first:
            status = code
except (Stop, ChildProcessError):
    pass
signal.signal(signal.SIGTERM, signal.SIG_IGN)
while True:
    for pid in below():
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    try:
        pid, code = os.waitpid(-1, 0)
    except InterruptedError:
        continue
    except ChildProcessError:
        break
    if pid == first and status is None:
        status = code
if status is None or os.WIFSIGNALED(status):
    number = signal.SIGKILL if status is None else os.WTERMSIG(status)
    signal.signal(number, signal.SIG_DFL)
    os.kill(me, number)
    time.sleep(1)
sys.exit(os.WEXITSTATUS(status))
"""


class SandboxUnavailable(LogistError):
    """``command_sandbox`` is ``namespace`` and this system cannot make one."""


def command_env(named: Sequence[str] = (), base: Optional[dict] = None) -> dict:
    """The environment a command runs with: :data:`PASSED`, ``LC_*`` and
    ``named``, from ``base`` (Logist's own by default)."""
    source = environment.full() if base is None else base
    env = {name: value for name, value in source.items()
           if (name in PASSED or name.startswith("LC_") or name in named) and name not in NEVER_PASSED}
    env.setdefault("TERM", "dumb")
    env["NO_COLOR"] = "1"
    # Python writes no bytecode into the workspace (it would be committed), and
    # never runs a stale one: a file the model changed within the second, at the
    # same size, would otherwise pass the cache's mtime-and-size check.
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


@functools.lru_cache(maxsize=1)
def namespace_prefix() -> Optional[tuple[str, ...]]:
    """The ``unshare`` command line that runs a program in a new user and PID
    namespace with its own ``/proc``; None where that does not work."""
    unshare = programs.program("unshare") if sys.platform.startswith("linux") else None
    if unshare is None:
        return None
    for mapping in ("--map-current-user", "--map-root-user"):
        prefix = (unshare, *_UNSHARE, mapping)
        try:
            probe = subprocess.run([*prefix, "/bin/sh", "-c", "test ! -e /proc/2"], stdin=subprocess.DEVNULL,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=command_env(), timeout=20)
        except (OSError, subprocess.SubprocessError):
            continue
        if probe.returncode == 0:
            return prefix
    return None


def hidden_directories() -> list[str]:
    """The directories a command must not see into: Logist's private
    directory (made here if it can be, so that a credential written into it
    while the command runs is hidden too)."""
    try:
        path = private.ensure()
    except LogistError:
        path = private.directory()
        if not path.is_dir() or path.is_symlink():
            return []  # it cannot be made: nothing can be kept in it either
    return [os.path.realpath(path)]


def _mount_table(workspace: str, git: bool, read_only: Sequence[str], hidden: Sequence[str],
                 writes: Optional[str]) -> Optional[str]:
    """The fstab that makes :data:`_MOUNTS`' mounts in one ``mount -a``, in
    their order (the workspace bound on itself or the throwaway view over
    it, its ``.git`` when ``git``, each of ``read_only``, an empty file
    system over each of ``hidden``), kept in Logist's private directory
    (``hidden``'s first), one file a table, named by what it holds. None
    (the mounts are made one process each) where there is no private
    directory, a path is not plain (:data:`_PLAIN_PATH`: a table would
    need escapes), or a target is a mount point already (``mount -a``
    would skip it)."""
    paths = [workspace, *read_only, *hidden, *([writes] if writes else [])]
    if not hidden or not all(_PLAIN_PATH.fullmatch(p) for p in paths):
        return None
    bind_git = [(workspace + "/.git", workspace + "/.git", "none", "bind,ro")] if git else []
    lines = [(folder, folder, "none", "rbind,ro") for folder in read_only]
    if writes is None:
        lines[:0] = [(workspace, workspace, "none", "bind"), *bind_git]
    else:
        lines += [("logist-throwaway", workspace, "overlay",
                   f"lowerdir={workspace},upperdir={writes}/upper,workdir={writes}/work,volatile"), *bind_git]
    lines += [("logist-hidden", folder, "tmpfs", "ro,mode=0555,size=4k") for folder in hidden]
    mounted = _mount_points()
    if mounted is None or any(target in mounted for _, target, _, _ in lines):
        return None
    table = "".join(f"{source} {target} {kind} {options} 0 0\n" for source, target, kind, options in lines).encode()
    folder = Path(hidden[0]) / MOUNT_TABLES
    path = folder / (hashlib.sha256(table).hexdigest()[:32] + ".fstab")
    try:
        if path.read_bytes() == table:
            os.utime(path)  # used: not removed as idle while its run starts
            return str(path)
    except OSError:
        pass
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        others = os.listdir(folder)
        if len(others) >= _KEPT_TABLES:
            idle = time.time() - _TABLE_IDLE
            for name in others:
                with contextlib.suppress(OSError):
                    if os.stat(folder / name).st_mtime < idle:
                        os.unlink(folder / name)
        # Not fsynced: a table a power loss left half written runs no command (mount -v says so).
        fd, written = tempfile.mkstemp(dir=folder, prefix=".", suffix=".tmp")
        with os.fdopen(fd, "wb") as handle:
            handle.write(table)
        os.replace(written, path)
    except OSError:
        return None
    return str(path)


def _mount_points() -> Optional[set[str]]:
    """Where something is mounted in this process's namespace (from
    ``/proc/self/mountinfo``: a directory bound on itself is a mount point
    that ``os.path.ismount`` does not see); None where it cannot be read."""
    try:
        with open("/proc/self/mountinfo", "rb") as handle:
            return {os.fsdecode(line.split(b" ", 5)[4]) for line in handle}
    except (OSError, IndexError):
        return None


def _mounting(workspace: Path, read_only: Sequence[Path], writes: Optional[Path] = None) -> tuple[str, ...]:
    """The argv head that runs a program with :data:`_MOUNTS` (see
    :func:`mount_prefix`); with ``writes``, over the throwaway view whose
    writes that folder takes (:func:`throwaway_view`)."""
    unshare, mount = programs.program("unshare"), programs.program("mount")
    script = _MOUNTS.format(mount=shlex.quote(mount or "mount"), unshare=shlex.quote(unshare or "unshare"))
    where = os.path.realpath(workspace)
    git = os.path.isdir(os.path.join(where, ".git")) and not os.path.islink(os.path.join(where, ".git"))
    folders = [os.path.realpath(d) for d in read_only]
    hidden = hidden_directories()
    table = _mount_table(where, git, folders, hidden, None if writes is None else str(writes))
    lines = 1 + git + len(folders) + len(hidden)
    return (unshare, *_UNSHARE, "--map-root-user", "/bin/sh", "-c", script, where, str(os.getuid()),
            str(os.getgid()), "" if writes is None else str(writes), table or "", str(lines), "git" if git else "",
            *folders, "--", *hidden, "--")


@functools.lru_cache(maxsize=1)
def mounts_work() -> bool:
    """Whether :func:`mount_prefix` works here: probed once per process on a
    scratch job (a write into the workspace succeeds, one into its ``.git``
    or the read-only directory fails and cannot be undone)."""
    if namespace_prefix() is None or programs.program("mount") is None:
        return False
    with tempfile.TemporaryDirectory() as scratch:
        jobs = Path(os.path.realpath(scratch)) / "jobs"
        workspace = jobs / "job" / "workspace"
        (workspace / ".git").mkdir(parents=True)
        mount, umount = (shlex.quote(programs.program(name) or name) for name in ("mount", "umount"))
        probe = ("touch made && ! touch .git/x 2>/dev/null && ! touch ../x 2>/dev/null "
                 f"&& ! {mount} -o remount,bind,rw .git 2>/dev/null && ! {umount} .git 2>/dev/null "
                 "&& test ! -e /proc/2 && test \"$(id -u)\" = " + str(os.getuid()))
        try:
            result = subprocess.run([*_mounting(workspace, [jobs]), "/bin/sh", "-c", probe], cwd=workspace,
                                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                    env=command_env(), timeout=20)
        except (OSError, subprocess.SubprocessError):
            return False
        return result.returncode == 0 and (workspace / "made").exists() and not (workspace / ".git" / "x").exists()


def mount_prefix(workspace: Path, read_only: Sequence[Path],
                 writes: Optional[Path] = None) -> Optional[tuple[str, ...]]:
    """The argv head that runs a program in a PID namespace (as
    :func:`namespace_prefix`) where ``workspace`` is writable but its ``.git``
    and the directories ``read_only`` are read-only, for good; with
    ``writes`` (from :func:`throwaway_view`), the workspace is a throwaway
    view instead (its ``.git`` read-only all the same). None where this
    system cannot do it."""
    return _mounting(workspace, read_only, writes) if mounts_work() else None


#: Where :func:`throwaway_view` keeps a run's writes: a folder of Logist's
#: private directory, hidden from the command with the rest of it.
THROWAWAY_WRITES = "throwaway-writes"
#: Bytes an overlay's options cannot hold as they are (a separator of
#: their list or of its lower layers).
_NOT_IN_OPTIONS = frozenset(',:\\"\'\n')


def _writes_folder(workspace: Path) -> Optional[Path]:
    """The folder a throwaway view of ``workspace`` keeps its writes in,
    one a workspace (a job's runs hold its lock: one at a time); None where
    there is no private directory or a path cannot be named in the
    overlay's options."""
    hidden = hidden_directories()
    if not hidden:
        return None
    where = os.path.realpath(workspace)
    name = hashlib.sha256(os.fsencode(where)).hexdigest()[:24]
    folder = Path(hidden[0]) / THROWAWAY_WRITES / name
    if _NOT_IN_OPTIONS & set(where + str(folder)):
        return None
    return folder


def _remove(folder: Path) -> None:
    """Remove ``folder`` and all in it (the overlay leaves its work folder
    with no permissions: each folder's are given back first)."""
    if not os.path.lexists(folder):
        return
    folders = [str(folder)]
    while folders:
        at = folders.pop()
        with contextlib.suppress(OSError):
            if not os.path.islink(at):
                os.chmod(at, 0o700)
                with os.scandir(at) as entries:
                    folders += [e.path for e in entries if e.is_dir(follow_symlinks=False)]
    shutil.rmtree(folder, ignore_errors=True)


def _made_anew(folder: Path) -> None:
    """``folder`` emptied for a run's writes: removed, then made again with
    its overlay's ``upper`` and ``work`` folders (raises OSError)."""
    _remove(folder)
    folder.parent.mkdir(mode=0o700, exist_ok=True)
    for made in (folder, folder / "upper", folder / "work"):
        made.mkdir(mode=0o700)


def _unwritten(folder: Path) -> bool:
    """Whether ``folder`` is ready for a run's writes: its ``upper`` and
    ``work`` folders there, both empty. A run killed before its end leaves
    the overlay's own folder in ``work``, marked volatile, which the next
    mount would refuse (the check would fail without running): such a
    folder is made anew."""
    try:
        for part in ("upper", "work"):
            with os.scandir(folder / part) as entries:
                if next(entries, None) is not None:
                    return False
        return not os.path.islink(folder)
    except OSError:
        return False


@contextlib.contextmanager
def throwaway_view(workspace: Path) -> Iterator[Optional[Path]]:
    """A folder for the writes of a run that sees ``workspace`` through a
    copy-on-write view (an overlay mount in its namespace: it reads the
    workspace, what it writes goes to this folder's ``upper``); None where
    the view cannot be made here (:func:`throwaway_works`): the run then
    writes the workspace itself. The overlay is ``volatile``: nothing it
    writes is ever synced, which a throwaway needs no more than it needs a
    sync of the whole file system its folder is on at each unmount. What a
    run wrote is removed when it is over (a folder a run Logist did not live to end left written, before
    the next); an unwritten folder is kept for the next run (most checks
    write nothing: its three folders are not made and removed each time)."""
    folder = _writes_folder(workspace) if throwaway_works() else None
    if folder is None:
        yield None
        return
    if not _unwritten(folder):
        try:
            _made_anew(folder)
        except OSError:
            yield None
            return
    try:
        yield folder
    finally:
        # The overlay is volatile (it never syncs its writes: its unmount would otherwise sync the
        # whole file system they are on, as the run ends); it marks its work folder so, which a
        # mount refuses: the marker goes with the run, moved aside in one rename (_retire).
        _retire(folder)
        if not _unwritten(folder):
            _remove(folder)


#: The folder of a throwaway view's writes folder that a run's volatile
#: marker (the overlay's own folder in ``work``) is moved to as the run
#: ends (:func:`_retire`), and removed from while the next run's command
#: runs (:func:`_clear_spent`): the three folders' removal, a millisecond
#: and more of waits on the file system's journal, is off the run's path.
_SPENT = "spent"


def _retire(folder: Path) -> None:
    """Move the volatile marker of the run that used ``folder`` out of its
    ``work`` (the next mount would refuse it) to :data:`_SPENT`; removed in
    place where that cannot be done (one is there still)."""
    marker = folder / "work" / "work"
    try:
        os.rename(marker, folder / _SPENT)
    except FileNotFoundError:
        pass
    except OSError:
        _remove(marker)


def _clear_spent(writes: Optional[Path]) -> None:
    """Remove what the last run on ``writes`` left in :data:`_SPENT` (its
    marker): called once a run's command is let go on, while Logist waits
    for it. The mount of that run does not look at it."""
    if writes is not None:
        _remove(writes / _SPENT)


@functools.lru_cache(maxsize=1)
def throwaway_works() -> bool:
    """Whether :func:`throwaway_view` works here (an overlay mount in a user
    namespace: Linux 5.11 and later; its writes kept in Logist's private
    directory, whose file system must take them): probed once per process
    on a scratch job. What the run writes, removes, or writes in ``.git``
    is seen by it and gone once it ends; its ``.git`` and the jobs directory
    stay read-only."""
    if not mounts_work():
        return False
    with tempfile.TemporaryDirectory() as scratch:
        jobs = Path(os.path.realpath(scratch)) / "jobs"
        workspace = jobs / "job" / "workspace"
        (workspace / ".git").mkdir(parents=True)
        (workspace / "kept").write_text("kept\n")
        folder = _writes_folder(workspace)
        if folder is None:
            return False
        probe = ("echo x >> kept && grep -q x kept && rm kept && touch made && test -e made "
                 "&& ! touch .git/x 2>/dev/null && ! touch ../x 2>/dev/null && test ! -e /proc/2 "
                 "&& test \"$(id -u)\" = " + str(os.getuid()))
        try:
            _made_anew(folder)
            result = subprocess.run([*_mounting(workspace, [jobs], folder), "/bin/sh", "-c", probe], cwd=workspace,
                                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                    env=command_env(), timeout=20)
        except (OSError, subprocess.SubprocessError):
            return False
        finally:
            _remove(folder)
        return (result.returncode == 0 and (workspace / "kept").read_text() == "kept\n"
                and not (workspace / "made").exists() and not (workspace / ".git" / "x").exists())


def launcher(command: str, sandbox: str, workspace: Optional[Path] = None,
             read_only: Sequence[Path] = (), writes: Optional[Path] = None) -> list[str]:
    """The argv that runs ``command`` under ``sandbox`` (see the module's
    doc); with ``workspace``, its ``.git`` and ``read_only`` are read-only to
    the command where the system can do it; with ``writes`` too, the
    workspace is a throwaway view (:func:`throwaway_view`)."""
    if sandbox not in SANDBOXES:
        raise LogistError(f"command_sandbox '{sandbox}' is not one of {', '.join(SANDBOXES)}")
    prefix: tuple[str, ...] = ()
    if sandbox != "none":
        mounted = workspace is not None and mount_prefix(workspace, read_only, writes)
        # Mounted, the command's shell (the gate first) is started in the namespace the command
        # runs in: nothing is left to start when it is let go on but what the command runs.
        prefix = mounted or namespace_prefix() or ()
        if not prefix and sandbox == "namespace":
            raise SandboxUnavailable("command_sandbox is 'namespace' but this system cannot start a PID namespace "
                              "(unshare --user --pid); set it to auto or none to run commands without one")
    if not prefix and reaper_works():
        prefix = (*_REAPER_HEAD, str(os.getpid()))
    return [*prefix, "/bin/sh", "-c", _GATE + command]


#: How :data:`REAPER` is started (its pid and the argv to run follow).
_REAPER_HEAD = (sys.executable, "-I", "-S", "-c", REAPER)


def _is_reaper(pid: int) -> bool:
    """Whether process ``pid`` runs :data:`REAPER` (its command line says so)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return REAPER.split("\n", 1)[0].encode() in handle.read()
    except OSError:
        return False


@functools.lru_cache(maxsize=1)
def reaper_works() -> bool:
    """Whether this system has child subreapers (Linux 3.4 and later, with
    ``/proc``): probed once per process with :data:`REAPER` itself."""
    if not sys.platform.startswith("linux") or not os.path.isdir("/proc/self"):
        return False
    try:
        probe = subprocess.run([*_REAPER_HEAD, str(os.getpid()), "/bin/sh", "-c", "exit 7"],
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               env=command_env(), timeout=20)
    except (OSError, subprocess.SubprocessError):
        return False
    return probe.returncode == 7


def _die_with_parent() -> None:  # runs in the child between fork and exec
    libc = _libc()
    if libc is not None and sys.platform.startswith("linux"):
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


@functools.lru_cache(maxsize=1)
def parent_death_head() -> tuple[str, ...]:
    """The argv head that makes a command's first process die with Logist:
    util-linux's ``setpriv --pdeathsig KILL`` (the signal survives its
    exec), where it works (probed once per process); else none, and
    :func:`start` sets the signal between fork and exec itself. A Python
    function run there (``preexec_fn``) makes ``subprocess`` fork the whole
    interpreter instead of ``vfork``: milliseconds a command, more than the
    small program's start."""
    setpriv = programs.program("setpriv") if sys.platform.startswith("linux") else None
    if setpriv is None:
        return ()
    head = (setpriv, "--pdeathsig", "KILL")
    try:
        probe = subprocess.run([*head, "/bin/sh", "-c", "exit 7"], stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=command_env(), timeout=20)
    except (OSError, subprocess.SubprocessError):
        return ()
    return head if probe.returncode == 7 else ()


def start_time(pid: int) -> Optional[str]:
    """When process ``pid`` started, as the kernel counts it (Linux), so a
    recorded group is not mistaken for a later one with the same id."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return None


def stopped(pid: int) -> bool:
    """Whether ``pid`` is a process stopped by a signal (SIGSTOP, SIGTSTP)
    or a debugger: alive, but running nothing until it is let go on. False
    where ``/proc`` cannot tell."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] in (b"T", b"t")
    except (OSError, IndexError):
        return False


def running(pid: int, started: Optional[str] = None) -> bool:
    """Whether ``pid`` is a running process, and the one that started at
    ``started`` (:func:`start_time`) when that is given: a zombie (it ended,
    its parent has not reaped it) is not running, nor is a later process that
    reuses the id. Where ``/proc`` is missing, the id's existence is all
    there is to go on."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
    except FileNotFoundError:
        return False
    except OSError:
        fields = None
    if fields is None or not os.path.isdir("/proc/self"):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:  # someone else's process: it exists
            return True
        return True
    if fields[0] in (b"Z", b"X"):
        return False
    return started is None or fields[19].decode() == started


def start(argv: list[str], cwd: str, env: dict, stdout: IO, stderr: IO,
          recorded: Callable[[int, Optional[str]], None]) -> subprocess.Popen:
    """Start ``argv`` (from :func:`launcher`) in a new process group, killed
    when Logist dies (:func:`parent_death_head`), call ``recorded(pgid,
    start_time)``, then let the command run."""
    head = parent_death_head()
    read_end, write_end = os.pipe()
    try:
        proc = subprocess.Popen([*head, *argv], cwd=cwd, env=env, stdin=read_end, stdout=stdout, stderr=stderr,
                                start_new_session=True,
                                preexec_fn=_die_with_parent if sys.platform.startswith("linux") and not head else None)
    except BaseException:
        os.close(write_end)
        raise
    finally:
        os.close(read_end)
    try:
        try:
            recorded(proc.pid, start_time(proc.pid))
        except BaseException:
            os.close(write_end)  # the launcher reads end of file and exits without running the command
            write_end = -1
            proc.wait()
            raise
        with contextlib.suppress(BrokenPipeError):  # the launcher ended without reading it: nothing ran
            os.write(write_end, b"go\n")
    finally:
        if write_end >= 0:
            os.close(write_end)
    return proc


@dataclass
class Contained:
    """How one :func:`run_contained` ended, and what it printed, as its reader read it."""

    #: None when it was stopped at its timeout.
    exit_code: Optional[int]
    timed_out: bool
    #: Seconds from its start until its group was ended.
    duration: float
    stdout: str
    stderr: str
    #: Whether it ran on a throwaway view of the workspace (:func:`throwaway_view`):
    #: what it wrote there is gone.
    thrown_away: bool = False


def read_head_and_tail(handle: IO, limit: int) -> str:
    """Head and tail of a (possibly huge) output file, ``limit`` bytes each
    side, the bytes between them counted in a marker: what a model is shown
    of a command's output is cut from this, never more read into memory."""
    size = handle.seek(0, os.SEEK_END)
    handle.seek(0)
    if size <= 4 * limit:
        return handle.read().decode("utf-8", errors="replace")
    head = handle.read(2 * limit)
    handle.seek(size - 2 * limit)
    tail = handle.read()
    marker = f"\n[... {size - 4 * limit} bytes of output not read ...]\n".encode()
    return (head + marker + tail).decode("utf-8", errors="replace")


def read_end(handle: IO, limit: int) -> str:
    """The last ``limit`` bytes of an output file, as text (where an agent's
    final message is)."""
    size = handle.seek(0, os.SEEK_END)
    handle.seek(max(0, size - limit))
    return handle.read().decode("utf-8", errors="replace")


def run_contained(command: str, cwd: Path, env: dict, timeout: float, read: Callable[[IO], str], *,
                  sandbox: str = "auto", workspace: Optional[Path] = None, read_only: Sequence[Path] = (),
                  recorded: Optional[Callable[[int, Optional[str]], None]] = None,
                  throwaway: bool = False) -> Contained:
    """Run the shell line ``command`` in ``cwd`` under ``sandbox``
    (:func:`launcher`; ``workspace``'s ``.git`` and ``read_only`` read-only
    to it where the system can do it) with exactly ``env``, no standard
    input, in a process group of its own recorded through ``recorded(pgid,
    start_time)`` before it runs (:func:`start`); wait at most ``timeout``
    seconds; then end whatever is left of its group (:func:`finish`), on the
    timeout, on its end and on Ctrl-C alike (``KeyboardInterrupt`` goes on
    up once it is done). Its standard output and error go to temporary
    files, never into memory, and each is read by ``read`` (the limit of
    what is kept: :func:`read_head_and_tail`, :func:`read_end`).
    ``throwaway``: the command sees ``workspace`` through a throwaway view
    (:func:`throwaway_view`) where the system can make one (``thrown_away``
    says whether it did)."""
    use_view = throwaway and workspace is not None and sandbox != "none"
    with (throwaway_view(workspace) if use_view else contextlib.nullcontext()) as writes:
        return _run_contained(command, cwd, env, timeout, read, sandbox, workspace, read_only, recorded, writes)


def _run_contained(command: str, cwd: Path, env: dict, timeout: float, read: Callable[[IO], str], sandbox: str,
                   workspace: Optional[Path], read_only: Sequence[Path],
                   recorded: Optional[Callable[[int, Optional[str]], None]], writes: Optional[Path]) -> Contained:
    argv = launcher(command, sandbox, workspace, read_only, writes)
    hide_secrets_from_proc()
    started = time.monotonic()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = start(argv, str(cwd), env, out, err, recorded or (lambda pgid, start_time: None))
        timed_out = False
        try:
            _clear_spent(writes)  # while the command runs: inside the try, so Ctrl-C here still ends it
            timed_out = not wait_for(proc, timeout)
        finally:
            # What the command left running (or all of it, on a timeout) ends with it.
            finish(proc)
        duration = time.monotonic() - started
        return Contained(exit_code=None if timed_out else proc.returncode, timed_out=timed_out, duration=duration,
                         stdout=read(out), stderr=read(err), thrown_away=writes is not None)


def _members(pgid: int) -> list[int]:
    """Live (not zombie) processes of group ``pgid`` (Linux); None elsewhere."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as handle:
                    fields = handle.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != b"Z":
                found.append(int(name))
    return found


def group_alive(pgid: int) -> bool:
    if os.path.isdir("/proc/self"):
        return bool(_members(pgid))
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def wait_for(proc: subprocess.Popen, timeout: float) -> bool:
    """Wait until ``proc`` ends, ``timeout`` seconds at most: whether it
    ended (then reaped). Where the kernel gives a process's file descriptor
    (Linux's pidfd), the wait is on it and ends the moment the process does;
    ``Popen.wait(timeout=...)`` instead polls, sleeping up to 50 ms between
    looks, which a short command pays in full."""
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        try:
            proc.wait(timeout=timeout)
            return True
        except subprocess.TimeoutExpired:
            return False
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        deadline = time.monotonic() + timeout
        while not poller.poll(max(0.0, deadline - time.monotonic()) * 1000):
            if time.monotonic() >= deadline:
                return proc.poll() is not None
    finally:
        os.close(fd)
    proc.wait()
    return True


def finish(proc: subprocess.Popen, wait: float = 10.0) -> None:
    """End what is left of a command :func:`start` started, once it ended
    or timed out: the reaper, if it runs under one, is asked to end
    (SIGTERM: it kills and reaps everything below it), then the command's
    whole process group is killed (in a namespace, its end ends the rest)."""
    launched = proc.args[len(parent_death_head()):]  # what start() was given
    if proc.poll() is None and tuple(launched[:len(_REAPER_HEAD)]) == _REAPER_HEAD:
        try:
            os.kill(proc.pid, signal.SIGTERM)
            wait_for(proc, wait)
        except (ProcessLookupError, PermissionError):
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def stop_group(pgid: int, started: Optional[str] = None, wait: float = 10.0) -> bool:
    """End process group ``pgid`` (a reaper leading it asked first, as
    :func:`finish` does, then SIGKILL) and wait until none of it is left; False when there
    was nothing to stop (or the id now names another group: its leader
    started at another time than ``started``). Where the kernel tells when
    a process started (Linux), a group with no ``started`` is never killed:
    Logist records one for every command it starts, so a journal without it
    was written by hand, and its group could be anyone's."""
    if pgid <= 1 or pgid == os.getpgid(0):
        return False
    if started is None and os.path.isdir("/proc/self"):
        return False
    if started is not None:
        now = start_time(pgid)
        if now is not None and now != started:
            return False
    asked = False
    if _is_reaper(pgid):
        try:
            os.kill(pgid, signal.SIGTERM)
            asked = True  # the reaper ends its group: what is left of it below is killed too
            deadline = time.monotonic() + wait
            while pgid in _members(pgid) and time.monotonic() < deadline:
                time.sleep(0.02)
        except (ProcessLookupError, PermissionError):
            pass
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return asked  # gone: stopped by its reaper, or nothing was there
    deadline = time.monotonic() + wait
    while group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.02)
    return True
