"""``python -m logist`` as a real process that does not import Logist again.

A test that kills ``logist`` (SIGKILL from outside, or ``LOGIST_FAILPOINT``)
needs a process of its own; what it does not need is the interpreter's
start and the imports each such process pays (about 0.6 s of CPU with
openai's, the most of a killed step's cost: the crash and kill-storm tests
start about a hundred). :class:`ForkedPopen` is a :class:`subprocess.Popen`
whose child is forked, not executed: from a *zygote*, one small process per
test process that imported Logist, openai and ``logist serve``'s server
once and does nothing else, single-threaded, so that forking it is safe.
The child is given the arguments, environment, working directory, umask
and standard streams the ``Popen`` call names (the streams as file
descriptors over a UNIX socket), starts a new session if asked, and runs
``logist.__main__`` as ``python -m logist`` would, ``SystemExit`` and
tracebacks included. It is the test's to signal, kill and wait for as any
child: the zygote reports how it ended (a signal as a negative return
code, as ``Popen`` does) and reaps it only once the test has seen that, so
that, as with ``Popen``, its pid is not another process's before.

What a forked ``logist`` cannot show, and the tests that need it start one
with ``subprocess`` (:func:`conftest.logist_process`): its start (secrets
withdrawn before anything is imported, ``--version`` answered before click
is imported, an interpreter started with other options), and its
environment block in ``/proc/<pid>/environ`` and its command line in
``/proc/<pid>/cmdline``, which are the zygote's.
"""

from __future__ import annotations

import array
import json
import os
import socket
import subprocess
import sys
import threading
from typing import Optional

#: The zygote: imports, then forks a child for each request and reports each child's end.
ZYGOTE = r'''
import array, json, os, select, signal, socket, sys

import openai, logist.__main__, logist.cli, logist.cli.app, logist.engine.step  # noqa: F401
try:
    import logist.serve.app, uvicorn  # noqa: F401 (the serve extra)
except ImportError:
    pass

channel = socket.socket(fileno=int(sys.argv[1]))
wake_r, wake_w = os.pipe()
os.set_blocking(wake_w, False)
signal.set_wakeup_fd(wake_w)
signal.signal(signal.SIGCHLD, lambda *_: None)


def send(message):
    channel.sendall(json.dumps(message).encode() + b"\n")


def child(request, fds):
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    if request["new_session"]:
        os.setsid()
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    os.closerange(3, 65536)
    os.umask(request["umask"])
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = [logist.__main__.__file__, *request["args"]]
    import runpy
    del sys.modules["logist.__main__"]  # run as __main__, as python -m logist runs it
    runpy.run_module("logist", run_name="__main__", alter_sys=True)
    raise SystemExit(0)


running = set()  # the children started and not yet seen to end
while True:
    ready = select.select([channel, wake_r], [], [])[0]
    if wake_r in ready:
        os.read(wake_r, 4096)
        for pid in list(running):
            # Seen, not reaped (WNOWAIT): the child stays a zombie, its pid not given to another process,
            # until the test has seen it end and says so ("reap"), as a Popen's child waits for its wait().
            ended = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            if ended is not None:
                running.discard(pid)
                code = ended.si_status if ended.si_code == os.CLD_EXITED else -ended.si_status
                send({"ended": pid, "code": code})
    if channel in ready:
        fds = array.array("i")
        data, ancdata, _, _ = channel.recvmsg(1 << 20, socket.CMSG_SPACE(3 * fds.itemsize))
        if not data:
            break
        for level, kind, payload in ancdata:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
        request = json.loads(data)
        if "reap" in request:
            try:
                os.waitpid(request["reap"], 0)
            except ChildProcessError:  # reaped already
                pass
            continue
        pid = os.fork()
        if pid == 0:
            child(request, list(fds))
        for fd in fds:
            os.close(fd)
        running.add(pid)
        send({"started": pid})
'''


class Zygote:
    """The zygote of this test process (:data:`ZYGOTE`), and the ends of its children."""

    _one: Optional["Zygote"] = None
    _made = threading.Lock()

    @classmethod
    def get(cls) -> "Zygote":
        with cls._made:
            if cls._one is None or cls._one.process.poll() is not None:
                cls._one = cls()
            return cls._one

    def __init__(self):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        # Its own environment is what a child's imports see and what /proc shows of a child's;
        # none of a test's LOGIST_ settings or keys (a request gives each child its environment).
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LOGIST_", "OPENAI_"))}
        self.process = subprocess.Popen([sys.executable, "-c", ZYGOTE, str(theirs.fileno())], pass_fds=[theirs.fileno()],
                                        stdin=subprocess.DEVNULL, env=env)
        theirs.close()
        self.channel = ours
        self.ended: dict[int, int] = {}
        self.started: list[int] = []
        self.changed = threading.Condition()
        self.asking = threading.Lock()
        threading.Thread(target=self._listen, name="zygote", daemon=True).start()

    def _listen(self) -> None:
        pending = b""
        while True:
            data = self.channel.recv(1 << 16)
            if not data:
                return
            pending += data
            *lines, pending = pending.split(b"\n")
            with self.changed:
                for line in lines:
                    message = json.loads(line)
                    if "started" in message:
                        # A pid is used again: what an earlier child of that pid left is not this one's.
                        self.ended.pop(message["started"], None)
                        self.started.append(message["started"])
                    else:
                        self.ended[message["ended"]] = message["code"]
                self.changed.notify_all()

    def fork(self, args: list[str], env: dict, cwd: str, fds: list[int], new_session: bool) -> int:
        """Start ``logist *args``; its pid."""
        umask = os.umask(0o022)
        os.umask(umask)
        request = json.dumps(dict(args=args, env=env, cwd=cwd, umask=umask, new_session=new_session)).encode()
        with self.asking:
            self.channel.sendmsg([request], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
            with self.changed:
                if not self.changed.wait_for(lambda: self.started, timeout=60):
                    raise RuntimeError("the zygote did not start the process within 60 s")
                return self.started.pop(0)

    def code(self, pid: int, timeout: Optional[float]) -> Optional[int]:
        """How ``pid`` ended, waiting up to ``timeout`` seconds (None: for as long as it runs).
        Once it is known, the zygote reaps the child: until then its pid is not another process's,
        so a signal sent to it by a test that has not seen it end reaches nothing else."""
        with self.changed:
            self.changed.wait_for(lambda: pid in self.ended, timeout=timeout)
            code = self.ended.get(pid)
        if code is not None:
            with self.asking:
                self.channel.sendmsg([json.dumps({"reap": pid}).encode()])
        return code


class ForkedPopen(subprocess.Popen):
    """``subprocess.Popen([sys.executable, "-m", "logist", *args], ...)``, the
    child forked from the :class:`Zygote` (this module's docstring says what
    that cannot show). Streams, ``env``, ``cwd``, ``start_new_session``,
    ``communicate``, ``wait``, ``poll``, ``send_signal`` and ``kill`` as
    ``Popen``'s; ``preexec_fn``, ``pass_fds``, users and groups are refused."""

    def _execute_child(self, args, executable, preexec_fn, close_fds, pass_fds, cwd, env, startupinfo, creationflags,
                       shell, p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite, restore_signals, gid, gids, uid,
                       umask, start_new_session, *process_group):
        if list(args[:3]) != [sys.executable, "-m", "logist"] or shell or executable:
            raise ValueError(f"ForkedPopen runs python -m logist only, not {args!r}")
        if preexec_fn or pass_fds or gid is not None or gids or uid is not None or umask != -1 \
                or any(group not in (None, -1) for group in process_group):
            raise ValueError("ForkedPopen does not take preexec_fn, pass_fds, users, groups, umask or process_group")
        # A stream the call leaves alone is this process's own, as a child's would be.
        fds = [p2cread if p2cread != -1 else 0, c2pwrite if c2pwrite != -1 else 1, errwrite if errwrite != -1 else 2]
        try:
            self._zygote = Zygote.get()
            self.pid = self._zygote.fork([str(a) for a in args[3:]], dict(os.environ if env is None else env),
                                         os.fspath(cwd) if cwd is not None else os.getcwd(), fds, start_new_session)
            self._child_created = True
        finally:
            self._close_pipe_fds(p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite)

    def _internal_poll(self, _deadstate=None, **_):
        if self.returncode is None:
            self.returncode = self._zygote.code(self.pid, timeout=0)
        return self.returncode

    def _wait(self, timeout):
        if self.returncode is None:
            code = self._zygote.code(self.pid, timeout)
            if code is None:
                raise subprocess.TimeoutExpired(self.args, timeout)
            self.returncode = code
        return self.returncode


def run_forked(args: list[str], *, env: Optional[dict] = None, input: Optional[str] = None,
               timeout: Optional[float] = None) -> subprocess.CompletedProcess:
    """``subprocess.run([sys.executable, "-m", "logist", *args], capture_output=True, text=True, ...)``
    with the child a :class:`ForkedPopen`; killed at ``timeout`` as ``subprocess.run`` does."""
    command = [sys.executable, "-m", "logist", *args]
    with ForkedPopen(command, stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) as process:
        try:
            stdout, stderr = process.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)
