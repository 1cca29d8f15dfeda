"""Logist: run LLM agent jobs as plain directories.

The library API, importable without the CLI (and without openai or git,
which load only when a step or a workspace needs them)::

    from logist import JobsDir, create_job, step_once, run_job, user_action

    jobs = JobsDir("jobs")
    job = create_job(jobs, "hello", "Write hello.py that prints a greeting")
    run_job(job)                     # Worker, then Supervisor, until a person is needed
    user_action(job, "approve")
"""

from .actions import user_action
from .create import create_job
from .errors import LogistError
from .history import HistoryEntry, JobHistory, load_history
from .jobsdir import Job, JobsDir
from .manifest import JobManifest
from .protocol import Answer, InvalidAnswer, parse_answer
from .replay import replay_history
from .roles import RoleManifest, load_roles
from .step import StepResult, post_answer, run_job, step_once, step_turn
from .workflow import Status

__version__ = "0.1.0"

__all__ = [
    "Answer",
    "HistoryEntry",
    "InvalidAnswer",
    "Job",
    "JobHistory",
    "JobManifest",
    "JobsDir",
    "LogistError",
    "RoleManifest",
    "Status",
    "StepResult",
    "create_job",
    "load_history",
    "load_roles",
    "parse_answer",
    "post_answer",
    "replay_history",
    "run_job",
    "step_once",
    "step_turn",
    "user_action",
]
