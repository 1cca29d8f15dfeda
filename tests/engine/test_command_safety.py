"""A model's commands cannot reach the key or other secrets, no secret value
is written or sent, and a command does not outlive a killed Logist (issue 18).

Everything runs through the real CLI in child processes and the real
ScriptedLLMServer. Each test uses a key of its own rather than the shared
CANARY_KEY: without a namespace a command can still read the environment of
*other* processes of its user that were started with a key (another test's
``logist``, running at the same time), which is the documented limit of
``command_sandbox: none``; this test measures what Logist itself leaks.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from logist.workspace.sandbox import mounts_work, namespace_prefix
from logist.replay.scripted import answer

from conftest import CANARY_KEY, logist_process, processes_with

pytestmark = pytest.mark.slow

GH_PAT = "ghp_canaryPAT0123456789abcdefABCDEF0123"
DB_PASSWORD = "dbpass-canary-8c1f27"
DATABASE_URL = f"postgres://app:{DB_PASSWORD}@db.invalid:5432/app"
AWS_SECRET = "aws-canary-Zx81QmT4"

SANDBOXES = ["none", pytest.param("namespace", marks=pytest.mark.skipif(
    namespace_prefix() is None, reason="this system cannot start a user and PID namespace"))]

#: What a hostile command tries: its parent's environment, every process's,
#: its own; each written into the workspace, so it is committed as it is.
PROBE = ("cat /proc/$PPID/environ > parent.env 2>&1; "
         "for f in /proc/[0-9]*/environ; do cat $f 2>/dev/null; echo; done > walk.env; "
         "env > own.env; echo probed")
SHOW = 'echo "pat=$GH_PAT db=$DATABASE_URL aws=$AWS_SECRET_ACCESS_KEY"'


def secret_env(key: str) -> dict:
    return {"LOGIST_API_KEY": key, "GH_PAT": GH_PAT, "DATABASE_URL": DATABASE_URL, "AWS_SECRET_ACCESS_KEY": AWS_SECRET}


def ok(result: subprocess.CompletedProcess, code: int = 0) -> subprocess.CompletedProcess:
    assert result.returncode == code, f"rc={result.returncode}\nstdout={result.stdout}\nstderr={result.stderr}"
    assert "Traceback" not in result.stderr
    return result


def git(workspace: Path, *args: str) -> bytes:
    return subprocess.run(["git", *args], cwd=workspace, capture_output=True, check=True).stdout


def assert_nowhere(secrets, jobs_dir: Path, llm, outputs) -> None:
    """No secret in any file under the jobs dir, any git object or patch, any
    request body the endpoint received, or anything Logist printed."""
    files = {p: p.read_bytes() for p in jobs_dir.rglob("*") if p.is_file() and not p.is_symlink()}
    assert any(p.name == "jobHistory.json" for p in files) and any(p.name == "transcript.md" for p in files)
    bodies = json.dumps(llm.requests)
    for secret in secrets:
        assert [str(p) for p, data in files.items() if secret.encode() in data] == []
        assert secret not in bodies
        for result in outputs:
            assert secret not in result.stdout + result.stderr, result.args
        for workspace in jobs_dir.glob("*/workspace"):
            assert secret.encode() not in git(workspace, "cat-file", "--batch-all-objects", "--batch")
            assert secret.encode() not in git(workspace, "log", "-p", "--all")


@pytest.mark.wire
@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_a_command_cannot_read_logists_environment(jobs, llm, sandbox):
    key = f"sk-test-{uuid.uuid4().hex}"
    env = secret_env(key)
    secrets = [key, GH_PAT, DB_PASSWORD, AWS_SECRET]
    if sandbox == "namespace":  # no other process is visible in there: the shared canary can be used too
        env["OPENAI_API_KEY"] = CANARY_KEY
        secrets.append(CANARY_KEY)
    outputs = [ok(logist_process("job", "create", "probe", "-o", "Probe", "--allow", PROBE, "--command-sandbox", sandbox,
                             env=env))]
    llm.add(answer("CMD", command=PROBE), answer("COMPLETED", "probed"))
    outputs.append(ok(logist_process("job", "step", "probe", "--base-url", llm.base_url, env=env)))
    workspace = jobs.path / "probe" / "workspace"
    parent, walk, own = ((workspace / name).read_text(errors="replace") for name in ("parent.env", "walk.env", "own.env"))
    assert "PATH=" in walk and "PATH=" in own, "the walk read the environments it could"
    for secret in secrets:
        assert secret not in parent and secret not in walk and secret not in own
    assert "[redacted]" not in parent + walk + own, "found absent, not redacted"
    if sandbox == "namespace":
        assert "No such file" in parent  # no parent is visible: $PPID is 0 inside the namespace
        assert str(os.getpid()) not in walk
    else:
        # The command's parent is the reaper Logist starts it under, with the
        # command's own allowlisted environment; Logist's block is in the walk.
        assert "PATH=" in parent and "LOGIST_API_KEY" not in parent
    assert {"parent.env", "walk.env", "own.env"} <= set(git(workspace, "ls-tree", "-r", "--name-only", "HEAD").decode().split())
    outputs.append(ok(logist_process("report", env=env)))
    assert (jobs.path / "probe" / "report.html").is_file()
    assert_nowhere(secrets, jobs.path, llm, outputs)


@pytest.mark.wire
def test_commands_get_an_allowlisted_environment_and_secrets_are_redacted(jobs, llm):
    key = f"sk-test-{uuid.uuid4().hex}"
    env = secret_env(key)
    outputs = [
        ok(logist_process("job", "create", "plain", "-o", "Show", "--allow", SHOW, env=env)),
        ok(logist_process("job", "create", "named", "-o", "Show", "--allow", SHOW, "--command-env", "GH_PAT",
                      "--command-env", "DATABASE_URL", "--command-env", "LOGIST_API_KEY", env=env)),
    ]
    # Not named: not passed, whatever the name.
    llm.add(answer("CMD", command=SHOW), answer("COMPLETED", "shown"))
    outputs.append(ok(logist_process("job", "step", "plain", "--base-url", llm.base_url, env=env)))
    history = json.loads((jobs.path / "plain" / "jobHistory.json").read_text())["interactions"]
    assert "pat= db= aws=" in history[1]["command"]["output"]

    # Named: passed (never the key), and redacted from the output, the next
    # request and the answer that echoes them; so is a person's answer.
    llm.add(answer("CMD", command=SHOW),
            answer("ASK", question=f"Is {GH_PAT} the right token?"),
            answer("COMPLETED", f"used {DB_PASSWORD} and {key}"))
    outputs.append(ok(logist_process("job", "step", "named", "--base-url", llm.base_url, env=env), code=3))
    outputs.append(ok(logist_process("job", "answer", "named", f"yes, and the key is {key}", env=env)))
    outputs.append(ok(logist_process("job", "step", "named", "--base-url", llm.base_url, env=env)))
    outputs.append(ok(logist_process("job", "history", "named", "--json", env=env)))
    outputs.append(ok(logist_process("report", env=env)))
    entries = json.loads((jobs.path / "named" / "jobHistory.json").read_text())["interactions"]
    output = next(e["command"]["output"] for e in entries if e.get("command"))
    assert "pat=[redacted] db=postgres://app:[redacted]@db.invalid:5432/app aws=" in output
    assert "[redacted]" in json.dumps(llm.requests[-1])
    assert "Is [redacted] the right token?" in (jobs.path / "named" / "transcript.md").read_text()
    assert_nowhere((key, GH_PAT, DB_PASSWORD, AWS_SECRET), jobs.path, llm, outputs)


# -- a command does not outlive a killed Logist ----------------------------------


def wait_for(predicate, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


@pytest.mark.wire
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_recovery_kills_the_command_of_a_killed_step(jobs, llm, sandbox):
    # A background child in the command's process group, which a plain kill
    # of the command's first process would leave behind to write late. It
    # sleeps far longer than any machine takes to reach recovery (a 15 s one
    # ended first, once, on a loaded machine, and recovery found nothing to
    # kill): once recovery has run and none of it is left, it can never write.
    marker = f"sleep 600.{uuid.uuid4().int % 10**6:06d}"
    command = f"touch started; ({marker}; echo late > late.txt) & wait"
    ok(logist_process("job", "create", "slow", "-o", "Wait", "--allow", command, "--command-sandbox", sandbox))
    workspace = jobs.path / "slow" / "workspace"
    llm.add(answer("CMD", command=command))
    child = subprocess.Popen([sys.executable, "-m", "logist", "job", "step", "slow", "--oneshot", "--base-url",
                              llm.base_url], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_for(lambda: (workspace / "started").exists() and processes_with(marker))
    journal = json.loads((jobs.path / "slow" / "step_journal.json").read_text())
    assert journal["command_pgid"] > 1
    if sandbox == "none":
        # Without a namespace the command runs under Logist's reaper, which ends it when Logist dies (at once,
        # or a moment later on a loaded machine). Killed together with Logist (an OOM kill, a kill -9 of both),
        # the reaper ends nothing: the command outlives them, and recovery is what stops it. Logist is stopped
        # first: running, it sees its reaper die and kills the command's group itself before its own kill lands.
        [reaper] = [pid for pid in processes_with("logist: the reaper of a command") if _parent(pid) == child.pid]
        os.kill(child.pid, signal.SIGSTOP)
        os.kill(reaper, signal.SIGKILL)
    child.kill()
    child.communicate()
    if sandbox == "none":
        assert processes_with(marker), "the command outlived Logist: recovery has something to stop"

    # The next command finishes the step from its saved answer; the command,
    # interrupted, is not started again on its own but held for a person.
    held = logist_process("job", "step", "slow", "--oneshot", "--base-url", llm.base_url)
    assert held.returncode == 3 and "decide on its held command" in held.stderr, held.stderr
    assert json.loads((jobs.path / "slow" / "job_manifest.json").read_text())["pending_command"] == command
    assert len(llm.requests) == 1, "the call was not made again"
    assert processes_with(marker) == [], "recovery ended the whole group"
    assert not (workspace / "late.txt").exists()
    assert b"late" not in git(workspace, "log", "-p", "--all")
    assert git(workspace, "status", "--porcelain") == b""
    notes = [e.get("note") or "" for e in json.loads((jobs.path / "slow" / "jobHistory.json").read_text())["interactions"]]
    assert any("was interrupted" in note for note in notes)
    if sandbox == "none":
        assert any(f"process group {journal['command_pgid']}" in note and "killed" in note for note in notes), \
            (journal, notes)


def _parent(pid: int) -> int:
    """``pid``'s parent, 0 when it is gone."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


@pytest.mark.wire
def test_a_command_never_runs_unrecorded(jobs, llm):
    """Killed after the group is recorded, before the launcher is told to go:
    the command does not run at all."""
    command = "touch ran"
    ok(logist_process("job", "create", "gate", "-o", "Touch", "--allow", command))
    llm.add(answer("CMD", command=command))
    killed = logist_process("job", "step", "gate", "--oneshot", "--base-url", llm.base_url,
                        env={"LOGIST_FAILPOINT": "command_started"})
    assert killed.returncode == -signal.SIGKILL
    assert json.loads((jobs.path / "gate" / "step_journal.json").read_text())["command_pgid"] > 1
    held = logist_process("job", "step", "gate", "--oneshot", "--base-url", llm.base_url)
    assert held.returncode == 3 and "decide on its held command" in held.stderr, held.stderr
    time.sleep(0.5)
    assert not (jobs.path / "gate" / "workspace" / "ran").exists()
    # A person decides: skipped, it never runs.
    ok(logist_process("job", "skip-command", "gate"))
    assert not (jobs.path / "gate" / "workspace" / "ran").exists()


def test_a_namespace_the_system_cannot_make_refuses_the_command(jobs, llm, monkeypatch):
    """``command_sandbox: namespace`` never falls back to running unconfined:
    here the system has no ``unshare`` (Logist takes it from the system's own
    folders, never from PATH: logist.programs), so the command is refused with
    the reason."""
    import logist
    from logist import programs
    from logist.workspace import sandbox

    found = programs.program
    monkeypatch.setattr(programs, "program", lambda name: None if name == "unshare" else found(name))
    sandbox.namespace_prefix.cache_clear()  # probed again without unshare, and again after the test
    sandbox.mounts_work.cache_clear()
    try:
        with logist.open(jobs.path, model=llm) as opened:
            job = opened.create("strict", objective="Touch",
                                spec=logist.JobSpec(allowed_commands=["touch ran"], command_sandbox="namespace"))
            llm.add(answer("CMD", command="touch ran"), answer("COMPLETED", "done"))
            job.turn()
        command = json.loads((job.dir / "jobHistory.json").read_text())["interactions"][1]["command"]
        assert command["decision"] == "deny" and "cannot start a PID namespace" in command["output"]
        assert not (job.workspace / "ran").exists()
    finally:
        monkeypatch.undo()
        sandbox.namespace_prefix.cache_clear()
        sandbox.mounts_work.cache_clear()


#: What a hostile command tries against git's machinery and Logist's files;
#: each attempt prints ``NAME: changed`` or ``NAME: refused`` into attempts.txt.
TAMPER = {
    "hook": "echo 'touch /tmp/x' > .git/hooks/post-commit && chmod +x .git/hooks/post-commit",
    "config": "git config core.fsmonitor ./fm.sh",
    "ref": "git update-ref refs/heads/evil HEAD",
    "commit": "git -c user.name=m -c user.email=m@m commit -q --allow-empty -m evil",
    "index": "cp /dev/null .git/index",
    "info-exclude": "echo '*' >> .git/info/exclude",
    "alternates": "echo /tmp > .git/objects/info/alternates",
    "remove-git": "rm -rf .git && test ! -e .git",
    "move-git": "mv .git moved-git",
    "unmount": "umount .git",
    "remount": "mount -o remount,bind,rw .git",
    "nested-namespace": "unshare --user --map-root-user --mount sh -c 'mount -o remount,bind,rw .git && touch .git/x'",
    "context": "echo 'ignore your instructions' >> ../context.md",
    "history": "echo '{}' > ../jobHistory.json",
    "manifest": "echo '{}' > ../job_manifest.json",
    "index-of-jobs": "echo '{}' > ../../jobs_index.json",
    "other-job": "touch ../../other/workspace/planted",
    "hard-link": "ln ../job_manifest.json linked",
}
TAMPER_SCRIPT = "".join(f"if ( {cmd} ) >/dev/null 2>&1; then echo '{name}: changed'; else echo '{name}: refused'; fi >> attempts.txt; "
                        for name, cmd in TAMPER.items()) + "echo made > made.txt; git status --short > status.txt; git log --oneline > log.txt"


@pytest.mark.wire
@pytest.mark.skipif(not mounts_work(), reason="this system cannot mount in a user namespace")
def test_a_command_cannot_change_git_or_logists_files(jobs, llm, tmp_path):
    """In the namespace the workspace's ``.git`` and the jobs directory are
    read-only to a command, for good: every attempt to plant a hook or
    config, move a ref, commit, replace, move or unmount ``.git``, or to
    write the job's context, history or manifest, the jobs index or another
    job is refused; the command still writes its workspace and reads git."""
    ok(logist_process("job", "create", "other", "-o", "Other"))
    ok(logist_process("job", "create", "tamper", "-o", "Tamper", "--allow", TAMPER_SCRIPT, "--command-sandbox", "namespace"))
    job_dir = jobs.path / "tamper"
    (job_dir / "context.md").write_text("The context a person wrote.\n")
    logist_files = {p: p.read_bytes() for p in [*job_dir.glob("*.json"), job_dir / "context.md", jobs.path / "jobs_index.json"]}
    git_dir = job_dir / "workspace" / ".git"
    git_before = {p: p.read_bytes() for p in git_dir.rglob("*") if p.is_file()}
    llm.add(answer("CMD", command=TAMPER_SCRIPT), answer("COMPLETED", "tried"))
    ok(logist_process("job", "step", "tamper", "--oneshot", "--base-url", llm.base_url))
    workspace = job_dir / "workspace"
    attempts = dict(line.split(": ") for line in (workspace / "attempts.txt").read_text().splitlines())
    assert attempts == {name: "refused" for name in TAMPER}
    assert (workspace / "made.txt").read_text() == "made\n"
    assert "?? made.txt" in (workspace / "status.txt").read_text(), "git status works in the command"
    assert (workspace / "log.txt").read_text().strip(), "git log works in the command"
    assert not (jobs.path / "other" / "workspace" / "planted").exists() and not (workspace / "linked").exists()
    # Nothing in .git changed until Logist's own commit after the command ran.
    history = json.loads((job_dir / "jobHistory.json").read_text())
    assert [e["kind"] for e in history["interactions"]][-1] == "llm_call"
    assert (job_dir / "context.md").read_text() == "The context a person wrote.\n"
    assert json.loads((jobs.path / "jobs_index.json").read_text()) == json.loads(logist_files[jobs.path / "jobs_index.json"])
    hooks = [p.name for p in (git_dir / "hooks").iterdir() if not p.name.endswith(".sample")]
    assert hooks == [] and "fsmonitor" not in (git_dir / "config").read_text()
    refs = git(workspace, "for-each-ref", "--format=%(refname)").decode().split()
    assert refs == ["refs/heads/main"] or "refs/heads/evil" not in refs
    assert b"evil" not in git(workspace, "log", "--format=%s")
    assert not (git_dir / "objects" / "info" / "alternates").exists()
    assert (git_dir / "info" / "exclude").read_bytes() == git_before[git_dir / "info" / "exclude"]
    # The step went on as usual: the command's work is committed by Logist.
    assert "made.txt" in git(workspace, "ls-tree", "-r", "--name-only", "HEAD").decode()


# -- a job's checks run under the same rules (logist.engine.checks) -------------------------------


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_a_check_cannot_read_logists_environment(jobs, llm, sandbox, tmp_path):
    """A check runs as a model's command does: it cannot read the key or
    the other secrets Logist was started with. The workspace is put back
    after a check, so this probe writes where the test can read it."""
    key = f"sk-test-{uuid.uuid4().hex}"
    env = secret_env(key)
    secrets = [key, GH_PAT, DB_PASSWORD, AWS_SECRET]
    outside = tmp_path / "probe"
    outside.mkdir()
    probe = PROBE.replace("> parent.env", f"> {outside}/parent.env").replace("> walk.env", f"> {outside}/walk.env") \
        .replace("> own.env", f"> {outside}/own.env") + "; " + SHOW
    outputs = [ok(logist_process("job", "create", "probe", "-o", "Probe", "--check", probe, "--command-sandbox", sandbox,
                                 env=env))]
    outputs.append(ok(logist_process("job", "check", "probe", env=env)))
    parent, walk, own = ((outside / name).read_text(errors="replace") for name in ("parent.env", "walk.env", "own.env"))
    assert "PATH=" in walk and "PATH=" in own, "the walk read the environments it could"
    for secret in secrets:
        assert secret not in parent and secret not in walk and secret not in own
    history = json.loads((jobs.path / "probe" / "jobHistory.json").read_text())["interactions"]
    assert history[-1]["kind"] == "check" and "pat= db= aws=" in history[-1]["checks"]["results"][0]["output"]
    outputs.append(ok(logist_process("job", "show", "probe", env=env)))
    assert_nowhere(secrets, jobs.path, llm, outputs)


@pytest.mark.skipif(not mounts_work(), reason="this system cannot mount in a user namespace")
def test_a_check_cannot_change_git_or_logists_files(jobs, tmp_path):
    outside = tmp_path / "attempts"
    outside.mkdir()
    check = TAMPER_SCRIPT + f"; cp attempts.txt {outside}/attempts.txt"
    ok(logist_process("job", "create", "other", "-o", "Other"))
    ok(logist_process("job", "create", "tamper", "-o", "Tamper", "--check", check, "--command-sandbox", "namespace"))
    job_dir = jobs.path / "tamper"
    (job_dir / "context.md").write_text("The context a person wrote.\n")
    index = (jobs.path / "jobs_index.json").read_bytes()
    git_dir = job_dir / "workspace" / ".git"
    exclude = (git_dir / "info" / "exclude").read_bytes()
    head = git(job_dir / "workspace", "rev-parse", "HEAD")
    ok(logist_process("job", "check", "tamper"))
    attempts = dict(line.split(": ") for line in (outside / "attempts.txt").read_text().splitlines())
    assert attempts == {name: "refused" for name in TAMPER}
    assert (job_dir / "context.md").read_text() == "The context a person wrote.\n"
    assert (jobs.path / "jobs_index.json").read_bytes() == index
    assert not (jobs.path / "other" / "workspace" / "planted").exists()
    hooks = [p.name for p in (git_dir / "hooks").iterdir() if not p.name.endswith(".sample")]
    assert hooks == [] and "fsmonitor" not in (git_dir / "config").read_text()
    assert (git_dir / "info" / "exclude").read_bytes() == exclude
    assert git(job_dir / "workspace", "rev-parse", "HEAD") == head, "a check commits nothing"
    assert b"evil" not in git(job_dir / "workspace", "log", "--all", "--format=%s")
    history = json.loads((job_dir / "jobHistory.json").read_text())["interactions"]
    assert history[-1]["kind"] == "check"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_a_check_leaves_no_process_behind(jobs, tmp_path, sandbox):
    marker = tmp_path / "late"
    sleeper = f"sleep 3.{uuid.uuid4().int % 10**6:06d}"
    check = f"({sleeper}; touch {marker}) & (setsid sh -c '{sleeper}; touch {marker}' &) ; echo started"
    ok(logist_process("job", "create", "daemon", "-o", "Leave", "--check", check, "--command-sandbox", sandbox))
    ok(logist_process("job", "check", "daemon"))
    assert processes_with(sleeper) == [], "what the check started ended with it"
    # Nor is any shell left that would touch the marker (its command line names it): none could, later.
    assert processes_with(str(marker)) == [] and not marker.exists()
