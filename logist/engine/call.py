"""Making one call, and recording it exactly once.

:func:`make_call` sends a prepared request to the call's model (the one
:meth:`logist.model.client.Endpoints.model_for` names: the endpoint's, or
one the caller was given, such as an in-memory model). Around it the
step journal (:mod:`logist.store.journal`) records the call: ``calling``
with its key and request before anything is sent, ``answered`` with the
answer, its usage and time as soon as it arrives (fsynced), before
:mod:`logist.engine.step` applies it. The key (:func:`logist.store.calls.call_key`)
goes out as the ``Idempotency-Key`` header, the same on every retry the SDK
makes; a call made again after one of unknown outcome, with the same body,
reuses that call's key, so a gateway that honours the header answers it
without charging again.

:func:`finish_interrupted` is what recovery calls when a command finds a
call in the journal that the history does not record: with a saved answer,
the answer is applied as the step would have (an ``llm_call`` entry, counted
once, no new call); without one, the call is recorded as of unknown outcome
(``response.status`` ``UNKNOWN``: counted in ``totals.llm_calls`` and
``totals.unknown_calls``, the job left as before it, so the next step makes
it again).
"""

from __future__ import annotations

import time
from typing import NamedTuple, Optional, Protocol

from ..model import client as llm
from ..model.base import Request
from ..secrets import redact as secrets
from ..failpoints import failpoint
from ..errors import EndpointError, LLMCallError, LogistError
from ..store.journal import StepJournal
from ..store.recovery import Finish
from ..store.atomic import compact_json
from ..store.calls import SavedAnswer, recorded_key, same_body, sent_key
from ..store.config import LogistConfig, resolve_api_key, resolve_base_url, resolve_endpoint
from ..model.agent import AgentModel
from ..store.entries import UNKNOWN, AgentRunRecord, Response, Usage, unknown_outcome
from ..store.session import JobFiles
from ..store.manifest import JobManifest
from .context import answer_tokens, estimate_tokens, request_size

from .agent_step import agent_task, interrupted_run
from .apply import apply_compaction, apply_outcome, commit_hand_edits, record_failure
from .commands import CommandWatch
from .outcome import Outcome, request_of
from .prepare import Prepared, prepare

#: What an entry recovered from a saved answer says (after any note of its own).
RECOVERED_NOTE = ("the process ended after this call's answer arrived and before it was recorded; "
                  "the saved answer was applied when the job was next opened, without calling again")
#: What an entry of unknown outcome says.
UNKNOWN_NOTE = ("the process ended while this call was in flight: whether the endpoint answered it (and charged "
                "for it) is unknown; nothing was applied, and the next step makes the call again (the same "
                "Idempotency-Key when the request is the same)")

#: What the entry of an agent's run the process ended during says.
UNKNOWN_AGENT_NOTE = ("the process ended while the role's coding agent ran: its process group was stopped and what "
                      "it wrote undone; the calls its gateway forwarded are recorded (agent.calls), and the next "
                      "step runs the agent again")


class CallWatch(CommandWatch, Protocol):
    """Told about a call while it is in flight (the CLI's progress line),
    and about a command its answer runs (:class:`~logist.engine.commands.CommandWatch`)."""

    def started(self, role: str, call: int, of: int, model: str) -> None: ...

    def tokens(self, count: int) -> None: ...

    def finished(self) -> None: ...


def entry_key(job: JobFiles, manifest: JobManifest, sequence: int) -> str:
    """The key call entry ``sequence`` of the job was sent with."""
    data = job.entry(sequence).dump()
    body = job.recorded_body(data, job.session.reader().messages(sequence))
    return recorded_key(job.id, manifest.created_at, data, body)


def retried_key(job: JobFiles, manifest: JobManifest) -> Optional[str]:
    """The key of the call of unknown outcome the job's last entry records
    (past repairs), if it is one: the call made again is sent with it."""
    sequence = manifest.last_sequence
    reader = job.session.reader()  # the entries the step read already: not parsed again
    while sequence >= 1:
        entry = reader.entry(sequence)
        if entry["kind"] != "repair":
            if unknown_outcome(entry) and entry.get("request") is not None:
                return entry_key(job, manifest, sequence)
            return None
        sequence -= 1
    return None


def call_settings(job: JobFiles, manifest: JobManifest, config: LogistConfig, base_url: Optional[str],
                  request_timeout: Optional[float] = None, endpoints: Optional[llm.Endpoints] = None) -> llm.LLMSettings:
    """How the job's calls reach the endpoint; :class:`~logist.errors.ConfigError`
    when none is configured and the caller was given no model. ``endpoints``:
    what the caller's calls learned of their endpoints, and the model it was
    given if any (None: these calls start afresh, to the endpoint)."""
    given = endpoints is not None and endpoints.model is not None
    return llm.LLMSettings(
        base_url=resolve_base_url(base_url, config) if given else resolve_endpoint(base_url, config),
        api_key=resolve_api_key(),
        timeout=request_timeout or config.request_timeout,
        max_retries=config.max_retries,
        max_answer_bytes=manifest.settings.max_answer_bytes, headers={llm.JOB_HEADER: job.id},
        **({"endpoints": endpoints} if endpoints is not None else {}),
    )


class _Sent(NamedTuple):
    """A body a step sends: its bytes as sent, the key it is sent with, and the key the current rule gives it."""

    body: dict
    key: str
    data: bytes
    natural: str


def make_call(job: JobFiles, manifest: JobManifest, prepared: Prepared, settings: llm.LLMSettings,
              watch: Optional[CallWatch] = None) -> Outcome:
    """Send the prepared body to the model of ``settings``: as it is,
    less the stream fields when the model was found not to stream, and
    with a weaker response_format where it refused a stronger one in this
    process (the recorded metadata says what was sent), journalled before
    and after."""
    sequence = manifest.last_sequence + 1
    task = agent_task(job, manifest, prepared, sequence)
    model = settings.endpoints.model_for(settings, task)
    head = manifest.workspace_commit
    if isinstance(model, AgentModel):
        model.ready()  # its program is there: else nothing is changed
        # The agent writes the workspace itself: a person's edits since the last step are committed first,
        # so that its work is exactly what it changed from there.
        head, unreadable = commit_hand_edits(job, sequence, manifest.workspace_commit)
        if unreadable is not None:
            raise unreadable
        task.head = head or ""
        prepared.metadata.agent = task.agent
    body = prepared.body
    if body.get("stream") and not model.streams():
        body = llm.without_stream(body)
    formats = model.usable_formats(prepared.formats)
    if formats[0] != body.get("response_format"):  # a form this model refused before (settings.endpoints)
        body = llm.with_format(body, formats[0])
    # An agent's run sends its own requests (recorded by its gateway): the prepared body is its prompt.
    prepared.metadata.response_format = formats[0] if task is None else None
    prepared.metadata.stream = (bool(body.get("stream")) or None) if task is None else None
    again = retried_key(job, manifest)

    keys: dict[int, _Sent] = {}

    def encoded(sent: dict) -> _Sent:
        # Once per body sent (it holds the whole conversation): encoded, and its key the digest of those
        # bytes, which the client sends as they are.
        if id(sent) not in keys:
            data = compact_json(sent)
            natural = sent_key(job.id, manifest.created_at, sequence, data)
            key = again if again is not None and same_body(again, natural, sent) else natural
            keys[id(sent)] = _Sent(sent, key, data, natural)
        return keys[id(sent)]

    def key_for(sent: dict) -> str:
        return encoded(sent).key

    prepared.metadata.idempotency_key = key_for(body)
    model.ready()  # the endpoint's client built (once per Endpoints) before the clock starts
    calling = job.session.journal.begin_call(sequence, head, prepared.metadata.idempotency_key, request_of(prepared),
                                             settings.max_answer_bytes)
    # The journal named formats[0] by its file (response_formats.keep): the same value sent is named so again.
    kept_format = prepared.metadata.response_format
    failpoint("after_calling")
    started = time.monotonic()
    error = None
    kind = None
    try:
        if watch is not None:  # in the try: a Ctrl-C as it starts still ends it (finally)
            watch.started(prepared.role.name, manifest.calls + 1, manifest.settings.max_steps, prepared.model)
        reply = model.complete(Request(body, formats, watch.tokens if watch is not None else None, key_for,
                                       headers=settings.headers, max_answer_bytes=settings.max_answer_bytes,
                                       encoded=lambda sent: encoded(sent).data))
    except LLMCallError as exc:
        if exc.kind == "setup":
            # Nothing was asked of a model: the job stays exactly as it was.
            job.session.journal.call_not_made()
            raise EndpointError(f"{secrets.redact(str(exc))} (endpoint {secrets.url_shown(settings.base_url)}); nothing was recorded "
                                f"and job '{job.id}' is as it was") from None
        kind = exc.kind
        model.learn_window(prepared.model, str(exc))  # "exceeds the context window of N"
        if exc.reply is None:  # no answer came
            outcome = Outcome(error=secrets.redact(str(exc)), duration=time.monotonic() - started, called=True,
                              fault=kind)
            return _saved(job, prepared, calling, outcome)
        reply, error = exc.reply, secrets.redact(str(exc))  # an answer refused (too long) or cut off: recorded once
    finally:
        if watch is not None:
            watch.finished()
    prepared.metadata.stream = (reply.streamed or None) if task is None else None
    # Recorded only when it is not the key this step's own body gives (a call
    # made again after one of unknown outcome): the history derives it otherwise.
    sent = next((one.body for one in keys.values() if one.key == reply.key), body)
    prepared.metadata.idempotency_key = reply.key if reply.key != encoded(sent).natural else None
    sent_format = sent.get("response_format") if task is None else None
    prepared.metadata.response_format = kept_format if sent_format is formats[0] else sent_format
    outcome = Outcome(
        raw=secrets.redact(reply.content),  # a secret the model echoes is recorded and shown as [redacted]
        error=error,
        prompt_tokens=reply.prompt_tokens,
        completion_tokens=reply.completion_tokens,
        duration=time.monotonic() - started,
        called=True,
        fault=kind,
        finish_reason=reply.finish_reason,
        agent=reply.run if isinstance(reply.run, AgentRunRecord) else None,
    )
    outcome.note = "; ".join(([llm.TOOL_NOTE.format(reply.tool)] if reply.tool else []) + reply.notes) or None
    if outcome.prompt_tokens is None or outcome.completion_tokens is None:
        # No usage (a stream without it): counted by the endpoint's tokenizer
        # where it has one, else estimated; marked estimated either way.
        outcome.estimated = True
        if outcome.prompt_tokens is None:
            outcome.prompt_tokens = request_size(job, manifest, body, settings,
                                                 estimated=prepared.estimated_tokens).tokens
        if outcome.completion_tokens is None:
            counted = answer_tokens(settings, prepared.model, reply.content)
            outcome.completion_tokens = counted if counted is not None else estimate_tokens(reply.content)
    return _saved(job, prepared, calling, outcome)


def _saved(job: JobFiles, prepared: Prepared, calling: StepJournal, outcome: Outcome) -> Outcome:
    """Write the call's outcome into its journal (fsynced) before anything is made of it."""
    answer = SavedAnswer(raw=outcome.raw, error=outcome.error, prompt_tokens=outcome.prompt_tokens,
                         completion_tokens=outcome.completion_tokens, estimated=outcome.estimated,
                         duration_ms=round(outcome.duration * 1000), note=outcome.note, agent=outcome.agent)
    outcome.saved = job.session.journal.call_answered(calling, request_of(prepared), answer)
    return outcome


def finish_interrupted(job: JobFiles) -> Finish:
    """Recovery's ``finish`` for ``job`` (see :func:`logist.store.recovery.open_job`)."""

    def finish(manifest: JobManifest, saved: StepJournal) -> JobManifest:
        if saved.answer is None:
            _record_unknown(job, manifest, saved)
        else:
            _apply_saved(job, manifest, saved)
        return job.read_manifest()

    return finish


def _apply_saved(job: JobFiles, manifest: JobManifest, saved: StepJournal) -> None:
    """Apply the saved answer; anything that raises is recorded with it
    (:func:`~logist.engine.apply.record_failure`), so the journal is closed
    and no later command applies it again."""
    metadata = saved.request.metadata
    if metadata.idempotency_key is None and saved.key is not None:
        # The key as the journal recorded it, sent: the Logist that sent it may derive keys by another rule
        # (an older history format) than this one would from the entry.
        metadata.idempotency_key = saved.key
    answer = saved.answer
    note = "; ".join(n for n in (answer.note, RECOVERED_NOTE) if n)
    outcome = Outcome(raw=answer.raw, error=answer.error, prompt_tokens=answer.prompt_tokens,
                      completion_tokens=answer.completion_tokens, duration=answer.duration_ms / 1000,
                      estimated=answer.estimated, note=note, called=True, saved=saved, agent=answer.agent)
    kind = "compaction" if metadata.phase == "compaction" else "llm_call"
    prepared = None
    try:
        prepared = prepare(job, manifest, metadata.model)
        if kind == "compaction" and not prepared.is_compaction:
            # A summary call made because the role's call would not fit the window.
            prepared = prepare(job, manifest, metadata.model, force_compaction=True)
        if prepared.is_compaction != (kind == "compaction"):
            raise LogistError(
                f"the answer saved for step {saved.sequence} no longer fits the job's next call "
                "(its roles or config changed)"
            )
        if prepared.is_compaction:
            apply_compaction(job, manifest, prepared, outcome, replayed=False)
        else:
            apply_outcome(job, manifest, prepared, outcome, kind)
    except Exception as exc:
        record_failure(job, manifest, prepared, outcome, kind, exc)


def _record_unknown(job: JobFiles, manifest: JobManifest, saved: StepJournal) -> None:
    after = manifest.model_copy(deep=True)
    after.totals.unknown_calls += 1
    metadata = saved.request.metadata
    kind, note, run = ("compaction" if metadata.phase == "compaction" else "llm_call"), UNKNOWN_NOTE, None
    usage = None
    if metadata.agent is not None:
        # A coding agent's run: the calls its gateway forwarded were kept, each before the agent saw its
        # answer; they are this entry's, counted as calls made. What it wrote was undone by recovery.
        kind, note, run = "agent_run", UNKNOWN_AGENT_NOTE, interrupted_run(job, saved.sequence, metadata.agent)
        prompt = sum(call.input_tokens or 0 for call in run.calls)
        completion = sum(call.output_tokens or 0 for call in run.calls)
        after.totals.llm_calls += len(run.calls)
        after.totals.prompt_tokens += prompt
        after.totals.completion_tokens += completion
        usage = Usage(prompt_tokens=prompt, completion_tokens=completion)
    else:
        after.totals.llm_calls += 1
    entry = job.session.new_entry(manifest, after,
        kind=kind, role=metadata.role or manifest.turn.role, request=saved.request,
        response=Response(status=UNKNOWN, error="the call's outcome is unknown: the process ended while it was in flight"),
        workspace_commit=manifest.workspace_commit, note=note, **({"agent": run, "usage": usage} if run else {}),
    )
    job.session.record(entry, after)
