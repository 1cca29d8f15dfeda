"""One step: lock, read, check, build the request, call once, apply, commit, record.

:func:`step_once` is a live step; :func:`post_answer` applies an answer that
did not come from a call (``job poststep``, ``job replay``). Both end in
:func:`logist.engine.apply.apply_outcome`, the one piece of code that turns an answer into file changes,
a commit, a history entry and a new manifest, so a recorded history replays
to the same states and the same workspace.
"""

from __future__ import annotations

import logging
import time
from typing import Callable, Optional


from ..protocol.forms import surrogates_shown
from ..errors import LogistError
from ..model.client import Endpoints
from ..store.entries import AgentRunRecord
from ..store.session import JobFiles
from ..store.manifest import JobManifest
from .apply import StepResult, apply_compaction, apply_outcome, check_steppable, record_step
from .budget import limit_reason
from .checks import check_now
from .call import CallWatch, call_settings, make_call
from .outcome import Outcome
from .context import sized_call, window_finder
from .prepare import Recorded, prepare
from .session import open_locked
from .transition import apply_event
from .workflow import LIMIT

log = logging.getLogger("logist")

def _stop_for_limit(job: JobFiles, manifest: JobManifest, reason: str) -> StepResult:
    after = manifest.model_copy(deep=True)
    rule = apply_event(after, LIMIT, reason)
    return record_step(job, manifest, after, rule, kind="limit", role=manifest.turn.role, action="LIMIT",
                       workspace_commit=manifest.workspace_commit, note=f"no call was made: {reason}", error=reason)


def _locked_step(
    job: JobFiles, lock_timeout: float, produce: Callable[..., Outcome], model: Optional[str], mode: str,
    kind: str = "llm_call", base_url: Optional[str] = None, request_timeout: Optional[float] = None,
    endpoints: Optional[Endpoints] = None, watch: Optional[CallWatch] = None, recorded: Optional[Recorded] = None,
) -> StepResult:
    """``mode``: "live" makes the call :func:`prepare` decides (a summary
    call when compaction is due, else the role's call); "answer" always
    applies the role's answer (poststep, replay); "summary" applies a
    recorded summary (replay). ``kind`` is the entry kind of an answer.
    ``recorded``: a replayed call's recorded settings, used instead of the
    jobs directory's (:class:`~logist.engine.prepare.Recorded`)."""
    with open_locked(job, lock_timeout) as session:
        manifest = session.manifest
        started = time.monotonic()
        check_steppable(job, manifest)
        if manifest.checks_due:  # a COMPLETED waits for the job's checks: they run first, and are no step
            if mode != "live":
                raise LogistError(f"job '{job.id}' has its checks to run before another answer: "
                                  f"logist job check {job.id} (or logist job step) runs them")
            return check_now(job, manifest, watch=watch)
        reason = limit_reason(manifest)
        if reason:
            return _stop_for_limit(job, manifest, reason)
        if mode == "live":
            config = job.jobs_dir.config()  # read once for the step: its endpoint, the model, the request
            settings = call_settings(job, manifest, config, base_url, request_timeout, endpoints)
            prepared = sized_call(job, manifest, model, settings, recorded=recorded, config=config)
        else:
            settings = None
            window_of = window_finder(None, recorded) if recorded is not None else None
            prepared = prepare(job, manifest, model, compact=mode != "answer", window_of=window_of, recorded=recorded)
        if mode == "summary" and not prepared.is_compaction:
            raise LogistError(f"job '{job.id}' has no compaction due; the recorded summary does not fit here")
        outcome = produce(manifest, prepared, settings)
        outcome.started = started
        if prepared.is_compaction:
            return apply_compaction(job, manifest, prepared, outcome, replayed=mode == "summary")
        return apply_outcome(job, manifest, prepared, outcome, kind, watch)


def step_once(
    job: JobFiles, *, base_url: Optional[str] = None, model: Optional[str] = None, lock_timeout: float = 0,
    request_timeout: Optional[float] = None, watch: Optional[CallWatch] = None,
    endpoints: Optional[Endpoints] = None, recorded: Optional[Recorded] = None,
) -> StepResult:
    """Exactly one LLM call (``job step --oneshot``): the role's, or a summary
    call when the role's conversation is due for compaction.

    Raises :class:`~logist.errors.ConfigError`, the job unchanged, when no
    endpoint is configured. ``request_timeout`` overrides config.json's;
    ``watch`` is told when the call starts, as its answer streams in, and
    when it ends, and while a command its answer asks for runs. ``endpoints``: what the caller's calls learned of their
    endpoints, and their clients (:class:`logist.model.client.Endpoints`; None: this
    call starts afresh). ``recorded``: the call replays a recorded one, whose
    settings it is made with (:class:`~logist.engine.prepare.Recorded`)."""
    return _locked_step(
        job, lock_timeout, lambda manifest, prepared, settings: make_call(job, manifest, prepared, settings, watch),
        model, "live", base_url=base_url, request_timeout=request_timeout, endpoints=endpoints, watch=watch,
        recorded=recorded,
    )


def post_answer(
    job: JobFiles,
    raw: Optional[str],
    *,
    error: Optional[str] = None,
    prompt_tokens: Optional[int] = None,
    completion_tokens: Optional[int] = None,
    model: Optional[str] = None,
    lock_timeout: float = 0,
    summary: bool = False,
    replayed: bool = False,
    fault: Optional[str] = None,
    finish_reason: Optional[str] = None,
    agent: Optional[AgentRunRecord] = None,
    recorded: Optional[Recorded] = None,
) -> StepResult:
    """Apply an answer without calling the model (``job poststep``, recorded
    as a ``poststep`` entry; ``replayed``: from a recorded history, a
    ``replay`` entry). With ``summary``, ``raw`` is a recorded compaction
    summary (``job replay``). ``fault`` and ``finish_reason``: a recorded
    call's, so that it replays to the same state (see :class:`Outcome`);
    ``recorded``: its recorded settings (:class:`~logist.engine.prepare.Recorded`).
    ``agent``: a recorded coding agent's run, whose work (its patch) the
    step applies and commits with the answer, without the agent."""
    # A lone surrogate (a command line that is not UTF-8) is kept as its escape, as from an endpoint.
    raw = surrogates_shown(raw) if raw is not None else None
    outcome = Outcome(raw=raw, error=error, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                      fault=fault, finish_reason=finish_reason, agent=agent)
    kind = "replay" if replayed else "poststep"
    return _locked_step(job, lock_timeout, lambda _manifest, _prepared, _settings: outcome, model,
                        "summary" if summary else "answer", kind, recorded=recorded)


