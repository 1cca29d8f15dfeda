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
    model_config = ConfigDict(extra="forbid")
    input_per_million: float = Field(ge=0)
    output_per_million: float = Field(ge=0)


class JobDefaults(BaseModel):
    """Settings a job copies at create time; each can be set per job too."""

    model_config = ConfigDict(extra="forbid")
    max_steps: int = Field(default=100, ge=1)
    format_retries: int = Field(default=0, ge=0)
    max_retries_in_a_row: int = Field(default=3, ge=1)
    #: Budgets checked before every call; None = no limit.
    max_cost_usd: Optional[float] = Field(default=None, ge=0)
    max_tokens: Optional[int] = Field(default=None, ge=0)
    max_wall_seconds: Optional[float] = Field(default=None, ge=0)
    command_policy: Literal["deny", "ask", "allow"] = "ask"
    allowed_commands: list[str] = []
    command_timeout: float = Field(default=120.0, gt=0)
    command_output_limit: int = Field(default=20_000, ge=200)


class LogistConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    base_url: Optional[str] = None
    default_model: Optional[str] = None
    models: dict[str, str] = {}
    request_timeout: float = Field(default=30.0, gt=0)
    max_retries: int = Field(default=3, ge=0, le=10)
    prices: dict[str, Price] = {}
    defaults: JobDefaults = JobDefaults()


def load_config(jobs_dir: Path) -> LogistConfig:
    path = Path(jobs_dir) / "config.json"
    if not path.exists():
        return LogistConfig()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
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
