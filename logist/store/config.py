"""``<jobs-dir>/config.json``: endpoint, models, prices and job defaults.

Precedence for the endpoint: ``--base-url`` > ``LOGIST_BASE_URL`` >
``OPENAI_BASE_URL`` > ``config.json``. The API key is read from the
environment only (``LOGIST_API_KEY`` then ``OPENAI_API_KEY``) and is never
stored: the config model has no field for it and refuses one.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import ConfigError
from .roles import format_validation_error

DEFAULT_BASE_URL = "https://api.openai.com/v1"
KEY_VARIABLES = ("LOGIST_API_KEY", "OPENAI_API_KEY")


class Price(BaseModel):
    """What a model costs, in USD per million tokens."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    input_per_million: float = Field(ge=0)
    """USD per million prompt tokens."""
    output_per_million: float = Field(ge=0)
    """USD per million completion tokens."""


class JobDefaults(BaseModel):
    """Settings a job copies at create time; each can be set per job too."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    max_steps: int = Field(default=100, ge=1)
    """Answers a job may apply (calls, replayed and posted answers) before it stops for a person."""
    format_retries: int = Field(default=0, ge=0)
    """How many times a role is asked again, in one turn, after an answer that is not valid."""
    max_retries_in_a_row: int = Field(default=3, ge=1)
    """RETRYs in a row, without the Supervisor accepting work, before a person is needed."""
    # Budgets checked before every call; None = no limit.
    max_cost_usd: Optional[float] = Field(default=None, ge=0)
    """Stop before a call once this many USD are spent (needs prices); null: no limit."""
    max_tokens: Optional[int] = Field(default=None, ge=0)
    """Stop before a call once this many tokens (prompt and completion) are used; null: no limit."""
    max_wall_seconds: Optional[float] = Field(default=None, ge=0)
    """Stop before a call once calls and commands took this many seconds; null: no limit."""
    command_policy: Literal["deny", "ask", "allow"] = "ask"
    """The model's commands: deny refuses them all, ask holds each for a person, allow runs those allowed_commands match and holds the rest."""
    allowed_commands: list[str] = []
    """Shell-style patterns over the whole command line (such as 'python -m pytest*') that run without asking under the allow policy."""
    command_timeout: float = Field(default=120.0, gt=0)
    """Seconds a command may run before it is killed."""
    command_output_limit: int = Field(default=20_000, ge=200)
    """Characters of a command's output the model is shown; longer output is cut in the middle."""


class LogistConfig(BaseModel):
    """``config.json``: the jobs directory's endpoint, models, prices and job defaults."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    schema_: str = Field(default=None, alias="$schema", exclude=True)  # absent or a string
    """The JSON Schema of this file (config.schema.json in Logist's schemas/ folder), for editors; Logist ignores it."""
    base_url: Optional[str] = None
    """The OpenAI-compatible endpoint, used when neither --base-url nor LOGIST_BASE_URL nor OPENAI_BASE_URL is set."""
    default_model: Optional[str] = None
    """The model for the built-in roles, instead of the one their manifests name."""
    models: dict[str, str] = {}
    """Role name -> the model for that role (a job's or a command's --model still wins)."""
    request_timeout: float = Field(default=30.0, gt=0)
    """Seconds to wait for one model request."""
    max_retries: int = Field(default=3, ge=0, le=10)
    """How many times a request that failed for a transient reason (timeout, 429, 5xx, connection) is sent again."""
    prices: dict[str, Price] = {}
    """Model name -> its price, so that cost is counted and max_cost_usd can apply."""
    defaults: JobDefaults = JobDefaults()
    """Settings every new job of this jobs directory starts with."""


def load_config(jobs_dir: Path) -> LogistConfig:
    path = Path(jobs_dir) / "config.json"
    if not path.exists():
        return LogistConfig()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not valid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: cannot be read: {exc}") from None
    if isinstance(data, dict) and any(k.lower() in ("api_key", "key", "openai_api_key") for k in data):
        raise ConfigError(f"{path}: API keys do not belong in config.json; set LOGIST_API_KEY in the environment")
    try:
        return LogistConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, str(path))) from None


def resolve_base_url(option: Optional[str], config: LogistConfig) -> str:
    return (
        option
        or os.environ.get("LOGIST_BASE_URL")
        or os.environ.get("OPENAI_BASE_URL")
        or config.base_url
        or DEFAULT_BASE_URL
    )


def resolve_api_key() -> Optional[str]:
    for name in KEY_VARIABLES:
        value = os.environ.get(name)
        if value:
            return value
    return None
