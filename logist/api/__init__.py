"""Logist's front door for Python: a jobs directory and its jobs as objects.

``logist.open(path)`` gives :class:`Jobs`; each job is a :class:`Job` whose
methods are the verbs of ``logist job ...``. The command line and
``logist serve`` call these same objects and nothing else of Logist's to act
on a job (an import-linter contract in pyproject.toml forbids them
``logist.engine`` and ``logist.store``), so everything a command does can be
done from Python::

    with logist.open("jobs", base_url="http://localhost:11434/v1") as jobs:
        job = jobs.create("hello", objective="Write hello.py", acceptance=["It prints Hello"])
        job.run()            # turns until a person is needed: APPROVAL_REQUIRED
        job.approve()        # SUCCESS

Each verb is a method with typed keywords (a person's actions are methods,
not strings); what a method returns is the engine's own result
(:class:`StepResult` for a step, the job's new :class:`JobManifest` for a
decision), re-exported here with the other types and facts callers show
(:data:`__all__`). This layer only gathers the engine's and the store's
functions under one object per job, and decides once what every call of a
process shares: the endpoint (``base_url``), the request timeout, how long
to wait for a job's lock, and what the process learns of its endpoints
(:class:`logist.model.client.Endpoints`, made by :class:`Jobs`, closed by
:meth:`Jobs.close` or at the end of a ``with`` block; nothing of it
outlives the :class:`Jobs` that made it).

Words: a *step* is one answer applied, a *call* one request to a model, a
*turn* a role's steps until it hands over (:meth:`Job.call`,
:meth:`Job.turn`, :meth:`Job.run`). Reading (:meth:`Job.manifest`,
:meth:`Job.history`, :meth:`Job.preview`...) never writes: no lock, no
repair, no upgrade.

The package's names load in two parts: the read side
(:mod:`logist.api.reading`: the store's types, the workflow's rules of
what a job waits for, and :func:`~logist.api.reading.open_reader`, which
opens a jobs directory to read) with the package; everything else
(:mod:`logist.api.jobs`: ``open``, ``Jobs``, ``Job`` and what the engine
returns) when a name of it is first asked for (PEP 562), as
:mod:`logist` gives its own names. So a command that only reads
(``logist job status``) starts without loading the engine, the endpoint
client or the replay servers.
"""


from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

from . import reading  # noqa: F401 (logist.api.reading, for callers that only read)
from .reading import (HISTORY_FORMAT, HISTORY_NAME, NEEDS_PERSON, NOT_CONFIGURED, STEPPABLE, WAITING_FOR_PERSON,
                      CheckRun, CheckStatus, EntryInFull, HistoryEntry, JobHistory, JobManifest, Status, held_because,
                      is_job_id, person_can)

__all__ = [
    # The front door.
    "open", "Jobs", "Job", "Preview",
    # What its methods take and return.
    "JobSpec", "StepResult", "JobManifest", "Status", "HistoryEntry", "JobHistory", "QueueOutcome", "BatchCounts",
    "CallWatch", "CommandWatch", "FsckReport", "EntryInFull", "Endpoint", "RoleFacts", "AgentFacts", "Workflow", "CheckRun",
    "CheckStatus",
    # Facts about jobs a caller shows (the command line and logist serve show them).
    "workflow", "person_can", "held_because", "raise_hint", "check_engine", "engine_names", "read_history",
    "is_job_id", "as_spec", "WAITING_FOR_PERSON", "NEEDS_PERSON", "STEPPABLE", "BUDGETS", "SETTABLE",
    "HISTORY_FORMAT", "HISTORY_NAME", "NOT_CONFIGURED", "DEFAULT_ENGINE", "DEFAULT_CONCURRENCY",
]


def __getattr__(name: str):
    """A name of :mod:`logist.api.jobs` (``open``, ``Jobs``, ``Job``, ...), imported when first asked for."""
    if name.startswith("__"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(".jobs", __name__), name)  # AttributeError names the module when it has none
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:  # pragma: no cover - for type checkers and editors
    from .jobs import (BUDGETS, DEFAULT_CONCURRENCY, DEFAULT_ENGINE, SETTABLE, AgentFacts, BatchCounts, CallWatch,
                       CommandWatch, Endpoint, FsckReport, Job, Jobs, JobSpec, Preview, QueueOutcome, RoleFacts,
                       StepResult, Workflow, as_spec, check_engine, engine_names, open, raise_hint, read_history,
                       workflow)
