"""``<jobs-dir>/config.json``: endpoint, models, prices and job defaults.

Precedence for the endpoint: ``--base-url`` > ``LOGIST_BASE_URL`` >
``OPENAI_BASE_URL`` > kosmos-panel's ``AI_KOSMOS_MODEL_BASE_URL`` >
``config.json``; for the built-in roles' model, config.json's
``default_model`` > kosmos-panel's ``AI_MODEL`` (:meth:`LogistConfig.default`). The API key is read from the
environment only (``LOGIST_API_KEY`` then ``OPENAI_API_KEY``) and is never
stored: the config model has no field for it and refuses one.

Logist is pointed at a model when an endpoint is named in any of those
places, or when a key is set (which means OpenAI's own endpoint,
:data:`DEFAULT_BASE_URL`). With neither, :func:`resolve_endpoint` refuses
before any call, so a first run never goes to api.openai.com without a key.

Prices: common models' prices ship with Logist (``prices.json`` next to
this module); ``prices`` in config.json adds models and overrides those
(:meth:`LogistConfig.price`).
"""

from __future__ import annotations

import json
from pathlib import Path
import urllib.parse
from typing import Literal, Optional

from pydantic import ConfigDict, Field, ValidationError

from .model import StoreModel
from ..errors import ConfigError, format_validation_error, json_problem
from ..secrets import environment
from ..secrets.redact import KEY_VARIABLES
from .lease import LEASE_SECONDS, MIN_LEASE_SECONDS

DEFAULT_BASE_URL = "https://api.openai.com/v1"
#: The environment variables that name the endpoint, in order: Logist's, OpenAI's, kosmos-panel's.
BASE_URL_VARIABLES = ("LOGIST_BASE_URL", "OPENAI_BASE_URL", "AI_KOSMOS_MODEL_BASE_URL")


class Price(StoreModel):
    """What a model costs, in USD per million tokens."""

    model_config = ConfigDict(extra="forbid")
    input_per_million: float = Field(ge=0)
    """USD per million prompt tokens."""
    output_per_million: float = Field(ge=0)
    """USD per million completion tokens."""


class ModelSettings(StoreModel):
    """What Logist knows of one model, where the endpoint does not tell."""

    model_config = ConfigDict(extra="forbid")
    structured_output: Optional[Literal["auto", "json_schema", "json_object", "off"]] = None
    """How answers are asked for in the protocol's shape (a role's own structured_output wins); see role-manifest.schema.json."""
    context_window: Optional[int] = Field(default=None, gt=0)
    """The model's context window in tokens (a role's own context_window wins)."""


class JobDefaults(StoreModel):
    """Settings a job copies at create time; each can be set per job too."""

    # logist.engine.create.JobSpec takes each field, its limits and its help from here: the help is
    # each field's description, not a docstring under it as in the other models, so that job create
    # --help reads it at run time (the docstrings are read only to write the schemas).
    model_config = ConfigDict(extra="forbid")
    max_steps: int = Field(default=100, ge=1, description=(
        "Answers a job may apply (calls, replayed and posted answers) before it stops for a person."))
    format_retries: int = Field(default=1, ge=0, description=(
        "How many times a role is asked again, in one turn, after an answer that is not valid (each re-ask quotes"
        " the reason); 0 stops the job at the first."))
    max_retries_in_a_row: int = Field(default=3, ge=1, description=(
        "RETRYs in a row, without the Supervisor accepting work, before a person is needed."))
    # Budgets checked before every call; None = no limit.
    max_cost_usd: Optional[float] = Field(default=None, ge=0, description=(
        "Stop before a call once this many USD are spent (needs prices); null: no limit."))
    max_tokens: Optional[int] = Field(default=None, ge=0, description=(
        "Stop before a call once this many tokens (prompt and completion) are used; null: no limit."))
    max_wall_seconds: Optional[float] = Field(default=None, ge=0, description=(
        "Stop before a call once calls and commands took this many seconds; null: no limit."))
    command_policy: Literal["deny", "ask", "allow"] = Field(default="ask", description=(
        "The model's commands: deny refuses them all, ask holds each for a person, allow runs those "
        "allowed_commands match and holds the rest."))
    allowed_commands: list[str] = Field(default=[], description=(
        "Shell-style patterns over the whole command line (such as 'python -m pytest*') that run without asking "
        "under the allow policy; a command with a shell operator (; & | ` $ < > or a newline, so 2>&1 too) runs "
        "only when a pattern is exactly that command."))
    command_timeout: float = Field(default=120.0, gt=0, description=(
        "Seconds a command may run before it is killed."))
    command_output_limit: int = Field(default=20_000, ge=200, description=(
        "Characters of a command's output the model is shown; longer output is cut in the middle."))
    max_answer_bytes: int = Field(default=1_000_000, ge=1_000, description=(
        "Bytes an answer may have; a longer one is refused (the job stops for a person) and only its first "
        "max_answer_bytes are recorded."))
    command_sandbox: Literal["auto", "namespace", "none"] = Field(default="auto", description=(
        "Where commands run: namespace runs each in a PID namespace of its own that cannot see Logist's processes"
        " (refused where the system cannot make one), auto does so where it can, none runs them as plain child "
        "processes."))
    command_env: list[str] = Field(default=[], description=(
        "Names of environment variables commands get besides PATH, HOME, LANG, LC_*, TERM, TZ, TMPDIR, USER, "
        "LOGNAME and SHELL (the API key is never passed)."))
    checks: list[str] = Field(default=[], description=(
        "A check: a shell command Logist runs in the workspace after the Worker's COMPLETED, under the same sandbox,"
        " environment, timeout and output limit as a model's commands, never held for approval; exit 0 passes. A"
        " failing check sends the work back to the Worker with its output."))


class LogistConfig(StoreModel):
    """``config.json``: the jobs directory's endpoint, models, prices and job defaults."""

    model_config = ConfigDict(extra="forbid")

    schema_: str = Field(default=None, alias="$schema", exclude=True)  # absent or a string
    """The JSON Schema of this file (config.schema.json in Logist's schemas/ folder), for editors; Logist ignores it."""
    base_url: Optional[str] = None
    """The OpenAI-compatible endpoint, used when neither --base-url nor LOGIST_BASE_URL, OPENAI_BASE_URL or AI_KOSMOS_MODEL_BASE_URL is set."""
    default_model: Optional[str] = None
    """The model for the built-in roles, instead of the one their manifests name."""
    AI_MODEL: Optional[str] = None
    """The name kosmos-panel's skills protocol gives default_model, read when default_model is not set."""
    models: dict[str, str] = {}
    """Role name -> the model for that role (a job's or a command's --model still wins)."""
    model_aliases: dict[str, str] = {}
    """Alias -> model, such as {"CHEAP": "gpt-4o-mini", "SMART": "gpt-4o"}: a role's llm_alias names one, and any model named by an alias (--model CHEAP, models, default_model) is sent as the model it stands for."""
    model_settings: dict[str, ModelSettings] = {}
    """Model name -> its structured_output and context_window, such as {"smollm2": {"context_window": 2048}}."""
    request_timeout: float = Field(default=30.0, gt=0)
    """Seconds to wait for the endpoint to answer (for a streamed answer: between two pieces); a request that times out is not sent again."""
    max_retries: int = Field(default=3, ge=0, le=10)
    """How many times a request that failed for a transient reason (429, 5xx, connection failure) is sent again; a timed-out one never is."""
    lease_seconds: float = Field(default=LEASE_SECONDS, ge=MIN_LEASE_SECONDS)
    """How long a batch runner's hold on a job (lease.json) lasts unless renewed (it is renewed every third of it): a job whose runner stalls or dies is taken over by the next runner that comes to it within this; at least 2 s."""
    stream: bool = True
    """Ask for the answer as a stream (stream with usage) when the endpoint supports it; false: never."""
    prices: dict[str, Price] = {}
    """Model name -> its price, so that cost is counted and max_cost_usd can apply; adds to and overrides the prices Logist ships."""
    defaults: JobDefaults = JobDefaults()
    """Settings every new job of this jobs directory starts with."""

    def default(self) -> tuple[Optional[str], str]:
        """The model for the built-in roles, and the key that names it (``(None, "")``: none does)."""
        for value, key in ((self.default_model, "default_model"), (self.AI_MODEL, "AI_MODEL")):
            if value:
                return value, key
        return None, ""

    def price(self, model: str) -> Optional[Price]:
        """``model``'s price: config.json's, else the shipped one; a name
        with a provider prefix (``openai/gpt-4o``) also matches without it."""
        shipped = shipped_prices()
        for table in (self.prices, shipped):
            for name in _names(model):
                if name in table:
                    return table[name]
        return None

    def model_setting(self, model: str) -> ModelSettings:
        """``model``'s entry in ``model_settings`` (empty when it has none); a
        name with a provider prefix also matches without it."""
        for name in _names(model):
            if name in self.model_settings:
                return self.model_settings[name]
        return ModelSettings()

    def alias(self, name: str, who: str) -> str:
        """The model alias ``name`` stands for; ``who`` uses it (for the error)."""
        if name not in self.model_aliases:
            known = ", ".join(sorted(self.model_aliases)) or "none"
            raise ConfigError(
                f"{who} uses the model alias '{name}', which config.json does not define "
                f"(model_aliases: {known}); add it, such as \"model_aliases\": {{\"{name}\": \"gpt-4o-mini\"}}"
            )
        return self.model_aliases[name]

    def resolve_alias(self, model: str) -> str:
        """``model``, or the model it stands for when it is an alias."""
        return self.model_aliases.get(model, model)


def _names(model: str) -> list[str]:
    """The names ``model`` is looked up by: itself, and without a provider prefix."""
    return [model] + ([model.rsplit("/", 1)[1]] if "/" in model else [])


_SHIPPED: Optional[dict[str, Price]] = None
_WINDOWS: Optional[dict[str, int]] = None


def shipped_context_window(model: str) -> Optional[int]:
    """The context window Logist's table (``context_windows.json``) gives ``model``, if any."""
    global _WINDOWS
    if _WINDOWS is None:
        data = json.loads(Path(__file__).with_name("context_windows.json").read_text(encoding="utf-8"))
        _WINDOWS = {name: int(value) for name, value in data["context_windows"].items()}
    return next((_WINDOWS[name] for name in _names(model) if name in _WINDOWS), None)


def shipped_prices() -> dict[str, Price]:
    """The prices that ship with Logist (``prices.json``), read once."""
    global _SHIPPED
    if _SHIPPED is None:
        data = json.loads(Path(__file__).with_name("prices.json").read_text(encoding="utf-8"))
        _SHIPPED = {name: Price.model_validate(value) for name, value in data["prices"].items()}
    return _SHIPPED


def load_config(jobs_dir: Path) -> LogistConfig:
    path = Path(jobs_dir) / "config.json"
    if not path.exists():
        return LogistConfig()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not valid JSON at line {exc.lineno}, column {exc.colno}: {json_problem(exc)}") from None
    except RecursionError:
        raise ConfigError(f"{path}: nested too deeply to be a configuration") from None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: cannot be read: {exc}") from None
    if isinstance(data, dict) and any(k.lower() in ("api_key", "key", "openai_api_key") for k in data):
        raise ConfigError(f"{path}: API keys do not belong in config.json; set LOGIST_API_KEY in the environment")
    try:
        return LogistConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, str(path))) from None


#: Said when Logist is pointed at no model.
NOT_CONFIGURED = (
    "no model endpoint is configured: pass --base-url URL, set LOGIST_BASE_URL, or put \"base_url\" in "
    "config.json (for OpenAI itself, set LOGIST_API_KEY or OPENAI_API_KEY instead)"
)


def endpoint_source(option: Optional[str], config: LogistConfig) -> tuple[Optional[str], str]:
    """The endpoint named, and where: ``--base-url``, ``LOGIST_BASE_URL``,
    ``OPENAI_BASE_URL``, ``AI_KOSMOS_MODEL_BASE_URL`` or ``config.json``;
    ``(None, "")`` when none is."""
    named = [(option, "--base-url"), *((environment.get(name), name) for name in BASE_URL_VARIABLES),
             (config.base_url, "config.json")]
    for value, source in named:
        if value:
            return checked_url(value, source), source
    return None, ""


def checked_url(value: str, source: str) -> str:
    """``value`` when it is an http(s) URL with a host (and a valid port);
    else :class:`ConfigError` naming ``source`` and what is wrong (not the
    URL itself, which may hold a password)."""
    try:
        parts = urllib.parse.urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number in range
    except ValueError as exc:
        raise ConfigError(f"the base URL from {source} is not a valid URL: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"the base URL from {source} is not an http:// or https:// URL with a host")
    return value


def resolve_base_url(option: Optional[str], config: LogistConfig) -> str:
    """The endpoint calls go to (OpenAI's when none is named)."""
    return endpoint_source(option, config)[0] or DEFAULT_BASE_URL


def resolve_endpoint(option: Optional[str], config: LogistConfig) -> str:
    """The endpoint a call goes to; :class:`ConfigError` (:data:`NOT_CONFIGURED`)
    when none is named and no key is set."""
    named, _ = endpoint_source(option, config)
    if named is None and resolve_api_key() is None:
        raise ConfigError(NOT_CONFIGURED)
    return named or DEFAULT_BASE_URL


def key_variable() -> Optional[str]:
    """The environment variable the API key is read from, if one is set."""
    return next((name for name in KEY_VARIABLES if environment.get(name)), None)


def resolve_api_key() -> Optional[str]:
    """The API key: the one place it is read from (Logist's environment,
    where the ``logist`` program holds it apart from ``os.environ`` from its
    start: :mod:`logist.secrets.environment`); the client is given it directly."""
    name = key_variable()
    return environment.get(name) if name else None
