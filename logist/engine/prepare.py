"""Building the next request: everything about a call that needs no network.

:func:`prepare` reads the job and decides what the next call is (the role's
call, or the summary call when the role's conversation is due for
compaction) and returns it as :attr:`Prepared.body`, the exact Chat
Completions request body. That one dict is what ``job preview --json``
prints, what :func:`logist.model.client.chat` sends (nothing added; the stream
fields dropped only for an endpoint found, in this process, not to stream,
and the history then records that) and what the replay server compares, so
the three cannot drift apart. Whether the answer is asked for as a stream is
config.json's ``stream`` (on by default).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional, Protocol

from ..protocol.decoding import MOST_LISTED, decoding_schema, response_formats
from ..protocol.answer import ACTION_RULES
from ..secrets.redact import redact_data
from ..resources import data_dir
from ..store.config import LogistConfig, ModelSettings
from ..store.entries import RequestMetadata
from ..store.session import JobFiles
from ..store.manifest import PLANNER, JobManifest
from ..store.prompts import Prompts
from ..store.requests import request_body
from ..store.roles import RoleManifest, Roles, load_roles
from . import compaction
from .prompt import Prompt, build_prompt
from .workflow import answer_protocol, table, who_acts
from ..errors import ConfigError, NotFoundError

#: The temperature of a summary call: a summary should be faithful, not creative.
SUMMARY_TEMPERATURE = 0.2
#: An answer's max_tokens when the role sets none, by protocol: room for a
#: whole file in a JSON answer; kosmos-panel's 512 for the line protocol.
DEFAULT_MAX_TOKENS = {"json": 2048, "tags": 512}
#: A summary call's max_tokens (a summary is short prose, whatever the role's answers may need).
SUMMARY_MAX_TOKENS = 1024
#: Where the context window is known, the default answer budget is at most this share of it.
ANSWER_SHARE = 4


#: Where a context window comes from that is the machine's, not the job's
#: nor Logist's: a request sized by one records it (:class:`Recorded`).
MACHINE_WINDOW_SOURCES = ("config.json", "the endpoint")


class WindowFound(Protocol):
    """A context window and where it was found (:class:`logist.engine.context.Window`)."""

    tokens: Optional[int]
    source: str


@dataclass(frozen=True)
class Recorded:
    """What shaped a recorded request besides the job's own settings and
    its roles: the context window it was sized for and the structured_output
    setting, where the machine it was made on chose them (config.json's
    ``model_settings``, the endpoint). A replay of the call
    (:func:`logist.replay.apply.replay_history`) prepares its request with
    these instead of the replaying jobs directory's, and asks no endpoint,
    so a recording replays byte for byte in any jobs directory."""

    context_window: Optional[int] = None
    context_window_from: Optional[str] = None
    structured_output: Optional[str] = None

    @classmethod
    def of(cls, metadata: Optional[RequestMetadata]) -> "Recorded":
        if metadata is None:
            return cls()
        return cls(metadata.context_window, metadata.context_window_from, metadata.structured_output)

    def applied(self, config: LogistConfig, model: str) -> LogistConfig:
        """``config`` with the recording's model settings for ``model`` instead of its own."""
        pinned = ModelSettings(context_window=self.context_window, structured_output=self.structured_output)
        return config.model_copy(update={"model_settings": {model: pinned}})

    def window_source(self) -> str:
        return f"the recording ({self.context_window_from or 'its machine'})"

    def fields(self) -> dict:
        """The fields a replayed request records: the recording's own, so its entry is the recorded one."""
        return {"context_window": self.context_window, "context_window_from": self.context_window_from,
                "structured_output": self.structured_output}


@dataclass
class Prepared:
    """The next call: its request body and what the step records about it."""

    #: The exact Chat Completions request body: model, messages, then the
    #: parameters that are set (temperature, max_tokens, response_format).
    body: dict
    prompt: Prompt
    role: RoleManifest
    metadata: RequestMetadata
    #: config.json as read once for this step.
    config: LogistConfig
    #: The prompt templates in effect (also for the messages the step records).
    prompts: Optional[Prompts] = None
    #: For a summary call, the number of rounds the summary will cover.
    compaction_target: Optional[int] = None
    #: The protocol the answer is read in: "json" or "tags" (the role's, or the job's skill's).
    protocol: str = "json"
    #: The ``response_format`` values an endpoint may be sent, strongest
    #: first (None: none); the body carries the first, and
    #: :func:`logist.model.client.chat` goes down the list as an endpoint refuses them.
    formats: list = field(default_factory=lambda: [None])
    #: The context window the request was sized for (None: unknown).
    window: Optional[int] = None
    #: The request's tokens estimated from its messages (:func:`logist.engine.context.estimate`), made
    #: once when the request is sized for the window (None: not sized); the call's usage, when the
    #: endpoint reports none, is estimated from it. Every body sent for the call has these messages.
    estimated_tokens: Optional[int] = None

    @property
    def model(self) -> str:
        return self.body["model"]

    @property
    def is_compaction(self) -> bool:
        return self.compaction_target is not None


def open_actions(manifest: JobManifest) -> tuple[str, ...]:
    """The protocol's actions the role whose turn it is may answer with now:
    those the table has a row for in this state (a CMD's rows are ``CMD
    run``/``held``/``denied``, a Planner's ``X to a role``/``to User``), less
    CMD under the ``deny`` command policy, which refuses every command."""
    who, state = who_acts(manifest), manifest.status
    fired = {r.event.name for r in table() if who in r.who and state in r.states}
    actions = tuple(a for a in ACTION_RULES if a in fired)
    if manifest.settings.command_policy == "deny":
        actions = tuple(a for a in actions if a != "CMD")
    return actions


def resolve_model(config: LogistConfig, manifest: JobManifest, role: RoleManifest, override: Optional[str]) -> str:
    """``--model`` > the job's model > config ``models[role]`` > a jobs-dir
    role's own model or alias > config ``default_model`` (or kosmos-panel's
    ``AI_MODEL``) > the built-in role's model; whichever it is, a name
    config.json's ``model_aliases`` defines is replaced by the model it names."""
    return config.resolve_alias(chosen_model(config, manifest, role, override)[0])


def chosen_model(config: LogistConfig, manifest: JobManifest, role: RoleManifest,
                 override: Optional[str]) -> tuple[str, str]:
    """The model :func:`resolve_model` starts from (an alias not yet replaced), and where it was named."""
    if override:
        return override, "--model"
    if manifest.model:
        return manifest.model, "the job"
    if role.name in config.models:
        return config.models[role.name], "config.json models"
    if role.llm_alias:
        # An alias names a model on purpose: one config.json lacks is an error.
        config.alias(role.llm_alias, f"role '{role.name}' ({role.source})")
        return role.llm_alias, f"the role's llm_alias ({role.source})"
    # A jobs directory's own manifest names its model on purpose; only a
    # built-in role's model gives way to config.json's default_model.
    builtin = is_builtin(role)
    default, key = config.default()
    if builtin and default:
        return default, f"config.json {key}"
    return role.llm_model, f"the role's llm_model ({role.source})"


def is_builtin(role: RoleManifest) -> bool:
    """Whether ``role`` is one Logist ships (not a jobs directory's own)."""
    return role.source is not None and Path(role.source).parent == data_dir("roles")


def model_for_endpoint(config: LogistConfig, manifest: JobManifest, role: RoleManifest, override: Optional[str],
                       served: Optional[list[str]], endpoint: str) -> Optional[str]:
    """The model to name instead of a built-in role's own when nothing names
    one (no --model, job model, config.json ``models``, ``default_model``
    or alias) and the endpoint, which lists ``served`` (None: unknown), does
    not serve it: its only model; with several, a
    :class:`~logist.errors.ConfigError` naming ``default_model``. None: keep
    the model :func:`resolve_model` gives (a local server is not sent, nor
    priced as, a hosted model it does not have)."""
    chosen, where = chosen_model(config, manifest, role, override)
    if served is None or not is_builtin(role) or not where.startswith("the role's llm_model") or chosen in served:
        return None
    if len(served) == 1:
        return served[0]
    listed = ", ".join(served[:5]) + (f" and {len(served) - 5} more" if len(served) > 5 else "")
    raise ConfigError(
        f"no model is named for role '{role.name}', and the endpoint {endpoint} does not serve the built-in role's "
        f"{chosen}: it lists {len(served)} model{'s' if len(served) != 1 else ''}"
        + (f" ({listed})" if served else "") + "; set default_model in config.json (or pass --model)")


def answer_budget(role: RoleManifest, protocol: str, window: Optional[int]) -> int:
    """The ``max_tokens`` every call of ``role`` carries: the role's own, else
    :data:`DEFAULT_MAX_TOKENS` for its protocol, at most a quarter of a known window."""
    if role.max_tokens is not None:
        return role.max_tokens
    default = DEFAULT_MAX_TOKENS[protocol]
    return min(default, max(1, window // ANSWER_SHARE)) if window else default


def structured_output(role: RoleManifest, config: LogistConfig, model: str) -> str:
    """The role's ``structured_output``, else the model's in config.json, else ``auto``."""
    return role.structured_output or config.model_setting(model).structured_output or "auto"


def machine_shaped(role: RoleManifest, config: LogistConfig, model: str, window: Optional[int],
                   window_from: str) -> dict:
    """The :class:`~logist.store.entries.RequestMetadata` fields a request
    records of what its machine chose (see :class:`Recorded`): the window
    when config.json or the endpoint gave it, the structured_output when
    config.json's model_settings named it."""
    fields: dict = {}
    if window and window_from.startswith(MACHINE_WINDOW_SOURCES):
        fields["context_window"], fields["context_window_from"] = window, window_from
    if not role.structured_output and config.model_setting(model).structured_output:
        fields["structured_output"] = config.model_setting(model).structured_output
    return fields


def answer_formats(role: RoleManifest, config: LogistConfig, manifest: JobManifest, model: str, protocol: str,
                   workspace=None) -> list:
    """The ``response_format`` values the role's call may carry, strongest
    first: the role's own, else the decoding schema of the actions open to
    it now (:func:`open_actions`) in the forms its
    ``structured_output`` allows; none for the line protocol. ``workspace``:
    the job's (:class:`logist.workspace.repository.Workspace`), whose files (up to
    :data:`~logist.protocol.decoding.MOST_LISTED`) are the paths a replacement or deletion may name."""
    if role.response_format is not None:
        return [role.response_format]
    if protocol != "json":
        return [None]
    setting = structured_output(role, config, model)
    if setting == "off":
        return [None]
    planner = manifest.workflow == "planned" and manifest.turn.slot == PLANNER
    addressed = [name for slot, name in manifest.roles.items() if slot != PLANNER] if planner else None
    existing = workspace.files(MOST_LISTED) if workspace is not None else None
    schema = decoding_schema(open_actions(manifest), file_changes=role.file_changes != "refused",
                             planner_roles=addressed, existing=existing)
    return response_formats(setting, schema)


def prepare(job: JobFiles, manifest: JobManifest, model_override: Optional[str] = None, *, compact: bool = True,
            window_of: Optional[Callable[[RoleManifest, str, LogistConfig], "WindowFound"]] = None,
            force_compaction: bool = False, recorded: Optional[Recorded] = None,
            roles: Optional[Roles] = None, config: Optional[LogistConfig] = None) -> Prepared:
    """The next call of ``job``: a summary call when the role's conversation
    is due for compaction (and ``compact``), else the role's call.

    ``compact=False`` always gives the role's call: a posted answer
    (``job poststep``) is the role's answer, whatever is due.
    ``window_of(role, model, config)``: the model's context window, when
    known (it bounds the default ``max_tokens``; :mod:`logist.engine.context`), and where it was found. ``force_compaction``: summarise what can be
    summarised now (the role's call would not fit the window). ``recorded``:
    a replayed call's recorded settings, used instead of config.json's (:class:`Recorded`).
    ``roles``: the jobs directory's roles as this step read them (None: read here);
    ``config``: its config.json as this step read it (None: read here).
    """
    jobs_dir = job.jobs_dir.path
    if roles is None:
        roles = load_roles(jobs_dir)
    role_name = manifest.turn.role
    if role_name not in roles:
        raise NotFoundError(f"job '{job.id}' needs role '{role_name}', which is not defined")
    role = roles[role_name]  # a role whose file does not load raises that file's error
    if config is None:
        config = job.jobs_dir.config()
    model = resolve_model(config, manifest, role, model_override)
    if recorded is not None:
        config = recorded.applied(config, model)
    found = window_of(role, model, config) if window_of is not None else None
    window = found.tokens if found is not None else None
    shaped = recorded.fields() if recorded is not None else \
        machine_shaped(role, config, model, window, found.source if found is not None else "")
    target = (compaction.forced(manifest.turn, role) if force_compaction else compaction.due(manifest.turn, role)) \
        if compact else None
    history = job.session.reader()
    prompts = Prompts(jobs_dir, roles)
    if target is not None:
        messages = redact_data(compaction.request(manifest.turn, role, target, history.conversation(manifest.turn), prompts))
        budget = min(SUMMARY_MAX_TOKENS, max(1, window // ANSWER_SHARE)) if window else SUMMARY_MAX_TOKENS
        metadata = RequestMetadata(
            role=role.name, phase="compaction", model=model, temperature=SUMMARY_TEMPERATURE, max_tokens=budget,
            stream=config.stream or None, **{k: v for k, v in shaped.items() if k != "structured_output"},
        )
        body = request_body(model, messages, SUMMARY_TEMPERATURE, budget, stream=config.stream)
        return Prepared(body, Prompt(messages=messages), role, metadata, config, prompts, compaction_target=target,
                        window=window)
    prompt = build_prompt(manifest, role, job.workspace, jobs_dir, history, roles, prompts)
    # What is sent, previewed and recorded holds no secret value (workspace files, a person's text).
    if prompt.continues is None:
        prompt.messages = redact_data(prompt.messages)
    else:
        # The conversation so far is read from the history, whose writer let no
        # secret value in: only the messages this call adds (the tail) are new.
        new = len(prompt.added)
        prompt.messages = prompt.messages[:len(prompt.messages) - new] + redact_data(prompt.messages[len(prompt.messages) - new:])
    prompt.added = redact_data(prompt.added)
    protocol = answer_protocol(role, manifest)
    formats = answer_formats(role, config, manifest, model, protocol, job.repo)
    budget = answer_budget(role, protocol, window)
    metadata = RequestMetadata(
        role=role.name, phase=str(manifest.status), model=model, temperature=role.temperature, max_tokens=budget,
        response_format=formats[0], stream=config.stream or None, **shaped,
    )
    body = request_body(model, prompt.messages, role.temperature, budget, formats[0], config.stream)
    return Prepared(body, prompt, role, metadata, config, prompts, protocol=protocol, formats=formats, window=window)
