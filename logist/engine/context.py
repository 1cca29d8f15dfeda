"""Context windows: how many tokens the model takes, how many a request holds, and whether the next call fits.

A model's window (prompt and answer together) is, first found first: the
role's ``context_window``, config.json's ``model_settings``, Logist's table
of common hosted models (``store/context_windows.json``), what the endpoint
tells (the call's :class:`~logist.model.base.Model`; an endpoint: llama.cpp's ``/props``, vLLM's ``/v1/models``, Ollama's
``/api/show``), or what an earlier error of the endpoint named in this
process. The table comes before asking the endpoint so that a hosted API is
never asked about itself for a model Logist knows.

A request's size is counted before the call: the endpoint's own tokenizer
where it has one, else an estimate (4 characters a token) calibrated by the
prompt tokens the endpoint reported for the job's last call whose usage it
reported. The answer's budget (``max_tokens``) is reserved inside the
window: a request fits when its tokens and that budget do.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Optional

from ..model import client as llm
from ..errors import LogistError
from ..store.config import LogistConfig, shipped_context_window
from ..store.session import JobFiles
from ..store.manifest import JobManifest
from ..store.roles import RoleManifest
from ..secrets.redact import url_shown
from ..store.config import DEFAULT_BASE_URL
from ..store.roles import Roles, load_roles
from ..store.requests import LOOKBACK
from .prepare import Prepared, Recorded, model_for_endpoint, prepare


class ContextOverflowError(LogistError):
    """The next request would not fit the model's context window: no call was made."""

#: Tokens a chat template adds around each message (role markers), about.
PER_MESSAGE = 6
#: Below this share of the room, the estimate is trusted without asking a tokenizer.
SURE_BELOW = 0.7
#: A request this many times smaller than the room fits whatever the calibration says (it
#: is seldom below 0.5 or above 2: a tokenizer's tokens are about 3 to 5 characters).
FAR_BELOW = 3


@dataclass
class Window:
    """A model's context window and where it was found."""

    tokens: Optional[int]
    source: str = ""


def context_window(config: LogistConfig, role: RoleManifest, model: str,
                   settings: Optional[llm.LLMSettings]) -> Window:
    """``model``'s window for ``role`` (see the module's doc); ``settings``:
    the calls whose model (:meth:`~logist.model.client.Endpoints.model_for`) is asked, None to ask none."""
    if role.context_window:
        return Window(role.context_window, f"role {role.name}")
    configured = config.model_setting(model).context_window
    if configured:
        return Window(configured, "config.json model_settings")
    shipped = shipped_context_window(model)
    if shipped:
        return Window(shipped, "Logist's table of models")
    if settings is not None:
        told, where = settings.endpoints.model_for(settings).context_window(model)
        if told:
            return Window(told, f"the endpoint ({where})")
    return Window(None, "")


def window_finder(settings: Optional[llm.LLMSettings], recorded: Optional[Recorded] = None):
    """``window_of(role, model, config)`` for :func:`~logist.engine.prepare.prepare`:
    :func:`context_window`, the endpoint asked through ``settings``; for a
    replayed call (``recorded``), the recording's window (``config`` then holds
    it: :meth:`Recorded.applied`) and no endpoint asked."""

    def window_of(role: RoleManifest, name: str, config: LogistConfig) -> Window:
        if recorded is None:
            return context_window(config, role, name, settings)
        window = context_window(config, role, name, None)
        if recorded.context_window and window.source == "config.json model_settings":
            window = Window(window.tokens, recorded.window_source())
        return window

    return window_of


def servers_window(window: Window, settings: Optional[llm.LLMSettings], model: str) -> Window:
    """``window`` (a role's or config.json's), or the endpoint's own when it
    says a smaller one: a request is checked against what the server really
    takes, whatever the settings say (both named). The endpoint is asked once
    per process (:class:`~logist.model.client.Endpoints`), never on replay; a
    question it does not answer leaves ``window`` as it is."""
    if settings is None or not window.source.startswith(("role ", "config.json")):
        return window
    told, where = settings.endpoints.model_for(settings).context_window(model)
    if not told or told >= window.tokens:
        return window
    return Window(told, f"the endpoint ({where}), though {window.source} says {window.tokens:,}")


def endpoint_model(job: JobFiles, manifest: JobManifest, model: Optional[str],
                   settings: Optional[llm.LLMSettings], roles: Optional[Roles] = None,
                   config: Optional[LogistConfig] = None) -> Optional[str]:
    """``model``, or the model the endpoint serves where nothing names one
    and the built-in role's own is not among its models
    (:func:`~logist.engine.prepare.model_for_endpoint`; the endpoint's list
    asked once per process, and an endpoint that does not answer changes
    nothing). OpenAI's own endpoint, and a model the caller was given, are not asked.
    ``roles``: the jobs directory's roles as the step read them (None: read here);
    ``config``: its config.json as the step read it (None: read here)."""
    if model or settings is None or settings.endpoints.model is not None or \
            settings.base_url.rstrip("/") == DEFAULT_BASE_URL:
        return model
    role = (roles if roles is not None else load_roles(job.jobs_dir.path)).get(manifest.turn.role)
    if role is None:
        return model  # prepare says which role is missing
    config = config if config is not None else job.jobs_dir.config()
    served = settings.endpoints.served_models(settings)
    return model_for_endpoint(config, manifest, role, None, served, url_shown(settings.base_url)) or model


def message_texts(body: dict) -> list[str]:
    """The texts of a request's messages (those whose content is a text), in
    order. A request holds the whole turn (some 2,000 messages at round 1,000):
    where every message's content is a text, they are taken with C-level maps."""
    messages = body.get("messages") or []
    contents = list(map(dict.get, messages, itertools.repeat("content"))) \
        if all(map(isinstance, messages, itertools.repeat(dict))) else None
    if contents is not None and all(map(isinstance, contents, itertools.repeat(str))):
        return contents
    return [m["content"] for m in messages if isinstance(m.get("content"), str)]


def message_text(body: dict) -> str:
    """The text of a request's messages, as a tokenizer is given it."""
    return "\n".join(message_texts(body))


def estimate_tokens(text: str) -> int:
    """Tokens in ``text`` when the endpoint does not say: 4 characters a token, rounded up."""
    return _tokens_of(len(text))


def _tokens_of(characters: int) -> int:
    return -(-characters // 4)


def estimate(body: dict) -> int:
    """A request's tokens estimated from its text (:func:`message_text`,
    counted without being joined), and the template's markers."""
    texts = message_texts(body)
    characters = sum(map(len, texts)) + max(len(texts) - 1, 0)  # the text's length: the texts and a newline between
    return _tokens_of(characters) + PER_MESSAGE * len(body.get("messages") or [])


def calibration(job: JobFiles, manifest: JobManifest) -> float:
    """Reported prompt tokens over the estimate, for the job's last call
    whose usage the endpoint reported (1.0 when there is none)."""
    sequence = manifest.last_sequence
    # Through the session's reader: the entries looked at are read from the
    # end of the file a range at a time, not each opened and found on its own,
    # which a run of calls with estimated usage (no usage reported) paid for
    # every entry looked back at; and a session keeps the LOOKBACK entries
    # behind the conversation it rebuilt, so a step reads none of them again
    # (it parsed 20 to 40 of them again each step while only the
    # conversation's own were kept).
    reader = job.session.reader()
    for number in range(sequence, max(0, sequence - LOOKBACK), -1):
        entry = reader.entry(number)
        usage, request = entry.get("usage") or {}, entry.get("request")
        if entry.get("kind") != "llm_call" or usage.get("estimated") or not usage.get("prompt_tokens") or not request:
            continue
        body = job.recorded_body(entry, reader.messages(number))
        guess = estimate(body)
        return usage["prompt_tokens"] / guess if guess else 1.0
    return 1.0


@dataclass
class Size:
    """A request's tokens, and how they were counted."""

    tokens: int
    how: str


def request_size(job: JobFiles, manifest: JobManifest, body: dict, settings: Optional[llm.LLMSettings],
                 room: Optional[int] = None, estimated: Optional[int] = None) -> Size:
    """The tokens of request ``body``: the calibrated estimate, or the
    endpoint's tokenizer where the estimate comes near ``room`` (or always
    when ``room`` is None and the endpoint has one). ``estimated``: the
    body's :func:`estimate`, when the step made it already (its messages
    are the prepared call's: :attr:`~logist.engine.prepare.Prepared.estimated_tokens`)."""
    raw = estimated if estimated is not None else estimate(body)
    if room is not None and raw * FAR_BELOW < room:
        # Far from the window whatever the calibration: no history read, no tokenizer asked.
        return Size(raw, "estimated")
    factor = calibration(job, manifest)
    guess = round(raw * factor)
    if settings is not None and (room is None or guess >= SURE_BELOW * room):
        counted = settings.endpoints.model_for(settings).count_tokens(body["model"], lambda: message_text(body))
        if counted is not None:
            return Size(counted + PER_MESSAGE * len(body.get("messages") or []), "the endpoint's tokenizer")
    how = "estimated" + (f", calibrated x{factor:.2f} by the endpoint's count of an earlier call" if factor != 1.0 else "")
    return Size(guess, how)


def answer_tokens(settings: Optional[llm.LLMSettings], model: str, text: str) -> Optional[int]:
    """An answer's tokens from the endpoint's tokenizer (None: it has none)."""
    return settings.endpoints.model_for(settings).count_tokens(model, text) if settings is not None else None


def overflow(window: Window, size: Size, budget: int) -> Optional[str]:
    """Why a request of ``size`` with an answer of ``budget`` tokens does not
    fit ``window``, in one line; None when it fits or the window is unknown."""
    if window.tokens is None or size.tokens + budget <= window.tokens:
        return None
    return (f"the next request does not fit the model's context window: {size.tokens:,} tokens ({size.how}) "
            f"and {budget:,} for the answer (max_tokens) make {size.tokens + budget:,}, over the window of "
            f"{window.tokens:,} ({window.source})")


def sized_call(job: JobFiles, manifest: JobManifest, model: Optional[str], settings: Optional[llm.LLMSettings],
               compact: bool = True, recorded: Optional[Recorded] = None,
               config: Optional[LogistConfig] = None) -> Prepared:
    """The next call (:func:`logist.engine.prepare.prepare`) sized for the
    model's window: its default ``max_tokens`` bounded by it, and when the
    request would not fit, a summary call instead where the role compacts,
    else :class:`ContextOverflowError` (no call made, nothing recorded).
    ``settings``: the endpoint (None: none is asked; the window is then
    what the role, config.json or the table say). ``recorded``: a replayed
    call's recorded settings (:class:`~logist.engine.prepare.Recorded`).
    ``config``: the jobs directory's config.json as the step read it (None: read here)."""
    found: dict = {}
    finder = window_finder(settings, recorded)
    # Read once for the step (the model it asks for, then its request), which changes no role: not copied.
    roles = load_roles(job.jobs_dir.path, copies=False)
    if config is None:
        config = job.jobs_dir.config()  # as the roles
    if recorded is None:
        model = endpoint_model(job, manifest, model, settings, roles, config)

    def window_of(role: RoleManifest, name: str, config: LogistConfig) -> Window:
        found["window"] = finder(role, name, config)
        return found["window"]

    prepared = prepare(job, manifest, model, compact=compact, window_of=window_of, recorded=recorded, roles=roles,
                       config=config)
    window = found.get("window")
    if window is None or window.tokens is None:
        return prepared
    if recorded is None:
        window = servers_window(window, settings, prepared.model)
    budget = prepared.body.get("max_tokens") or 0
    prepared.estimated_tokens = estimate(prepared.body)  # once per request: the call's usage may need it again
    size = request_size(job, manifest, prepared.body, settings, room=window.tokens - budget,
                        estimated=prepared.estimated_tokens)
    why = overflow(window, size, budget)
    if why is None:
        return prepared
    if compact and not prepared.is_compaction:
        summary = prepare(job, manifest, model, window_of=window_of, force_compaction=True, recorded=recorded,
                          roles=roles, config=config)
        if summary.is_compaction:
            return summary
    remedy = ("raise the window (the server's context size, then context_window in the role or in config.json's "
              "model_settings), let the role compact (prompt_compression), or go back a step (logist job restep)")
    raise ContextOverflowError(f"job '{job.id}': {why}; no call was made. To go on: {remedy}")
