"""A job's states and a workflow's slots: the names the workflow table
(:mod:`logist.engine.workflow`) is written in.

Apart from the manifest's models (:mod:`logist.store.manifest`, which
re-exports them) so that the table, and the CLI's exit codes made from it,
load without pydantic: ``logist --help`` stays quick.
"""

from __future__ import annotations

from enum import Enum


class Status(str, Enum):
    """A job's state (SPEC section 5)."""

    DRAFT = "DRAFT"
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    REVIEWING = "REVIEWING"
    INPUT_REQUIRED = "INPUT_REQUIRED"
    APPROVAL_REQUIRED = "APPROVAL_REQUIRED"
    INTERVENTION_REQUIRED = "INTERVENTION_REQUIRED"
    SUSPENDED = "SUSPENDED"
    SUCCESS = "SUCCESS"
    CANCELED = "CANCELED"

    def __str__(self) -> str:  # so f-strings print the bare name
        return self.value


#: The slots of a workflow, which a job fills with roles of its choice.
WORKER, SUPERVISOR, PLANNER = "worker", "supervisor", "planner"
