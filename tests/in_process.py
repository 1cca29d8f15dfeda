"""The real ``logist`` program run inside the test's own process.

:func:`run` calls :func:`logist.__main__.main`, the function the ``logist``
program and ``python -m logist`` call (its one-line errors and exit codes
included), the way a fresh process would meet it:

* standard input, output and error are click's ``CliRunner`` isolation
  (in memory, not terminals, as the pipes of a child are not); the help
  width is the program's again (the isolation forces 80 columns; the
  program takes ``COLUMNS``), and the text is decoded as
  ``subprocess.run(text=True)`` decodes a child's (``\\r\\n`` and ``\\r``
  become ``\\n``);
* ``env`` is put into ``os.environ`` for the run (the child got
  ``os.environ`` updated with it) and taken out after; ``sys.argv`` is
  ``python -m logist``'s;
* warnings are filtered and printed on stderr as in a new interpreter
  (not recorded by pytest);
* nothing of Logist's is reset between runs: Logist keeps no per-process
  cache of job or endpoint data (a job's store object and a command's
  endpoints live as long as what owns them); a module-level value that is
  a fact of the machine or of the package (:data:`SHARED`) is kept, and
  any other that a run changes fails the test;
* a ``SystemExit`` is the exit status (``None`` 0, a number modulo 256,
  anything else printed and 1); any other exception (``LOGIST_DEBUG=1``
  lets them through) is a traceback on stderr and exit 1, as the
  interpreter would print it;
* ``timeout`` is kept with ``SIGALRM``: a run past it is interrupted and
  ``subprocess.TimeoutExpired`` raised, as ``subprocess.run`` does.

What the program may change of its process on purpose is put back after
each run: as it starts, the program takes the secrets out of
``os.environ`` (put back after the run) and, on Linux, makes itself
non-dumpable and blanks them in the environment block
``/proc/self/environ`` shows (:mod:`logist.secrets.process`).
Anything else a run leaves changed fails the test, after it is put back
where it can be: the environment, the working directory, the umask, a
signal handler, the ``logist`` loggers, a thread it started or a child
process still running (after :data:`GRACE`), a module-level value of
``logist`` that is in neither list.

A run cannot be killed, so ``LOGIST_FAILPOINT`` (which kills the process
at a point) is refused here: such tests use ``conftest.logist_process``.
"""

from __future__ import annotations

import ctypes
import functools
import glob
import importlib
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
import warnings
from contextlib import contextmanager
from typing import Optional

#: Module-level values that are the same in every process, so runs share
#: them, and why.
SHARED = {
    ("logist.workspace.sandbox", "namespace_prefix"): "what this system can do (unshare), probed once; tests that "
                                              "change PATH to take it away run in a real process",
    ("logist.workspace.sandbox", "mounts_work"): "what this system can do (mounts in a user namespace), probed once",
    ("logist.workspace.sandbox", "reaper_works"): "what this system can do (child subreapers), probed once",
    ("logist.workspace.sandbox", "parent_death_head"): "what this system can do (setpriv --pdeathsig), probed once",
    ("logist.workspace.sandbox", "throwaway_works"): "what this system can do (an overlay in a user namespace), "
                                                 "probed once",
    ("logist.programs", "program"): "where this system keeps git, unshare, mount and setpriv (its root-owned "
                                    "folders), looked up once",
    ("logist.resources", "data_dir"): "where this installation keeps its bundled data, looked up once",
    ("logist.secrets.process", "_libc"): "the C library",
    ("logist.workspace.sandbox", "_libc"): "the C library (logist.secrets.process's)",
    ("logist.protocol.answer", "response_schema"): "built from constants",
    ("logist.protocol.answer", "_response_validator"): "built from constants",
    ("logist.protocol.prompt_text", "protocol_text"): "built from constants",
    ("logist.store.config", "_SHIPPED"): "the prices.json Logist ships",
    ("logist.store.config", "_WINDOWS"): "the context_windows.json Logist ships",
    ("logist.protocol.decoding", "_fields"): "built from constants",
    ("logist.store.roles", "_builtin_loaded"): "the roles this installation ships, read once",
    ("logist.store.atomic", "_UMASK"): "the process's umask, which every run leaves as it was (checked)",
    ("logist.model.tls", "ssl_context"): "this system's CA certificates (as SSL_CERT_FILE and SSL_CERT_DIR say), "
                                         "loaded once",
    ("logist.secrets.redact", "_CACHE"): "the secrets of one environment, kept with the whole environment they came from",
}

#: How long threads and child processes a run started get to end after it.
GRACE = 5.0


class InProcessError(Exception):
    """The test asked for what a run in this process cannot be."""


def run(args: tuple, env: Optional[dict] = None, input: Optional[str] = None,
        timeout: Optional[float] = 60) -> subprocess.CompletedProcess:
    """``logist ARGS`` in this process; see the module's doc."""
    from click import formatting
    from click.testing import CliRunner

    from logist.__main__ import __file__ as main_file
    from logist.__main__ import main

    if "LOGIST_FAILPOINT" in {**os.environ, **(env or {})}:
        raise InProcessError("LOGIST_FAILPOINT kills the process it is set in: use conftest.logist_process")
    if threading.current_thread() is not threading.main_thread():
        raise InProcessError("a run in this process swaps sys.stdout and os.environ: only the main thread can "
                             "(use conftest.logist_process)")
    argv = [str(a) for a in args]
    limit = _Limit(timeout)
    code = 0
    before = _State()
    try:
        with CliRunner().isolation(input=input, env=env, color=False) as (out, err, _):
            formatting.FORCED_WIDTH = None  # the isolation puts its own back after
            saved_argv, sys.argv = sys.argv, [main_file, *argv]
            try:
                with _as_in_a_new_interpreter(), limit:
                    try:
                        main(argv)
                    except SystemExit as exc:
                        code = _status(exc.code)
                    except _TimedOut:
                        raise
                    except BaseException:  # noqa: BLE001 - what the interpreter would print, then exit 1
                        traceback.print_exc(file=sys.stderr)
                        code = 1
            except _TimedOut:
                pass
            finally:
                sys.argv = saved_argv
            sys.stdout.flush()
            sys.stderr.flush()
            stdout, stderr = _text(out.getvalue()), _text(err.getvalue())
    finally:
        problems = before.restore()
    if limit.interrupted:
        raise KeyboardInterrupt
    command = ["logist", *argv]
    if limit.timed_out:
        raise subprocess.TimeoutExpired(command, timeout, stdout, stderr)
    if problems:
        raise AssertionError(f"`{' '.join(command)}` run in the test's process left it changed "
                             f"(put back where it could be):\n- " + "\n- ".join(problems)
                             + f"\nstderr:\n{stderr}")
    return subprocess.CompletedProcess(command, code, stdout, stderr)


def _status(code) -> int:
    """The exit status the interpreter makes of ``SystemExit(code)``."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def _text(data: bytes) -> str:
    """A child's output as ``subprocess.run(text=True)`` gives it."""
    return data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")


# -- warnings and the time limit ------------------------------------------------------------


@contextmanager
def _as_in_a_new_interpreter():
    """Warnings filtered as a new interpreter filters them (its defaults,
    then ``-W`` and ``PYTHONWARNINGS``), and printed on ``sys.stderr``."""
    with warnings.catch_warnings():
        warnings.resetwarnings()
        warnings.filterwarnings("default", category=DeprecationWarning, module="__main__", append=True)
        for category in (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning):
            warnings.filterwarnings("ignore", category=category, append=True)
        process_options = getattr(warnings, "_processoptions", None)
        if process_options is not None and sys.warnoptions:
            process_options(sys.warnoptions)

        def show(message, category, filename, lineno, file=None, line=None):
            sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))

        warnings.showwarning = show
        yield


class _TimedOut(BaseException):
    """Raised in the main thread when a run is past its time (not an Exception: nothing catches it)."""


class _Limit:
    """For the length of a run: interrupt it after ``timeout`` seconds
    (SIGALRM), and note a Ctrl-C (which the program turns into exit 130)
    so that the test session still stops."""

    def __init__(self, timeout: Optional[float]):
        self.timeout = timeout
        self.running = self.timed_out = self.interrupted = False

    def _alarm(self, signum, frame):
        if self.running:
            self.timed_out = True
            raise _TimedOut()

    def _interrupt(self, signum, frame):
        self.interrupted = True
        raise KeyboardInterrupt

    def __enter__(self):
        self.previous = {signal.SIGINT: signal.signal(signal.SIGINT, self._interrupt)}
        if self.timeout:
            self.previous[signal.SIGALRM] = signal.signal(signal.SIGALRM, self._alarm)
            signal.setitimer(signal.ITIMER_REAL, self.timeout)
        self.running = True
        return self

    def __exit__(self, *exc_info):
        self.running = False
        if self.timeout:
            signal.setitimer(signal.ITIMER_REAL, 0)
        for number, handler in self.previous.items():
            signal.signal(number, handler)


# -- the process's state --------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _libc():
    try:
        return ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None
    except OSError:  # pragma: no cover
        return None


_PR_GET_DUMPABLE, _PR_SET_DUMPABLE = 3, 4


def _environ_block() -> Optional[tuple[int, bytes]]:
    """Where the environment block ``/proc/self/environ`` shows is, and its bytes (Linux)."""
    if _libc() is None:
        return None
    try:
        with open("/proc/self/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
        start, end = int(fields[47]), int(fields[48])
    except (OSError, IndexError, ValueError):
        return None
    return start, ctypes.string_at(start, end - start)


def _umask() -> Optional[str]:
    try:
        with open("/proc/self/status", encoding="ascii") as handle:
            return next((line.split()[1] for line in handle if line.startswith("Umask:")), None)
    except OSError:
        return None


def _children() -> set[int]:
    """This process's child processes (Linux), zombies included."""
    found: set[int] = set()
    for path in glob.glob(f"/proc/{os.getpid()}/task/*/children"):
        try:
            with open(path, encoding="ascii") as handle:
                found.update(int(pid) for pid in handle.read().split())
        except OSError:
            continue
    return found


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "?"


def _loggers() -> dict:
    import logging

    found = {"logist": logging.getLogger("logist")}
    found.update((name, logger) for name, logger in logging.root.manager.loggerDict.items()
                 if name.startswith("logist.") and isinstance(logger, logging.Logger))
    return {name: (logger, logger.level, tuple(logger.handlers), logger.propagate, logger.disabled)
            for name, logger in found.items()}


#: The module-level values whose size is fingerprinted too (a cache's, its entries').
_SIZED = (dict, list, set, functools._lru_cache_wrapper)
#: The size noted for a cache listed in :data:`SHARED` under another module's name: never compared.
_SHARED_CACHE = object()


def _size(value):
    if isinstance(value, functools._lru_cache_wrapper):
        if (getattr(value, "__module__", None), getattr(value, "__name__", None)) in SHARED:
            return _SHARED_CACHE  # a listed cache, imported under its name into another module
        return value.cache_info().currsize
    return len(value)


#: Per module, what :func:`_module_values` last saw: its names, their values' ids, the names whose value
#: is sized, and the namespace itself (held, so that while it is kept an id is its value's alone).
_SEEN: dict[str, tuple[tuple, tuple, list, dict]] = {}


def _module_values() -> dict:
    """A fingerprint of every module-level value of ``logist``, module by
    module: its names, each value's identity, and the size of a container
    or a cache. Names of ``__dunder__`` form and those of :data:`SHARED`
    are left out when two fingerprints are compared (:func:`_changed_values`).

    Taken twice a run, so built at C speed (the namespace copied, its
    values' ids mapped); which values are sized is looked up again only
    in a module whose values are not those seen last time (:data:`_SEEN`).
    Two unchanged modules then compare as two equal tuples, and only a
    module whose fingerprint differs is looked at name by name."""
    found = {}
    for module_name, module in list(sys.modules.items()):
        if module is None or not (module_name == "logist" or module_name.startswith("logist.")):
            continue
        namespace = vars(module).copy()
        names, identities = tuple(namespace), tuple(map(id, namespace.values()))
        seen = _SEEN.get(module_name)
        if seen is not None and seen[0] == names and seen[1] == identities:
            sized = seen[2]
        else:
            sized = [name for name, value in namespace.items() if isinstance(value, _SIZED)]
            _SEEN[module_name] = (names, identities, sized, namespace)
        found[module_name] = (names, identities, {name: _size(namespace[name]) for name in sized})
    return found


def _changed_values(before: dict, after: dict) -> list[tuple[str, str]]:
    """The (module, name) pairs of both fingerprints whose value is another
    object or has another size (see :func:`_module_values`)."""
    changed = []
    for module_name, fingerprint in after.items():
        if module_name not in before or before[module_name] == fingerprint:
            continue
        names, identities, sizes = fingerprint
        names_before, identities_before, sizes_before = before[module_name]
        identities_before = dict(zip(names_before, identities_before))
        for name, identity in zip(names, identities):
            if name not in identities_before or name.startswith("__") or (module_name, name) in SHARED:
                continue
            size, size_before = sizes.get(name), sizes_before.get(name)
            if size is _SHARED_CACHE or size_before is _SHARED_CACHE:
                continue
            if (identity, size) != (identities_before[name], size_before):
                changed.append((module_name, name))
    return changed


class _Started:
    """The threads a run starts: from the main thread, or from a thread it
    started (not those a test's server starts for each connection, which
    may outlive a client that gave up waiting)."""

    def __init__(self):
        self.threads: list[threading.Thread] = []
        self.original = threading.Thread.start
        main, started, original = threading.main_thread(), self.threads, self.original

        def start(thread, *args, **kwargs):
            current = threading.current_thread()
            if current is main or any(current is t for t in started):
                started.append(thread)
            return original(thread, *args, **kwargs)

        threading.Thread.start = start

    def stop(self) -> list[threading.Thread]:
        threading.Thread.start = self.original
        return self.threads


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)


class _State:
    """What a run must leave as it found it (see the module's doc)."""

    def __init__(self):
        self.environ = dict(os.environ)
        self.cwd = os.getcwd()
        self.umask = _umask()
        self.signals = {s: signal.getsignal(s) for s in signal.valid_signals()}
        self.children = _children()
        self.loggers = _loggers()
        self.values = _module_values()
        libc = _libc()
        self.dumpable = libc.prctl(_PR_GET_DUMPABLE, 0, 0, 0, 0) if libc is not None else None
        self.block = _environ_block()
        self.threads = _Started()  # last: from here on restore() must run

    def restore(self) -> list[str]:
        """Put back what the run changed; what it should not have changed, said."""
        problems = []
        # Logist's own doing as it starts (logist.secrets.process.withdraw_secrets).
        libc = _libc()
        if libc is not None and libc.prctl(_PR_GET_DUMPABLE, 0, 0, 0, 0) != self.dumpable:
            libc.prctl(_PR_SET_DUMPABLE, self.dumpable, 0, 0, 0)
        if self.block is not None:
            start, data = self.block
            if ctypes.string_at(start, len(data)) != data:
                ctypes.memmove(start, data, len(data))
        # Anything else is a change the process would have taken with it.
        if dict(os.environ) != self.environ:
            changed = sorted(set(os.environ.items()) ^ set(self.environ.items()))
            problems.append(f"os.environ: {sorted({name for name, _ in changed})}")
            os.environ.clear()
            os.environ.update(self.environ)
        if os.getcwd() != self.cwd:
            problems.append(f"the working directory: {os.getcwd()}")
            os.chdir(self.cwd)
        umask = _umask()
        if umask != self.umask and self.umask is not None:
            problems.append(f"the umask: {umask} (was {self.umask})")
            os.umask(int(self.umask, 8))
        for number, handler in self.signals.items():
            now = signal.getsignal(number)
            if now is not handler and now != handler:
                problems.append(f"the handler of signal {_signal_name(number)}: {now!r}")
                signal.signal(number, handler)
        loggers = _loggers()
        for name, (logger, level, handlers, propagate, disabled) in loggers.items():
            if name in self.loggers and (level, handlers, propagate, disabled) != self.loggers[name][1:]:
                problems.append(f"the logger {name}: level {level}, handlers {list(handlers)}")
                _, logger.level, old_handlers, logger.propagate, logger.disabled = self.loggers[name]
                logger.handlers[:] = list(old_handlers)
            elif name not in self.loggers and (level or handlers):
                problems.append(f"the logger {name}: level {level}, handlers {list(handlers)}")
        deadline = time.monotonic() + GRACE
        started = self.threads.stop()
        for thread in started:
            thread.join(max(0.0, deadline - time.monotonic()))
        left = [t.name for t in started if t.is_alive()]
        if left:
            problems.append(f"threads still running: {sorted(left)}")
        children = _children() - self.children
        while children and time.monotonic() < deadline:
            time.sleep(0.02)
            children = _children() - self.children
        if children:
            problems.append(f"child processes still there: {[f'{pid}: {_cmdline(pid)}' for pid in sorted(children)]}")
        for key in _changed_values(self.values, _module_values()):
            problems.append(f"{key[0]}.{key[1]} changed: a per-process cache? Logist keeps none: hold it on the "
                            f"object that owns it, or, for a fact of the machine or the package, add it to "
                            f"SHARED in tests/in_process.py")
        return problems
