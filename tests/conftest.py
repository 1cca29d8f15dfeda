"""Shared fixtures: one isolated environment per test, a scripted model in
memory (and, for tests about the wire, a real OpenAI-compatible server on
127.0.0.1), the real ``logist`` program run in this process
(:func:`logist_cli`) or in a child (:func:`logist_process`), and
normalisation of volatile fields for snapshots."""

from __future__ import annotations

import fcntl
import gc
import json
import os
import pty
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import termios
import threading
import time
from pathlib import Path
from typing import Callable

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent

#: The bytecode the tests' processes compile, kept from run to run outside the
#: source tree (beside pytest's own cache, which .gitignore leaves out).
BYTECODE = REPO_ROOT / ".pytest_cache" / "pycache"


def _keep_bytecode() -> None:
    """With ``PYTHONDONTWRITEBYTECODE`` set, as it often is in containers,
    every test process would compile Logist and every test module (pytest's
    assertion rewriting included) again at each run: about 5 s of CPU per
    pytest-xdist worker. Their bytecode goes to :data:`BYTECODE` instead of
    ``__pycache__`` folders in the tree, which is what the setting keeps
    clean. Done before this file imports Logist; the modules pytest's
    plugins imported already are compiled as before."""
    if sys.dont_write_bytecode or sys.pycache_prefix:
        sys.pycache_prefix = sys.pycache_prefix or str(BYTECODE)
        sys.dont_write_bytecode = False


_keep_bytecode()

from forked import run_forked  # noqa: E402
from logist.store.jobsdir import JobsDir  # noqa: E402 (after the bytecode's folder is set)
from logist.engine.create import create_job  # noqa: E402
from logist.engine.step import step_once  # noqa: E402
from logist.replay.scripted import Reply, ScriptedLLMServer, ScriptedModel, answer  # noqa: E402

try:
    from hypothesis import settings as _hypothesis_settings

    # Property tests check behaviour, not speed: hypothesis's 200 ms deadline
    # per example fails them on a loaded machine for no fault of the code.
    _hypothesis_settings.register_profile("logist", deadline=None)
    _hypothesis_settings.load_profile("logist")
except ImportError:  # pragma: no cover - hypothesis is in the test extra
    pass

#: A fake key that must never show up in any file, git object or output.
CANARY_KEY = "sk-canary-7f3a9c1e5b2d4f60a8b1c3d5e7f9a0b2"


def pytest_xdist_auto_num_workers(config):
    """``-n auto`` (pyproject.toml's default): one worker more than the cores
    this process may run on. A test waits for a good part of its time (the
    processes it starts, its servers' sockets, a timeout it is about), so as
    many workers as cores leave them idle: the quick set on 2 cores took
    119.2 s with 2 workers, 98.6 s with 3 and 96.2 s with 4 (quiet, one run
    each)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return cores + 1


def pytest_configure(config):
    """Ctrl-C reaches the children the tests start, as from a shell's
    foreground job: a suite started in the background by a non-interactive
    shell (``cmd &``) inherits SIGINT ignored, and every child would too
    (Python leaves an ignored SIGINT ignored), so a test typing Ctrl-C, or
    stopping ``logist serve`` with SIGINT, would wait for nothing.

    And the tests' directories go to memory (:func:`_memory_basetemp`)."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    _memory_basetemp(config)


#: A tmpfs the tests' directories can go to, and the prefix of the folder made there for one run.
MEMORY = Path("/dev/shm")
MEMORY_PREFIX = "logist-tests-"


def _is_tmpfs(path: Path) -> bool:
    try:
        mounts = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return False
    return any(fields[1] == str(path) and fields[2] == "tmpfs" for fields in (line.split() for line in mounts) if len(fields) > 2)


def _memory_basetemp(config) -> None:
    """Unless ``--basetemp`` names a folder, the tests' directories (every job,
    workspace and git repository they make) go to a folder of this run's
    own on a tmpfs (``/dev/shm``) where there is one. Logist fsyncs what its
    storage contract needs, about 20 times a test; on this disk an fsync costs
    1-2 ms and waits, on a tmpfs nothing. No test is about a disk's
    durability: a killed process loses nothing the page cache holds either
    way, and the tests that fill a disk mount a tmpfs of their own. The
    folder is removed when every test passed and kept (and named) when one
    failed. pytest-xdist's workers take their own folders below it."""
    if config.option.basetemp or hasattr(config, "workerinput") or not _is_tmpfs(MEMORY) \
            or not os.access(MEMORY, os.W_OK):
        return
    config.option.basetemp = tempfile.mkdtemp(prefix=MEMORY_PREFIX, dir=MEMORY)


#: Where the last runs' durations of the tests are kept (pytest's cache), and
#: from how many seconds a test counts as long and is started first.
DURATIONS_KEY = "logist/durations"
LONG = 1.5
#: Without a last run's figure for a test (a fresh clone, as CI runs; ``-p
#: no:cacheprovider``), the seconds it is expected to take, from its marks (the
#: most of those it has): what it runs, not a measure of it. A live test's
#: calls to a real model, a slow one's real processes (Ray clusters, kill
#: storms, coding agents), a browser's pages.
EXPECTED_SECONDS = {"live": 30.0, "slow": 10.0, "browser": 3.0, "serve": 2.0}
#: Marks whose tests share an engine of the worker's session and are kept on
#: one worker: tests/live's llama.cpp server, whose threads a second one's
#: would fight for the cores (and its model loaded twice).
ONE_WORKER = ("live",)
#: Fixtures of the worker's session whose tests are kept on one worker as well: a local Ray cluster
#: (tests/engine/test_ray_engine.py), which each worker its tests went to started for itself (about 7 s
#: of CPU a cluster: its daemons, and a log monitor that reads its logs every second).
ONE_WORKER_FIXTURES = ("ray_cluster",)


def expected_seconds(item, known: dict) -> float:
    """``item``'s last run's duration, else what its marks lead to expect (:data:`EXPECTED_SECONDS`)."""
    if item.nodeid in known:
        return known[item.nodeid]
    return max((EXPECTED_SECONDS.get(mark.name, 0.0) for mark in item.iter_markers()), default=0.0)


def pytest_collection_modifyitems(session, config, items):
    """The tests expected to take longest start first, spread over the
    workers: pytest-xdist's worksteal gives each worker a contiguous share of
    the collection and steals from its end, so a long test late in a share
    keeps one worker busy while the others are done. A test's expected time
    is its last run's (pytest's cache), else its marks' (:func:`expected_seconds`:
    on a fresh clone, as CI runs, the live, slow and browser tests still
    start first). The long tests go to the workers longest first, each to the
    share with the fewest seconds so far, the tests of a :data:`ONE_WORKER`
    mark or of a :data:`ONE_WORKER_FIXTURES` fixture together as one, in their collection's order. Every worker reads the same cache and marks, so
    all collect the same order, as pytest-xdist requires."""
    cache = getattr(config, "cache", None)
    known = cache.get(DURATIONS_KEY, {}) if cache is not None else {}
    seconds = {id(item): expected_seconds(item, known) for item in items}
    long = [item for item in items if seconds[id(item)] >= LONG]
    if not long:
        return
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 1)
    units: dict = {}  # a ONE_WORKER mark's or ONE_WORKER_FIXTURES fixture's tests, else each test alone
    for item in long:
        together = next((mark for mark in ONE_WORKER if item.get_closest_marker(mark)), None) or \
            next((name for name in ONE_WORKER_FIXTURES if name in item.fixturenames), None)
        units.setdefault(together or id(item), []).append(item)
    shares: list[list] = [[] for _ in range(workers)]
    loads = [0.0] * workers
    for unit in sorted(units.values(), key=lambda unit: -sum(seconds[id(item)] for item in unit)):
        least = loads.index(min(loads))
        shares[least].append(unit)
        loads[least] += sum(seconds[id(item)] for item in unit)
    # A share's units longest first; a ONE_WORKER mark's tests in the order they are written (tests/live's
    # share a prompt with the one before them, which the engine has evaluated already).
    shares = [[item for unit in sorted(share, key=lambda unit: -max(seconds[id(item)] for item in unit))
               for item in unit] for share in shares]
    taken = {id(item) for item in long}
    rest = [item for item in items if id(item) not in taken]
    # Each share as long as the one worksteal sends (what is left divided by the workers left).
    left, ordered = len(items), []
    for i, share in enumerate(shares):
        size = left // (workers - i)
        fill = max(0, size - len(share))
        ordered += share + rest[:fill]
        rest = rest[fill:]
        left -= size
    items[:] = ordered + rest


def pytest_collection_finish(session):
    """What collection made stays alive until the session ends (every module
    the tests import, Logist's, pydantic's schemas, openai's and
    hypothesis's included, and the collected tests): it is frozen
    (:func:`gc.freeze`, after a collection of what is garbage already), so
    that the cyclic collector's full passes during the tests skip it, as
    the program does at its exit (logist/__main__.py). In each pytest-xdist
    worker: about 0.7 s of its collector's CPU time of 1.8 s over the quick
    set (5.5 s to 3.3 s for three workers, one run each, on a loaded machine)."""
    gc.collect()
    gc.freeze()


_durations: dict[str, float] = {}


def pytest_runtest_logreport(report):
    _durations[report.nodeid] = _durations.get(report.nodeid, 0.0) + report.duration


def pytest_sessionfinish(session, exitstatus):
    """Remove the run's folder in memory if every test passed, else name it
    (:func:`_memory_basetemp`); keep this run's durations for the next run's
    order (the controller only, which sees every worker's reports)."""
    basetemp = session.config.option.basetemp
    if not hasattr(session.config, "workerinput") and basetemp and \
            Path(basetemp).parent == MEMORY and Path(basetemp).name.startswith(MEMORY_PREFIX):
        # What the tests' processes compiled of their own files there (a module a test wrote) is of no later use.
        shutil.rmtree(BYTECODE / Path(basetemp).relative_to(Path(basetemp).anchor), ignore_errors=True)
        if exitstatus == 0:
            shutil.rmtree(basetemp, ignore_errors=True)
        else:
            session.config.get_terminal_writer().line(f"the tests' files are kept in {basetemp}")
    cache = getattr(session.config, "cache", None)
    if cache is None or hasattr(session.config, "workerinput") or not _durations:
        return
    known = cache.get(DURATIONS_KEY, {})
    known.update({nodeid: round(seconds, 2) for nodeid, seconds in _durations.items()})
    cache.set(DURATIONS_KEY, known)


def pytest_terminal_summary(terminalreporter):
    """The live engine's work per test (tests/live/enginelog.py), when live tests ran."""
    lines = [f"{report.nodeid.split('::')[-1][:70]}: {value}"
             for reports in terminalreporter.stats.values() for report in reports
             if getattr(report, "when", None) == "teardown"
             for name, value in getattr(report, "user_properties", ()) if name == "engine"]
    if lines:
        terminalreporter.section("the live engine's work")
        for line in lines:
            terminalreporter.line(line)


@pytest.fixture(autouse=True, scope="session")
def compiled_once():
    """Child processes (``python -m logist``, crash and concurrency tests) read
    compiled bytecode from the tests' own cache outside the source tree
    (:data:`BYTECODE`, kept from run to run), written by the first of them:
    with ``PYTHONDONTWRITEBYTECODE`` set, as it often is in containers, each
    would otherwise compile the whole package again. The folder is shared by
    pytest-xdist's workers (CPython writes each file atomically)."""
    saved = {name: os.environ.get(name) for name in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = sys.pycache_prefix or str(BYTECODE)
    yield
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


#: Where .ci/agents.sh links the coding agents it installs, which CI puts on PATH (read as the
#: tests are collected: the isolation fixture takes every LOGIST_ variable out of each test's environment).
AGENTS_BIN = Path(os.environ.get("LOGIST_AGENTS_DIR") or REPO_ROOT / ".ci" / "agents") / "bin"
#: The test folders whose tests run the coding agents; elsewhere :data:`AGENTS_BIN` is taken off
#: PATH: each ``logist doctor`` asks every agent it finds its version (aider's answer alone costs
#: about 0.7 s of CPU), which no test outside these folders is about.
AGENT_FOLDERS = ("agents", "model", "live")


def _without_agents(path: str) -> str:
    """``path`` (a PATH) without :data:`AGENTS_BIN`."""
    agents = os.path.realpath(AGENTS_BIN)
    return os.pathsep.join(folder for folder in path.split(os.pathsep) if os.path.realpath(folder) != agents)


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch, request):
    """Temp jobs dir, fixed git identity and dates, no real keys or endpoints,
    no coding agent on PATH outside :data:`AGENT_FOLDERS`."""
    for name in list(os.environ):
        if name.startswith(("LOGIST_", "OPENAI_", "GIT_")):
            monkeypatch.delenv(name, raising=False)
    if request.node.path.parent.name not in AGENT_FOLDERS and "PATH" in os.environ:
        monkeypatch.setenv("PATH", _without_agents(os.environ["PATH"]))
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "100")
    for who in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{who}_NAME", "Logist Test")
        monkeypatch.setenv(f"GIT_{who}_EMAIL", "test@logist.invalid")
        monkeypatch.setenv(f"GIT_{who}_DATE", "2026-01-01T00:00:00+0000")
    jobs_dir = tmp_path / "jobs"
    monkeypatch.setenv("LOGIST_JOBS_DIR", str(jobs_dir))
    monkeypatch.chdir(tmp_path)
    yield tmp_path


@pytest.fixture
def jobs(tmp_path) -> JobsDir:
    jobs = JobsDir(tmp_path / "jobs")
    jobs.init()
    return jobs


def same_conversation(a: dict, b: dict) -> bool:
    """Two request bodies send the same conversation: the same messages, the
    last one up to its call marker ("[Step N of MAX]": a failed call counts)."""
    import re

    def marked(body):
        messages = [dict(m) for m in body["messages"]]
        messages[-1]["content"] = re.sub(r"\[Step \d+ of (\d+)\]$", r"[Step N of \1]", messages[-1]["content"])
        return messages

    return marked(a) == marked(b)


def write_config(jobs: JobsDir, **values) -> None:
    (jobs.path / "config.json").write_text(json.dumps(values, indent=2))


#: The test folders whose tests run ``logist`` itself (the command line, ``logist serve``,
#: a process's start-up): their ``llm`` is the real server.
SERVER_FOLDERS = ("cli", "serve", "secrets")


@pytest.fixture
def llm(request):
    """A scripted model in memory (:class:`~logist.replay.scripted.ScriptedModel`):
    add answers with ``llm.add(...)``, give it to the engine with
    ``endpoints=llm.endpoints`` (``logist.open(path, model=llm)``); what it
    was asked is in ``llm.requests`` and ``llm.headers``. No socket, no thread.

    A test whose point is the wire (streams, retries, timeouts, faults,
    headers) or that runs ``logist`` itself (``--base-url``, a child
    process) is marked ``wire`` (or is in :data:`SERVER_FOLDERS`): its
    ``llm`` is then :func:`llm_server`, the real scripted server."""
    if request.node.get_closest_marker("wire") or Path(str(request.node.fspath)).parent.name in SERVER_FOLDERS:
        return request.getfixturevalue("llm_server")
    return ScriptedModel()


@pytest.fixture
def llm_server():
    """A scripted OpenAI-compatible server on 127.0.0.1 (``llm_server.base_url``), for tests about the wire."""
    server = ScriptedLLMServer().start()
    yield server
    server.stop()


def via(llm) -> dict:
    """The keywords that make the engine's calls reach ``llm``: an in-memory
    model (its ``endpoints``), or a server (its ``base_url``)."""
    return {"endpoints": llm.endpoints} if isinstance(llm, ScriptedModel) else {"base_url": llm.base_url}


def logist_cli(*args: str, env: dict | None = None, input: str | None = None,
               timeout: float = 60) -> subprocess.CompletedProcess:
    """Run the real ``logist`` program's entry point, :func:`logist.__main__.main`,
    in this process, as a child process would run it (see tests/in_process.py):
    its own standard streams, ``env`` added to the environment for the run,
    empty caches, the exit status it would exit with; and the process left
    as it was found (a run that leaves anything changed fails its test).

    Most tests check what a command does and prints, which is the same in
    any process: a child per call cost most of the suite's time (about
    0.16 s of CPU to start Python and import Logist, 0.6 s with openai).
    What is about a process itself uses :func:`logist_process`."""
    from in_process import run

    return run(args, env=env, input=input, timeout=timeout)


def logist_process(*args: str, env: dict | None = None, input: str | None = None,
                   timeout: float = 60) -> subprocess.CompletedProcess:
    """Run the real ``logist`` in a child process (``python -m logist``),
    with this process's environment and ``env``, for what only a process of
    its own shows: a kill (SIGKILL, ``LOGIST_FAILPOINT``; what the next
    command makes of what it left is the same in this process, and the tests
    outside the crash suites run it here); what a model's command
    can see of Logist's process (``/proc/<pid>/environ``, the environment it
    was started with, a non-dumpable process: test_command_safety, the
    gitrun planting test); an interpreter started another way
    (``PYTHONPATH``) or a ``PATH`` without ``unshare`` (probed once per
    process); ``--version`` answered before click is imported; the Ray
    engine's driver (the test's process is one already); the progress-line
    test. A process killed, where its start is not looked at, is
    :func:`logist_forked`'s. Tests of several processes at once start their own."""
    return subprocess.run(
        [sys.executable, "-m", "logist", *args],
        capture_output=True, text=True, env=_child_env(env), input=input, timeout=timeout,
    )


def _child_env(env: dict | None) -> dict:
    """This process's environment with ``env`` added: what a child is started with."""
    return {**os.environ, **(env or {})}


def logist_forked(*args: str, env: dict | None = None, input: str | None = None,
                  timeout: float = 60) -> subprocess.CompletedProcess:
    """:func:`logist_process`, the child forked from a process that imported
    Logist already (tests/forked.py: a real process of its own, started in
    about a tenth of the CPU): for a process killed (SIGKILL,
    ``LOGIST_FAILPOINT``) and the commands that meet what it left, where
    nothing of the process's start is looked at. Standard input is empty
    unless ``input`` is given."""
    return run_forked(list(args), env=_child_env(env), input=input, timeout=timeout)


def run_on_a_terminal(*args: str, timeout: float = 60, env: dict | None = None,
                      ctrl_c_when: str | None = None, and_when: Callable[[], bool] | None = None,
                      release_when: tuple[str, threading.Event] | None = None) -> tuple[int, str]:
    """``logist ARGS`` with stdout and stderr on a pseudo-terminal (and
    ``env`` added to the environment); what it wrote, and its exit code.

    With ``ctrl_c_when``, the pseudo-terminal is the process's controlling
    terminal and its standard input too (it leads a session of its own, as
    a shell's foreground job does); once that text was printed (and
    ``and_when()`` is true, when given: say, the server has the request the
    text announces, which is printed before it is sent), Ctrl-C is typed,
    which the terminal turns into SIGINT for the process.

    With ``release_when`` (a text and an event), the event is set once that
    text was printed: a scripted reply held until then (``Reply(release=)``)
    goes on."""
    master, slave = pty.openpty()

    def own_terminal() -> None:  # in the child, after setsid: the pty becomes its controlling terminal
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    interrupted = ctrl_c_when is not None
    process = subprocess.Popen([sys.executable, "-m", "logist", *args],
                               stdin=slave if interrupted else subprocess.DEVNULL, stdout=slave, stderr=slave,
                               env={**os.environ, **(env or {})}, start_new_session=interrupted,
                               preexec_fn=own_terminal if interrupted else None)
    os.close(slave)
    output, typed = b"", False
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if interrupted and not typed and ctrl_c_when.encode() in output and (and_when is None or and_when()):
            os.write(master, b"\x03")
            typed = True
        if release_when is not None and release_when[0].encode() in output:
            release_when[1].set()
        ready, _, _ = select.select([master], [], [], 0.1)
        if ready:
            try:
                data = os.read(master, 4096)
            except OSError:  # the child closed the terminal
                break
            if not data:
                break
            output += data
        elif process.poll() is not None:
            break
    os.close(master)
    assert typed or not interrupted, output.decode("utf-8", "replace")
    return process.wait(timeout=10), output.decode("utf-8", "replace")


def chromium_executable() -> str:
    """The headless Chromium the browser tests run: Debian's
    ``chromium-headless-shell`` where it is installed (Chromium's own headless
    build, the same Blink and V8 without the browser's windows and the pages
    of its own interface, which the full ``chromium --headless`` starts and
    renders for every window: the browser tests' Chromium took 24 s of CPU
    where the full browser took 57 s), else Debian's ``chromium``. Neither found: a skip, and with CI=true a failure."""
    for name in ("chromium-headless-shell", "chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    install = "apt-get install -y chromium-headless-shell"
    if os.environ.get("CI") == "true":
        pytest.fail(f"no headless Chromium is installed; .ci/run installs it ({install})")
    pytest.skip(f"no headless Chromium is installed ({install}); in CI this is a failure")


def processes_with(marker: str) -> list[int]:
    """The processes (zombies aside) whose command line holds ``marker``: a
    test that names its commands uniquely sees at once whether any is left,
    rather than waiting to see what one would have done."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                cmdline = Path(f"/proc/{name}/cmdline").read_bytes()
                state = Path(f"/proc/{name}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
            except OSError:
                continue
            if marker.encode() in cmdline and state != b"Z":
                found.append(int(name))
    return found


_SHA = re.compile(r"\b[0-9a-f]{40}\b")
_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z")
VOLATILE_KEYS = {"timestamp", "created_at", "updated_at", "duration_ms", "wall_ms"}


class Normaliser:
    """Replaces volatile values so snapshots compare what matters.

    Commit shas become ``<sha:N>`` numbered by first appearance, so a snapshot
    still shows which entries share a commit; temp paths become ``<tmp>``.
    """

    def __init__(self, tmp_path: Path):
        self.tmp = str(tmp_path)
        self.shas: dict[str, str] = {}

    def text(self, value: str) -> str:
        value = value.replace(self.tmp, "<tmp>")
        value = _TIME.sub("<time>", value)
        return _SHA.sub(lambda m: self.shas.setdefault(m.group(0), f"<sha:{len(self.shas) + 1}>"), value)

    def __call__(self, data):
        if isinstance(data, dict):
            return {k: ("<volatile>" if k in VOLATILE_KEYS and data[k] is not None else self(v)) for k, v in data.items()}
        if isinstance(data, list):
            return [self(v) for v in data]
        if isinstance(data, str):
            return self.text(data)
        return data


@pytest.fixture
def normalise(tmp_path) -> Normaliser:
    return Normaliser(tmp_path)


def long_job(jobs: JobsDir, llm, rounds: int, name: str = "long"):
    """A job of ``rounds`` Worker turns and a Supervisor's RETRY after each,
    stepped through ``llm`` (a model or a server), then a turn in progress: each
    Worker turn runs a command (whose output the call after it repeats),
    changes a file and completes, so its calls continue one another and an
    early one's output is shown again later. 1 + 4 * ``rounds`` + 3 entries.
    The command is a shell script (a Python one cost ~15 ms of CPU a run)."""
    check = jobs.path.parent / "check.sh"
    check.write_text("echo 'checked, line 1'\necho 'checked, line 2'\n")
    command = "sh check.sh"
    job = create_job(jobs, name, "Keep the notes", files=[str(check)], allowed_commands=[command],
                     max_retries_in_a_row=1000)
    usage = {"prompt_tokens": 1200, "completion_tokens": 80}

    def worker(n: int) -> list[str]:
        return [answer("CMD", command=command),
                answer("MESSAGE", message=f"Writing note {n}.", file_changes=[{"path": "notes.md", "content": f"note {n}\n"}])]

    script = []
    for n in range(rounds):
        script += worker(n) + [answer("COMPLETED", f"Note {n} written."), answer("RETRY", f"Write note {n + 1}.")]
    script += worker(rounds) + [answer("MESSAGE", message="Almost done.")]
    llm.add(*[Reply(content=s, usage=usage) for s in script])
    for _ in script:
        step_once(job, **via(llm))
    return job
