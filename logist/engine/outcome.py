"""A call's outcome (or an answer that did not come from a call), before it
is applied (:mod:`.apply`), and the request its history entry records."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Optional

from ..store.journal import StepJournal
from ..store.entries import AgentRunRecord, Message, Request
from .prepare import Prepared


@dataclass
class Outcome:
    """The result of a call (or a posted answer), before it is applied."""

    raw: Optional[str] = None
    error: Optional[str] = None
    prompt_tokens: Optional[int] = None
    completion_tokens: Optional[int] = None
    duration: float = 0.0
    #: The endpoint reported no usage; the tokens are estimates.
    estimated: bool = False
    #: What the history entry says besides (an answer sent as a tool call).
    note: Optional[str] = None
    called: bool = False
    #: When the step began (``time.monotonic()``, the lock held): the wall
    #: budget counts the whole step, what the user waits for, not the call alone.
    started: Optional[float] = None
    #: A call's journal once its answer arrived (None: no call here).
    saved: Optional[StepJournal] = None
    #: A failed call's kind (:data:`logist.errors.FAULTS`): ``transient`` keeps the turn to go on with.
    fault: Optional[str] = None
    #: Why the model stopped, as the endpoint said (``length``: the answer was cut at max_tokens).
    finish_reason: Optional[str] = None
    #: The coding agent's run that gave the answer (its calls, its work as a patch); None: a model's answer.
    agent: Optional[AgentRunRecord] = None

    @property
    def calls(self) -> int:
        """The model calls the answer took: an agent's run's, else one."""
        return len(self.agent.calls) if self.agent is not None else 1

    @property
    def answered(self) -> bool:
        """Whether an answer came, so that applying it is a step (what
        ``max_steps`` counts): an answer, or one refused (too long). A call
        that failed with none, or whose stream ended before it did (the
        turn is kept and the same request made again), is no step."""
        if self.error is None:
            return True
        return self.raw is not None and self.fault != "transient"

    def wall_ms(self) -> int:
        """The step's time so far (the call's when the start is unknown)."""
        return round(((time.monotonic() - self.started) if self.started is not None else self.duration) * 1000)

    def request(self, prepared: Prepared) -> Request:
        """The request the entry records: the call's as its journal holds
        it, else the prepared one."""
        if self.saved is not None and self.saved.request is not None:
            return self.saved.request
        return request_of(prepared)


def request_of(prepared: Prepared) -> Request:
    """The prepared call's request as its history entry records it."""
    if prepared.is_compaction:
        return Request(prompt=[Message(**m) for m in prepared.prompt.messages], metadata=prepared.metadata)
    return Request(**prepared.prompt.record(), files_context=prepared.prompt.files_context, metadata=prepared.metadata)
