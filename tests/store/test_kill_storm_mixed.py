"""A storm of SIGKILLs over every kind of work a job does, four jobs at once,
with real processes and a real HTTP server:

* ``commands``: steps whose answer runs a command that takes a while (a
  kill inside it holds the command for a person, who runs it again or
  skips it);
* ``checks``: a job with a check that takes a while, so kills land inside a
  run of the checks as well as in the Worker's and the Supervisor's calls;
* ``agent``: its Worker is the ``command`` coding agent, a small program
  that calls the recording gateway over HTTP twice with a pause between,
  so kills land while the agent runs and between its gateway calls;
* ``decide``: a job that stops for a person at every answer (a question, or
  a command held for approval) decided through a real ``logist serve``
  process over its HTTP API: the server is killed in the middle of a
  decision (a command it approved running), and a runner is killed while
  the server decides.

After each kill, with nothing repaired yet, what the first storm
(test_kill_storm.py) asserts: both files parse with a plain ``json.load``,
every entry written before the kill is still there, unchanged and in order
(none lost or changed; entries numbered 1, 2, 3... so none duplicated), no
lock is left held, ``job status`` shows the history's last entry. At the
end: ``job fsck`` finds every job sound, its workspace at its commit, no
command or agent outlived its runner, and

* no answer was paid for twice: the model server counts the requests per
  ``Idempotency-Key``, and a key is sent again only after a call of that
  key recorded as of unknown outcome (a kill while it was in flight);
* every gateway call of an agent step is recorded once: each call the agent
  saw answered is in exactly one entry's ``agent.calls``, and no call is
  recorded twice.

Sized by ``LOGIST_SCALE``: 6 kills a job in the suite (about 30 with the
places each kind must be hit, :data:`MUST_LAND`), 75 a job (300) with
``LOGIST_SCALE=full``.
"""

from __future__ import annotations

import collections
import json
import os
import random
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conftest import logist_forked as logist_process, processes_with
from forked import ForkedPopen
from logist.replay.scripted import LLMServer, Reply, answer
from logist.store.session import JobFiles

pytestmark = [pytest.mark.slow, pytest.mark.scale]

FULL = os.environ.get("LOGIST_SCALE") == "full"
#: Kills that must land for each kind of job (four kinds).
KILLS_PER_KIND = 75 if FULL else 6

#: Where kills must have landed in each job, besides their count (:func:`landed_in` names them).
MUST_LAND = {
    "commands": {"a command or agent running"},
    "checks": {"a run of the job's checks"},
    "agent": {"a command or agent running"},
    "decide": {"logist serve deciding (the command a person approved (approve-command))",
               "a runner while logist serve decides"},
}

#: The command a ``commands`` answer runs, and the one a ``decide`` answer asks a person to approve.
COMMAND = "sleep 0.3; date >> notes/commands.txt; ls notes | wc -l"
HELD = "sleep 0.4; date >> held.txt"
#: The ``checks`` job's check: slow enough for kills to land in it.
CHECK = "sleep 0.4; test -d notes"

#: The coding agent: two calls through the gateway with a pause before each, each call's id
#: written to ``seen`` once its answer arrived (what the agent saw end must be on record).
AGENT_PROGRAM = textwrap.dedent('''\
    import json, os, sys, time, urllib.request
    base, token = os.environ["OPENAI_BASE_URL"], os.environ["OPENAI_API_KEY"]
    seen = os.path.join(os.path.dirname(os.path.abspath(sys.argv[0])), "seen")
    run = os.urandom(6).hex()  # its pid repeats: it runs in a PID namespace of its own
    for number in range(2):
        time.sleep(0.15)
        call = "agent-call %s-%d" % (run, number)
        body = json.dumps({"model": "scripted", "messages": [{"role": "user", "content": call}]})
        request = urllib.request.Request(base + "/chat/completions", data=body.encode(),
                                         headers={"Authorization": "Bearer " + token,
                                                  "Content-Type": "application/json"})
        urllib.request.urlopen(request).read()
        with open(seen, "a") as handle:
            handle.write(call + "\\n")
    os.makedirs("notes", exist_ok=True)
    with open("notes/agent-%s.txt" % run, "w") as handle:
        handle.write("agent's note\\n" * 10)
    time.sleep(0.1)
    print(json.dumps({"action": "COMPLETED", "evidence_files": [], "summary_for_supervisor": "wrote a note"}))
    ''')
AGENT_CALL = re.compile(r"agent-call [0-9a-f]+-\d")
SERVE_URL = re.compile(r"at http://127\.0\.0\.1:(\d+)/\?token=(\S+)")


class Storm(LLMServer):
    """The model of all four jobs: what it answers depends on the job (the
    Idempotency-Key's prefix) and on whose turn it is (the job's manifest,
    written before the call). Every request is counted by its key."""

    def __init__(self, jobs: Path):
        super().__init__()
        self.jobs = jobs
        self.keys: collections.Counter = collections.Counter()
        self.agent_calls: collections.Counter = collections.Counter()
        self.lock = threading.Lock()

    def reply_for(self, body: dict, headers: dict) -> Reply:
        text = json.dumps(body.get("messages", [])[-1:])
        agent_call = AGENT_CALL.search(text)
        if agent_call:
            with self.lock:
                self.agent_calls[agent_call.group(0)] += 1
            return Reply("ok", pieces=3, piece_delay=0.02)
        key = {k.lower(): v for k, v in headers.items()}.get("idempotency-key", "")
        with self.lock:
            self.keys[key] += 1
            n = sum(self.keys.values())
        job = key.split("@", 1)[0]
        role = json.loads((self.jobs / job / "job_manifest.json").read_text())["turn"]["role"]
        changes = [{"path": f"notes/n{n:05d}.txt", "content": f"note {n}\n" * 20}]
        if role == "Supervisor":
            content = answer("RETRY", summary=f"once more {n}")
        elif job == "commands":
            content = (answer("CMD", command=COMMAND, thought=f"note {n:05d}", file_changes=changes)
                       if random.random() < 0.5 else answer("MESSAGE", message=f"note {n:05d}", file_changes=changes))
        elif job == "checks":
            content = answer("COMPLETED", summary=f"note {n:05d}", file_changes=changes)
        else:  # decide
            content = (answer("ASK", question=f"which note {n:05d}?") if random.random() < 0.5
                       else answer("CMD", command=HELD, thought=f"held {n:05d}"))
        return Reply(content, pieces=6, piece_delay=0.02)


def _files(job: JobFiles) -> tuple[dict, list[dict]]:
    """Manifest and entries with a plain json.load (the test fails here on any unparseable file)."""
    with open(job.manifest_path, encoding="utf-8") as handle:
        manifest = json.load(handle)
    with open(job.history_path, encoding="utf-8") as handle:
        entries = json.load(handle)["interactions"]
    return manifest, entries


def _lock_is_free(job: JobFiles) -> bool:
    from logist.errors import JobBusyError

    try:
        with job.lock(0):
            return True
    except JobBusyError:
        return False


def _lock_holders(job: JobFiles) -> list[int]:
    """The pids /proc/locks gives for the locks on the job's lock file: the
    process that took each (a lock a child inherited still names its parent)."""
    try:
        inode = os.stat(job.lock_path).st_ino
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return []
    return [int(fields[4]) for fields in (line.split() for line in lines)
            if len(fields) > 5 and fields[1] != "->" and fields[5].rsplit(":", 1)[-1] == str(inode)]


def _lock_left_held(job: JobFiles, ended: tuple[int, ...]) -> str:
    """Why the job's lock is left held after the processes ``ended`` ended, or "". Held
    in the name of one of them (a process it started inherited it) or of no
    live process, it is left held; a live process of the test's that holds
    it (another command on the job, at work) is waited for up to 2 s."""
    deadline = time.monotonic() + 2.0
    while not _lock_is_free(job):
        holders = _lock_holders(job)
        left = [pid for pid in holders if pid in ended or not os.path.exists(f"/proc/{pid}")]
        if left or time.monotonic() > deadline:
            named = {pid: (Path(f"/proc/{pid}/status").read_text().split("\n", 1)[0]
                           if os.path.exists(f"/proc/{pid}") else "gone") for pid in holders}
            return f"held in the name of {named or 'nobody /proc/locks shows'} (the processes that ended: {ended})"
        time.sleep(0.05)
    return ""


def landed_in(job: JobFiles) -> str:
    """Where the step a kill ended was, as its step journal left it (nothing repaired yet)."""
    try:
        journal = json.loads(job.journal_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return "outside a step (starting, or recorded)"
    if journal.get("doing"):
        return journal["doing"]
    if journal.get("command_pgid") is not None:
        return "a command or agent running"
    return f"a call, {journal['phase']}" if journal.get("request") else journal["phase"]


def _journal_mark(job: JobFiles) -> tuple:
    """Which step journal is there (each is written whole and renamed into place: a new file)."""
    try:
        info = os.stat(job.journal_path)
    except FileNotFoundError:
        return ()
    return info.st_ino, info.st_mtime_ns


def _after_a_kill(job: JobFiles, before: list[dict], what: str, *ended: int) -> None:
    manifest, entries = _files(job)
    assert entries[: len(before)] == before, f"{what}: an earlier entry was lost or changed"
    assert [e["sequence"] for e in entries] == list(range(1, len(entries) + 1)), f"{what}: an entry duplicated or lost"
    held = _lock_left_held(job, ended)
    assert not held, f"{what}: the job's lock is {held}"
    # A kill after an entry was written whole and before its append journal was removed: a reader
    # shows the entries the journal says were there before it (the next command keeps the new one).
    appending = job.history_append_path.exists()
    shown = entries[-1]["sequence"] - (1 if appending and len(entries) > 1 else 0)
    assert JobFiles(job.dir).manifest().last_sequence in (shown, entries[-1]["sequence"]), what
    assert manifest["last_sequence"] in (entries[-1]["sequence"], entries[-1]["sequence"] - 1), what


class Kinds:
    """The four kill loops; each runs in a thread of its own on its own job."""

    def __init__(self, jobs: Path, server: Storm, seed: int):
        self.jobs, self.server = jobs, server
        self.random = random.Random(seed)
        self.landed: collections.Counter = collections.Counter()
        self.where: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
        self.serve: dict = {}

    def job(self, name: str) -> JobFiles:
        return JobFiles(self.jobs / name)

    def start_step(self, name: str, forked: bool = True) -> subprocess.Popen:
        """A ``logist job step`` of job ``name`` (tests/forked.py), or ``python -m logist`` started
        as a program is (``forked`` False: it takes about half a second before it is at work)."""
        return (ForkedPopen if forked else subprocess.Popen)(
            [sys.executable, "-m", "logist", "job", "step", "--oneshot", name, "--base-url", self.server.base_url],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ))

    def kill_at(self, child: subprocess.Popen, seconds: float) -> bool:
        """SIGKILL ``child`` after ``seconds`` unless it ended first; True when the kill landed."""
        try:
            child.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            os.kill(child.pid, signal.SIGKILL)
            child.wait(timeout=30)
        _, child.err = child.communicate()
        assert "Traceback" not in child.err and "internal error" not in child.err, child.err
        return child.returncode == -signal.SIGKILL

    def kill_in_a_step(self, child: subprocess.Popen, job: JobFiles, rest: float, left: tuple) -> bool:
        """SIGKILL ``child`` at a random time within ``rest`` seconds of its step's journal
        written (the step begun: its call, its command, its agent, its checks; ``left``: the
        journal an earlier kill left, :func:`_journal_mark`, which is not this step's), unless it
        ended first; True when the kill landed. On a loaded machine a kill timed from the
        process's start lands mostly while Python starts."""
        while child.poll() is None and _journal_mark(job) in (left, ()):
            time.sleep(0.005)
        return self.kill_at(child, self.random.uniform(0.0, rest))

    def decide_by_hand(self, name: str) -> None:
        """What a person does when a kill left the job waiting (a held command, a question)."""
        manifest = JobFiles(self.jobs / name).manifest()
        if manifest.pending_command:
            verb = [self.random.choice(["approve-command", "skip-command"])]
        elif manifest.question:
            verb = ["answer", "go on"]
        else:
            verb = ["resubmit", "--feedback", "go on"]
        done = logist_process("job", verb[0], name, *verb[1:])
        assert done.returncode in (0, 3) and "Traceback" not in done.stderr, done.stderr

    def runner_loop(self, name: str, step_seconds: float, rest: float) -> None:
        """Steps of job ``name``, each killed at a random time: a fifth from the process's start
        to about its end, the others within ``rest`` seconds of the step's beginning."""
        job = self.job(name)
        tries = 0
        while self.landed[name] < KILLS_PER_KIND or MUST_LAND[name] - set(self.where[name]):
            tries += 1
            assert tries < KILLS_PER_KIND * 6 + 40, f"{name}: only {self.landed[name]} kills landed in {tries} steps"
            _, before = _files(job)
            left = _journal_mark(job)
            started = time.monotonic()
            child = self.start_step(name)
            if self.random.random() < 0.2:
                landed = self.kill_at(child, self.random.uniform(0.05, 1.1) * step_seconds)
            else:
                landed = self.kill_in_a_step(child, job, rest, left)
            if landed:
                self.landed[name] += 1
                self.where[name][landed_in(job)] += 1
            else:
                if child.returncode == 0:
                    step_seconds = 0.7 * step_seconds + 0.3 * (time.monotonic() - started)
                assert child.returncode in (0, 3), f"{name}: rc={child.returncode}: {child.err}"
            _after_a_kill(job, before, f"{name}, kill {self.landed[name]}", child.pid)
            status = JobFiles(job.dir).manifest()
            if str(status.status) in ("INPUT_REQUIRED", "INTERVENTION_REQUIRED", "APPROVAL_REQUIRED"):
                self.decide_by_hand(name)

    # -- decisions through logist serve --

    def start_serve(self) -> None:
        process = ForkedPopen([sys.executable, "-m", "logist", "serve", "--port", "0"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=dict(os.environ))
        found = SERVE_URL.search(process.stdout.readline())
        assert found, process.stderr.read()
        self.serve.update(process=process, port=int(found.group(1)), token=found.group(2))

    def post(self, name: str, action: str, body: dict) -> None:
        """A decision through the HTTP API, as a program sends it (the server may be killed under it)."""
        port = self.serve["port"]
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/api/v1/jobs/{name}/decisions/{action}", data=json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {self.serve['token']}", "Content-Type": "application/json",
                     "Origin": f"http://127.0.0.1:{port}"})
        try:
            urllib.request.urlopen(request, timeout=60).read()
        except urllib.error.HTTPError as refused:  # 409: the job moved on or another command holds it
            assert refused.code == 409, refused.read()
        except OSError:  # the server was killed mid-request
            pass

    def decide_loop(self, name: str) -> None:
        """``decide``: a runner brings the job to a person's decision (its kills
        as above); the decision goes through logist serve, which is killed in
        the middle of it about half the time; now and then a runner is started
        and killed while the server decides."""
        job = self.job(name)
        self.start_serve()
        tries = 0
        while self.landed[name] < KILLS_PER_KIND or MUST_LAND[name] - set(self.where[name]):
            tries += 1
            assert tries < KILLS_PER_KIND * 8 + 60, f"{name}: only {self.landed[name]} kills landed in {tries} tries"
            _, before = _files(job)
            manifest = JobFiles(job.dir).manifest()
            left = _journal_mark(job)
            if str(manifest.status) != "INPUT_REQUIRED":
                child = self.start_step(name)
                # Killed a third of the time: the others bring the job to a decision.
                if self.kill_in_a_step(child, job, 0.5 if self.random.random() < 0.35 else 120, left):
                    self.landed[name] += 1
                    self.where[name][landed_in(job)] += 1
                _after_a_kill(job, before, f"{name}, runner kill", child.pid)
                continue
            if manifest.pending_command:
                action, body = self.random.choice(["approve-command", "approve-command", "skip-command"]), {}
            else:
                action, body = "answer", {"text": "the first"}
            body["at"] = manifest.last_sequence
            posting = threading.Thread(target=self.post, args=(name, action, body))
            posting.start()
            served = self.serve["process"]
            kill_server = self.random.random() < 0.5
            # Started as a program is: the kill within half a second lands (a forked one would be told at
            # once that the job is busy while the server decides, and end before it).
            runner = self.start_step(name, forked=False) if self.random.random() < 0.3 else None
            if kill_server:
                deadline = time.monotonic() + 5
                while _journal_mark(job) == left and time.monotonic() < deadline and posting.is_alive():
                    time.sleep(0.005)
                time.sleep(self.random.uniform(0.0, 0.5))
                if served.poll() is None:
                    os.kill(served.pid, signal.SIGKILL)
                    served.wait(30)
                    self.landed[name] += 1
                    self.where[name][f"logist serve deciding ({landed_in(job)})"] += 1
            if runner is not None and self.kill_at(runner, self.random.uniform(0.05, 0.5)):
                self.landed[name] += 1
                self.where[name]["a runner while logist serve decides"] += 1
            posting.join(60)
            assert not posting.is_alive(), "logist serve did not answer a decision"
            _after_a_kill(job, before, f"{name}, {action} through serve",
                          *(p.pid for p in (served, runner) if p is not None and p.poll() is not None))
            if served.poll() is not None:
                out = served.stderr.read()
                assert "Traceback" not in out, out
                self.start_serve()
        self.stop_serve()

    def stop_serve(self) -> None:
        served = self.serve.pop("process", None)
        if served is not None and served.poll() is None:
            served.send_signal(signal.SIGINT)
            served.wait(30)


def _agent_bin(tmp_path: Path) -> Path:
    folder = tmp_path / "agent-bin"
    folder.mkdir()
    program = folder / "my-agent"
    program.write_text(f"#!{sys.executable}\n" + AGENT_PROGRAM)
    program.chmod(0o755)
    return folder


def _create(name: str, *options: str) -> None:
    created = logist_process("job", "create", name, "-o", f"Write notes ({name})", "--max-steps", "100000",
                             "--max-retries-in-a-row", "100000", "--no-current", *options)
    assert created.returncode == 0, created.stderr


def test_a_storm_of_kills_over_commands_checks_agents_and_serve_decisions(jobs, tmp_path, monkeypatch):
    folder = _agent_bin(tmp_path)
    monkeypatch.setenv("PATH", f"{folder}:{os.environ['PATH']}")
    (jobs.path / "roles").mkdir(exist_ok=True)
    (jobs.path / "roles" / "Coder.json").write_text(json.dumps({
        "name": "Coder", "description": "a coding agent", "instructions": "Do the job's work in the workspace.",
        "llm_model": "scripted", "agent": "command", "agent_command": ["my-agent", "{prompt_file}"]}))
    _create("commands", "--command-policy", "allow", "--allow", COMMAND)
    _create("checks", "--check", CHECK)
    _create("agent", "--worker", "Coder")
    _create("decide", "--command-policy", "ask")
    names = ["commands", "checks", "agent", "decide"]
    started = time.monotonic()
    with Storm(jobs.path) as server:
        kinds = Kinds(jobs.path, server, seed=18)
        with ThreadPoolExecutor(len(names)) as pool:
            done = [pool.submit(kinds.runner_loop, "commands", 2.0, 0.6), pool.submit(kinds.runner_loop, "checks", 2.0, 0.6),
                    pool.submit(kinds.runner_loop, "agent", 3.0, 1.5), pool.submit(kinds.decide_loop, "decide")]
            for future in done:
                future.result()
        # A last step of each runs through (repairing what its last kill left); then fsck finds nothing to do.
        for name in names:
            final = logist_process("job", "step", "--oneshot", name, "--base-url", server.base_url)
            assert final.returncode in (0, 3) and "Traceback" not in final.stderr, final.stderr
        keys, agent_calls = dict(server.keys), dict(server.agent_calls)
    print(f"{sum(kinds.landed.values())} kills landed in {time.monotonic() - started:.1f} s:",
          json.dumps(kinds.where, indent=1))

    for name in names:
        assert kinds.landed[name] >= KILLS_PER_KIND, name
        job = JobFiles(jobs.path / name)
        fsck = logist_process("job", "fsck", name, "--json")
        assert fsck.returncode == 0, fsck.stdout + fsck.stderr
        manifest, entries = _files(job)
        assert [e["sequence"] for e in entries] == list(range(1, len(entries) + 1))
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=job.workspace, capture_output=True,
                              text=True).stdout.strip()
        assert manifest["workspace_commit"] == head, name
        git_fsck = subprocess.run(["git", "fsck", "--no-progress"], cwd=job.workspace, capture_output=True, text=True)
        assert git_fsck.returncode == 0, git_fsck.stdout + git_fsck.stderr

    # No answer paid for twice: a key again only after a call of that key of unknown outcome.
    import logist

    opened = logist.open(jobs.path)
    unknown: collections.Counter = collections.Counter()
    recorded_agent_calls: collections.Counter = collections.Counter()
    for name in names:
        job = opened.get(name)
        for entry in job.entries():
            if entry.kind == "agent_run" and entry.agent is not None:
                for call in entry.agent.calls:
                    text = (jobs.path / name / call.file).read_text(encoding="utf-8")
                    recorded_agent_calls.update(set(AGENT_CALL.findall(text)))
            if entry.request is not None and entry.response is not None and entry.response.status == "UNKNOWN":
                full = job.entry_in_full(entry.sequence)
                unknown[full.data["request"]["metadata"]["idempotency_key"]] += 1
    paid_twice = {key: n for key, n in keys.items() if n > 1 + unknown[key]}
    assert paid_twice == {}, f"answers paid for more than once: {paid_twice}"
    assert sum(unknown.values()) >= 1, "no kill landed while a call was in flight"

    # Every gateway call of an agent step recorded once, every one the agent saw answered.
    seen = set((folder / "seen").read_text().split("\n")) - {""}
    assert [call for call, n in recorded_agent_calls.items() if n > 1] == [], "an agent's call recorded twice"
    assert sorted(seen - set(recorded_agent_calls)) == [], "a call the agent saw answered is not recorded"
    assert set(recorded_agent_calls) <= set(agent_calls)
    assert [call for call, n in agent_calls.items() if n > 1] == [], "the gateway sent an agent's call twice"
    # A group killed with SIGKILL, or a PID namespace whose first process was, ends asynchronously: a killed
    # process can show in /proc for a moment after the kill returned. One that was never killed stays: this fails.
    def left() -> list[int]:
        return [pid for marker in (str(folder / "my-agent"), "notes/commands.txt", "held.txt")
                for pid in processes_with(marker)]

    deadline = time.monotonic() + 5
    while left() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert left() == []
