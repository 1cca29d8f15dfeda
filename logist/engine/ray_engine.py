"""The ``ray`` engine: each job of a batch one task on a Ray cluster.

``logist job run --all --engine ray [--address auto|HOST:PORT|local]``.
Ray is an optional extra (``pip install 'logist[ray]'``), imported only
when this engine is chosen. The address: ``local`` starts a cluster for
this batch on this machine (and stops it after), ``auto`` joins the one
``ray start`` runs here, ``HOST:PORT`` the one whose head is there; without
``--address``, ``RAY_ADDRESS`` or else ``local``.

Each task runs :func:`logist.engine.engines.run_one` on a worker: the
worker reads and writes the job's folder itself, so every node must see
the jobs directory at the same path (a shared filesystem: see
:mod:`logist.store.lease` for what it must provide), with Logist installed
and the API key in its environment (set before ``ray start``: it is never
sent through Ray; a ``local`` cluster's processes inherit it from Logist,
which holds it apart from its own environment otherwise: :mod:`logist.environment`). The batch's ``LOGIST_*`` and ``GIT_*`` settings, less
the key, go to the workers with the tasks.

A task whose worker dies (the process killed, the node lost) is run again
by Ray on another worker, up to :data:`MAX_RETRIES` times: the retry finds
the dead runner's lease over (its process gone, or its host silent past
the lease's expiry), takes it, and the job's recovery repairs the step the
dead worker left half done before it goes on. A retry whose job had in
fact finished returns the job's status. At most ``concurrency`` tasks are
in flight at once, each asking the cluster for one CPU.
"""

from __future__ import annotations

import contextlib
import os
import sys
from dataclasses import dataclass
from typing import Optional

from .. import environment
from ..llm import Endpoints
from ..errors import ConfigError
from .choices import DEFAULT_CONCURRENCY
from .engines import run_one
from .loop import QueueOutcome

#: Times Ray runs a job's task again after its worker died.
MAX_RETRIES = 3
#: Settings passed to the workers (prefixes), and those never passed.
FORWARDED = ("LOGIST_", "GIT_")
SECRET = ("LOGIST_API_KEY",)


def ray_module():
    """``ray``, or one line saying how to install it."""
    try:
        import ray
    except ImportError:
        raise ConfigError("--engine ray needs Ray, which is not installed: pip install 'logist[ray]'") from None
    return ray


def worker_env() -> dict:
    return {k: v for k, v in os.environ.items() if k.startswith(FORWARDED) and k not in SECRET}


def _task(jobs_path: str, job_id: str, kwargs: dict) -> QueueOutcome:
    import ray

    # The task's calls share what they learn of their endpoints (an Endpoints does not cross processes).
    return run_one(jobs_path, job_id, {**kwargs, "endpoints": Endpoints()}, engine="ray",
                   task=ray.get_runtime_context().get_task_id() or "?")


@dataclass
class RayEngine:
    name = "ray"
    concurrency: int
    address: Optional[str] = None
    max_retries: int = MAX_RETRIES

    @classmethod
    def create(cls, concurrency: Optional[int], address: Optional[str]) -> "RayEngine":
        return cls(concurrency or DEFAULT_CONCURRENCY, address)

    def _connect(self, ray) -> None:
        import logging

        address = self.address or os.environ.get("RAY_ADDRESS") or "local"
        options = dict(runtime_env={"env_vars": worker_env()}, log_to_driver=False, logging_level=logging.WARNING)
        if address == "local":
            options["include_dashboard"] = False
        try:
            # A local cluster's processes are Logist's children: they inherit the key
            # as they did from the environment the program was started with.
            with environment.lent() if address == "local" else contextlib.nullcontext():
                ray.init(address=address, **options)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ConfigError(f"cannot reach the Ray cluster at {address!r}: {first}") from None

    def run(self, jobs_path, job_ids, kwargs, on_step):
        # Ray prints its own news (a worker died, ...) on stdout, which is for data (--json).
        with contextlib.redirect_stdout(sys.stderr):
            yield from self._run(jobs_path, job_ids, kwargs)

    def _run(self, jobs_path, job_ids, kwargs):
        ray = ray_module()
        kwargs = {**kwargs, "watch": None, "endpoints": None}
        self._connect(ray)
        remote = ray.remote(max_retries=self.max_retries, retry_exceptions=False, num_cpus=1)(_task)
        waiting, pending = list(job_ids), {}
        try:
            while waiting or pending:
                while waiting and len(pending) < self.concurrency:
                    job_id = waiting.pop(0)
                    pending[remote.remote(jobs_path, job_id, kwargs)] = job_id
                ready, _ = ray.wait(list(pending), num_returns=1)
                for ref in ready:
                    job_id = pending.pop(ref)
                    try:
                        yield ray.get(ref)
                    except ray.exceptions.RayError as exc:
                        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                        yield QueueOutcome(job_id, None, error=(
                            f"its Ray task failed ({self.max_retries} retries): {type(exc).__name__}: {first}"))
        finally:
            for ref in pending:
                ray.cancel(ref)
            ray.shutdown()
