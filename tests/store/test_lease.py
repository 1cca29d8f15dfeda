"""A job's lease (``lease.json``): one runner owns a job for the length of a
run; a live lease makes other runners skip the job; an expired one, or one
whose process on this host is gone, is taken over."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta, timezone

import pytest

from logist.store.session import JobFiles, LEASE_NAME, describe
from logist.store import lease as leases
from logist.store.lease import LeaseHeld, acquire, holding


@contextlib.contextmanager
def sleeper():
    """A process of this host that sleeps, and its start time; killed and reaped after."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        yield child, leases.start_time(child.pid)
    finally:
        child.kill()
        child.wait()


def wait_until(condition, what: str) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def write_lease(job_dir, *, host: str, pid: int, seconds: float, started=None, ahead: float = 0) -> None:
    now = datetime.now(timezone.utc) + timedelta(seconds=ahead)
    expires = now + timedelta(seconds=seconds)
    data = {"host": host, "pid": pid, "engine": "ray", "task": "t-1", "token": "theirs",
            "renewed_at": now.isoformat(), "expires_at": expires.isoformat()}
    if started is not None:
        data["started"] = started
    # Whole, then renamed into place, as a runner's renewal is (logist.store.lease writes through
    # atomic_writer): a reader never meets it half-written, which it would take for no lease at all.
    written = job_dir / f"{LEASE_NAME}.test-{threading.get_ident()}"
    written.write_text(json.dumps(data))
    os.replace(written, job_dir / LEASE_NAME)


def test_a_lease_is_written_renewed_and_released(tmp_path):
    with holding(JobFiles(tmp_path), engine="threads", task="threads-1", ttl=0.3) as lease:
        first = JobFiles(tmp_path).read_lease()
        assert first["pid"] == os.getpid() and first["host"] == leases.this_host()
        assert first["engine"] == "threads" and first["task"] == "threads-1" and first["token"] == lease.token
        time.sleep(0.5)
        renewed = JobFiles(tmp_path).read_lease()
        assert renewed["expires_at"] > first["expires_at"], "the thread renews it"
        assert renewed["acquired_at"] == first["acquired_at"]
    assert not (tmp_path / LEASE_NAME).exists()
    assert describe(LEASE_NAME) is not None and describe(".lease.lock") is not None, "the job's README names them"


class renewing:
    """Another host's runner holding the lease and renewing it, as a live one does."""

    def __init__(self, job_dir, seconds: float = 30, every: float = 0.3, ahead: float = 0):
        self.job_dir, self.seconds, self.every, self.ahead = job_dir, seconds, every, ahead
        self.stop = threading.Event()

    def __enter__(self):
        write_lease(self.job_dir, host="another-host", pid=1, seconds=self.seconds, ahead=self.ahead)
        self.thread = threading.Thread(target=self._renew)
        self.thread.start()
        return self

    def _renew(self):
        while not self.stop.wait(self.every):
            write_lease(self.job_dir, host="another-host", pid=1, seconds=self.seconds, ahead=self.ahead)

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()


def test_a_live_lease_is_not_taken(tmp_path):
    with holding(JobFiles(tmp_path), engine="threads", task="a"):
        with pytest.raises(LeaseHeld, match=f"pid {os.getpid()}"):
            acquire(JobFiles(tmp_path), engine="threads", task="b")
    with renewing(tmp_path):
        started = time.monotonic()
        with pytest.raises(LeaseHeld, match="host another-host, pid 1 \\(ray task t-1\\)"):
            acquire(JobFiles(tmp_path), engine="serial", task="c")
        assert time.monotonic() - started < 10, "skipped once seen renewed, not after its expiry"
        assert JobFiles(tmp_path).read_lease()["token"] == "theirs", "left as it was"


def test_another_hosts_lease_that_is_not_renewed_is_taken_over_when_it_lapses(tmp_path):
    # Its runner (or its host) is gone: nothing renews it. It is watched, not
    # skipped, and taken over within one lease length (a batch rerun after its
    # driver crashed used to skip such jobs and exit 0 with them left).
    write_lease(tmp_path, host="another-host", pid=1, seconds=2)
    started = time.monotonic()
    lease = acquire(JobFiles(tmp_path), engine="serial", task="c")
    assert "expired" in lease.took_over and "another-host" in lease.took_over
    assert time.monotonic() - started < 2 + 5


def test_an_expired_lease_is_taken_over(tmp_path):
    write_lease(tmp_path, host="another-host", pid=1, seconds=-1)
    lease = acquire(JobFiles(tmp_path), engine="serial", task="c")
    assert "expired" in lease.took_over and "another-host" in lease.took_over
    assert JobFiles(tmp_path).read_lease()["token"] == lease.token


def test_a_dead_process_on_this_host_loses_its_lease_at_once(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    write_lease(tmp_path, host=leases.this_host(), pid=int(dead.stdout), seconds=600)
    lease = acquire(JobFiles(tmp_path), engine="ray", task="retry")
    assert "is gone" in lease.took_over


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="process states are read from /proc")
def test_a_zombie_holds_no_lease(tmp_path):
    # Killed but not yet reaped by its parent (this test): the state a Ray
    # worker is in when Ray retries its task at once. os.kill(pid, 0) still
    # succeeds on it; it runs nothing.
    with sleeper() as (child, started):
        write_lease(tmp_path, host=leases.this_host(), pid=child.pid, seconds=600, started=started)
        with pytest.raises(LeaseHeld):
            acquire(JobFiles(tmp_path), engine="ray", task="early")  # alive: its lease holds
        child.kill()
        wait_until(lambda: open(f"/proc/{child.pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z",
                   "the child never became a zombie")
        os.kill(child.pid, 0)  # what the old check asked: it "exists"
        lease = acquire(JobFiles(tmp_path), engine="ray", task="retry")
        assert f"its process {child.pid} on this host is gone" in lease.took_over


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="start times are read from /proc")
def test_a_live_process_that_started_at_another_time_holds_no_lease(tmp_path):
    # The lease's pid now names another process (the id was reused): the
    # start time it recorded differs from the live process's.
    with sleeper() as (child, started):
        write_lease(tmp_path, host=leases.this_host(), pid=child.pid, seconds=600, started=str(int(started) - 1))
        lease = acquire(JobFiles(tmp_path), engine="ray", task="retry")
        assert "started later" in lease.took_over
        assert JobFiles(tmp_path).read_lease()["started"] == leases.start_time(os.getpid()), "the new lease records its own"
        write_lease(tmp_path, host=leases.this_host(), pid=child.pid, seconds=600, started=started)
        with pytest.raises(LeaseHeld, match=f"pid {child.pid}"):
            acquire(JobFiles(tmp_path), engine="ray", task="other")


def test_a_runner_that_lost_its_lease_is_told(tmp_path):
    with holding(JobFiles(tmp_path), engine="threads", task="a", ttl=0.3) as lease:
        write_lease(tmp_path, host="another-host", pid=1, seconds=30)  # taken over while this one stalled
        assert lease.lost.wait(2)
    assert JobFiles(tmp_path).read_lease()["token"] == "theirs", "releasing does not remove another's lease"


def test_only_one_of_many_takes_a_free_job(tmp_path):
    won, lost = [], []
    start = threading.Barrier(8)

    def take(n: int) -> None:
        start.wait()
        try:
            won.append(acquire(JobFiles(tmp_path), engine="threads", task=str(n)))
        except LeaseHeld:
            lost.append(n)

    threads = [threading.Thread(target=take, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(won) == 1 and len(lost) == 7
    assert JobFiles(tmp_path).read_lease()["token"] == won[0].token


def test_a_runner_told_to_wait_takes_the_lease_when_it_is_over(tmp_path):
    # A job handed out again after its runner died waits for that runner's
    # lease to be over instead of skipping the job; not forever.
    with renewing(tmp_path):
        with pytest.raises(LeaseHeld, match=r"waited 0 s"):
            acquire(JobFiles(tmp_path), engine="ray", task="impatient", wait=0.2)
    write_lease(tmp_path, host="another-host", pid=1, seconds=1.0)
    started = time.monotonic()
    lease = acquire(JobFiles(tmp_path), engine="ray", task="retry", wait=10)
    assert "expired" in lease.took_over and time.monotonic() - started < 5
    assert JobFiles(tmp_path).read_lease()["token"] == lease.token


def test_a_runner_whose_lease_was_taken_over_takes_no_further_step(jobs, llm):
    # The runner stalled past its lease's expiry and another took the job over:
    # the next time it opens the job (under the job's lock) it stops there, before
    # any call or repair, and says who holds the job now.
    from logist.engine.create import create_job
    from logist.engine.step import step_once

    job = create_job(jobs, "taken", "Write hello.py")
    with holding(JobFiles(job.dir), engine="threads", task="stalled") as lease:
        job.session.lease = lease
        write_lease(job.dir, host="another-host", pid=1, seconds=30)  # the takeover
        before = (job.dir / "jobHistory.json").read_bytes()
        with pytest.raises(leases.LeaseLost, match="taken over by host another-host, pid 1"):
            step_once(job, endpoints=llm.endpoints)
    assert llm.requests == [], "no call made"
    assert (job.dir / "jobHistory.json").read_bytes() == before and len(JobFiles(job.dir).load_history().interactions) == 1
    assert JobFiles(job.dir).read_lease()["token"] == "theirs", "the new holder's lease is left as it is"


def test_a_lease_is_superseded_by_the_task_of_a_runner_its_batch_saw_die(tmp_path):
    # A live-looking lease (another host, not expired) of a runner the batch's
    # driver saw die: taken over at once by naming its task; any other task's
    # lease is not.
    with renewing(tmp_path):  # task "t-1", renewed: live as far as anyone can tell
        with pytest.raises(LeaseHeld):
            acquire(JobFiles(tmp_path), engine="ray", task="retry", supersedes="t-2")
    lease = acquire(JobFiles(tmp_path), engine="ray", task="retry", supersedes="t-1")
    assert "its runner died" in lease.took_over and JobFiles(tmp_path).read_lease()["token"] == lease.token


def test_a_lease_dated_further_ahead_than_its_length_is_over(tmp_path):
    # Written by a host whose clock is 10 minutes ahead: renewed "in 10 minutes",
    # expiring a lease length after that. Honouring it would block the job for
    # as long as that clock is ahead.
    ahead = datetime.now(timezone.utc) + timedelta(minutes=10)
    data = {"host": "skewed-host", "pid": 1, "engine": "ray", "task": "t-1", "token": "theirs",
            "acquired_at": ahead.isoformat(), "renewed_at": ahead.isoformat(),
            "expires_at": (ahead + timedelta(seconds=leases.LEASE_SECONDS)).isoformat()}
    (tmp_path / LEASE_NAME).write_text(json.dumps(data))
    lease = acquire(JobFiles(tmp_path), engine="serial", task="c")
    assert "further ahead than one lease length" in lease.took_over and "skewed-host" in lease.took_over
    # A lease a little ahead (a clock a second or two fast), renewed, is honoured.
    with renewing(tmp_path, seconds=leases.LEASE_SECONDS, ahead=2):
        with pytest.raises(LeaseHeld, match="another-host"):
            acquire(JobFiles(tmp_path), engine="serial", task="d")


def test_a_lease_with_an_expiry_without_a_time_zone_is_over(tmp_path):
    data = {"host": "h", "pid": 1, "token": "theirs", "expires_at": "2999-01-01T00:00:00"}
    (tmp_path / LEASE_NAME).write_text(json.dumps(data))
    assert "no valid expiry" in acquire(JobFiles(tmp_path), engine="serial", task="c").took_over


def test_a_runner_that_takes_over_a_lapsed_lease_waits_for_the_stalled_holders_step(jobs, llm):
    # The holder's lease lapsed while it was stalled (SIGSTOP, a slow clock) in a
    # step that holds the job's lock. The new holder waits for that step instead
    # of failing at once ("busy") and releasing the job, which left it RUNNING
    # with no runner; then it runs the job.
    from conftest import answer
    from logist.engine.create import create_job
    from logist.engine.engines import run_one
    from logist.store.manifest import Status

    job = create_job(jobs, "stalled", "Write hello.py")
    write_lease(job.dir, host="another-host", pid=1, seconds=-1)  # lapsed
    llm.add(answer("COMPLETED", summary="done", evidence_files=[]))  # the Worker
    llm.add(answer("COMPLETED", summary="approved", evidence_files=[]))  # the Supervisor
    held, release = threading.Event(), threading.Event()

    def stalled_step() -> None:
        with JobFiles(job.dir).lock():
            held.set()
            release.wait(10)

    holder = threading.Thread(target=stalled_step)
    holder.start()
    held.wait(10)
    threading.Timer(1.5, release.set).start()
    outcome = run_one(str(jobs.path), "stalled", {"endpoints": llm.endpoints}, engine="threads", task="new")
    holder.join()
    assert outcome.error is None and outcome.skipped is None, outcome
    assert "took over the lease of host another-host" in (outcome.note or "")
    assert outcome.status == Status.APPROVAL_REQUIRED and outcome.steps == 2 and len(llm.requests) == 2


def test_a_runner_whose_job_was_taken_over_reports_it_skipped_not_failed(jobs, llm):
    from logist.engine.create import create_job
    from logist.engine.engines import run_one

    job = create_job(jobs, "taken", "Write hello.py")
    with holding(JobFiles(job.dir), engine="threads", task="stalled"):
        pass  # (released: the run below takes a fresh lease)

    # The run's lease is taken over by another runner before its first step opens the job.
    real_acquire = leases.acquire

    def acquire_then_lose(*args, **kwargs):
        lease = real_acquire(*args, **kwargs)
        write_lease(job.dir, host="another-host", pid=1, seconds=30)
        return lease

    leases.acquire, restore = acquire_then_lose, leases.acquire
    try:
        outcome = run_one(str(jobs.path), "taken", {"endpoints": llm.endpoints}, engine="threads", task="old")
    finally:
        leases.acquire = restore
    assert outcome.error is None, outcome
    assert "taken over by host another-host" in (outcome.skipped or "")
    assert llm.requests == []


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="process states are read from /proc")
def test_a_stopped_process_on_this_host_has_its_lease_watched_until_it_lapses(tmp_path):
    # A runner stopped (SIGSTOP) renews nothing: a batch run beside it watches its
    # lease and takes the job over when it lapses, instead of skipping the job for
    # as long as the runner is stopped. Running, the same process's lease is held.
    import signal

    with sleeper() as (child, started):
        write_lease(tmp_path, host=leases.this_host(), pid=child.pid, seconds=1.5, started=started)
        with pytest.raises(LeaseHeld, match=f"pid {child.pid}"):
            acquire(JobFiles(tmp_path), engine="threads", task="beside")
        os.kill(child.pid, signal.SIGSTOP)
        wait_until(lambda: leases.stopped(child.pid), "the child never stopped")  # delivered a moment later
        lease = acquire(JobFiles(tmp_path), engine="threads", task="beside")
        assert "expired" in lease.took_over and f"pid {child.pid}" in lease.took_over


def test_the_lease_length_is_a_setting_of_the_jobs_directory(tmp_path):
    from logist.errors import ConfigError
    from logist.store.config import load_config

    (tmp_path / "config.json").write_text(json.dumps({"lease_seconds": 5}))
    assert load_config(tmp_path).lease_seconds == 5
    (tmp_path / "config.json").write_text(json.dumps({"lease_seconds": 0.5}))
    with pytest.raises(ConfigError, match="lease_seconds"):
        load_config(tmp_path)


def test_a_stalled_runner_that_finds_the_job_busy_with_its_new_holder_reports_it_skipped(jobs, llm):
    # The runner that took the job over is stepping it (holds the job's lock) when the
    # stalled one comes back: busy, but the job is not failed: it is the other's now.
    from logist.engine.create import create_job
    from logist.engine.engines import run_one

    job = create_job(jobs, "taken", "Write hello.py")
    real_acquire = leases.acquire

    def acquire_then_lose(*args, **kwargs):
        lease = real_acquire(*args, **kwargs)
        write_lease(job.dir, host="another-host", pid=1, seconds=30)
        return lease

    leases.acquire, restore = acquire_then_lose, leases.acquire
    try:
        with JobFiles(job.dir).lock():  # the new holder's step
            outcome = run_one(str(jobs.path), "taken", {"endpoints": llm.endpoints}, engine="threads", task="old")
    finally:
        leases.acquire = restore
    assert outcome.error is None, outcome
    assert "taken over by host another-host" in (outcome.skipped or "")
    assert llm.requests == []


def _stopped_holding_the_lease_lock(job_dir) -> subprocess.Popen:
    """A process on this host that took the job's ``.lease.lock`` (as a runner
    does for the moment it renews, takes or ends a lease) and was stopped
    (SIGSTOP) before it let go of it."""
    import signal

    child = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, sys, time\n"
        f"handle = open({str(JobFiles(job_dir).lease_lock_path)!r}, 'a')\n"
        "fcntl.flock(handle, fcntl.LOCK_EX)\n"
        "print('held', flush=True)\n"
        "time.sleep(60)\n")], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline() == "held\n"
    os.kill(child.pid, signal.SIGSTOP)
    return child


def test_a_lease_whose_runner_was_stopped_holding_the_lease_lock_is_taken_over_when_it_lapses(tmp_path, monkeypatch):
    # The runner was stopped (SIGSTOP) in the moment it held .lease.lock (renewing its
    # lease, say): a lock nobody else can take while it is stopped. Its lease still
    # lapses a lease length after its last renewal, and is taken over then, not when
    # the runner goes on (nor refused as busy after LOCK_WAIT).
    monkeypatch.setattr(leases, "LOCK_WAIT", 5.0)
    child = _stopped_holding_the_lease_lock(tmp_path)
    try:
        write_lease(tmp_path, host=leases.this_host(), pid=child.pid, seconds=1.0, started=leases.start_time(child.pid))
        started = time.monotonic()
        lease = acquire(JobFiles(tmp_path), engine="threads", task="new-holder")
        assert "expired" in lease.took_over, lease.took_over
        assert time.monotonic() - started < 3, "taken over as the lease lapsed, not after the lock's wait"
        assert JobFiles(tmp_path).read_lease()["token"] == lease.token
    finally:
        child.kill()
        child.wait()


def test_the_lease_lock_of_a_stopped_process_is_broken_at_once_and_it_sees_that_when_let_go_on(tmp_path):
    # The stopped holder's lock is broken at once (not waited on); let go on, the
    # holder finds its lock is no longer the file's, so its write (a renewal read
    # before it was stopped) would be refused and the lease read again.
    import signal

    from logist.store.locks import hold_breakable_lock

    path = JobFiles(tmp_path).lease_lock_path
    child = subprocess.Popen([sys.executable, "-c", (
        "import sys\n"
        "from logist.store.locks import hold_breakable_lock\n"
        f"with hold_breakable_lock({str(path)!r}, 'the lease', 5) as lock:\n"
        "    print('held', flush=True)\n"
        "    sys.stdin.readline()\n"
        "    print('intact' if lock.intact() else 'broken', flush=True)\n")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline() == "held\n"
        os.kill(child.pid, signal.SIGSTOP)
        started = time.monotonic()
        with hold_breakable_lock(path, "the lease", 5) as mine:
            assert time.monotonic() - started < 2, "broken at once, not after the wait"
            assert mine.intact()
            os.kill(child.pid, signal.SIGCONT)
            child.stdin.write("\n")
            child.stdin.flush()
            assert child.stdout.readline() == "broken\n"
            assert mine.intact(), "the lock is the breaker's"
        assert child.wait(10) == 0
    finally:
        child.kill()
        child.wait()


def test_a_watched_lease_is_read_again_as_it_expires():
    # A runner watching a lease (one not renewed) looks again just past its expiry,
    # so it takes it over as it lapses; and a third of its length later at most.
    now = datetime.now(timezone.utc)

    def lease(written: float, length: float) -> dict:
        return {"renewed_at": (now + timedelta(seconds=written)).isoformat(),
                "expires_at": (now + timedelta(seconds=written + length)).isoformat()}

    assert leases.next_look(lease(-3.7, 4.0), now) == pytest.approx(0.3 + leases.LOOK_AFTER_EXPIRY)
    assert leases.next_look(lease(-0.1, 4.0), now) == pytest.approx(4.0 / 3)
    assert leases.next_look(lease(-9.0, 4.0), now) == leases.LOOK_AFTER_EXPIRY, "an expired one: at once"
