"""Building the next request: everything about a call that needs no network.

:func:`prepare` resolves the role and its model and builds the messages the
next call sends (the role's prompt, or the summary call when the turn is due
for compaction). ``job preview`` shows what it returns, and a step sends
exactly that.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ..resources import data_dir
from ..store.config import LogistConfig
from ..store.history import RequestMetadata
from ..store.jobsdir import Job
from ..store.manifest import JobManifest
from ..store.roles import RoleManifest, load_roles
from . import compaction
from .prompt import Prompt, build_prompt


@dataclass
class Prepared:
    prompt: Prompt
    role: RoleManifest
    model: str
    metadata: RequestMetadata
    response_format: Optional[dict] = None
    temperature: Optional[float] = None
    #: config.json as read once for this step.
    config: Optional[LogistConfig] = None


def resolve_model(config: LogistConfig, manifest: JobManifest, role: RoleManifest, override: Optional[str]) -> str:
    """``--model`` > the job's model > config ``models[role]`` > a jobs-dir
    role's own model > config ``default_model`` > the built-in role's model."""
    if override:
        return override
    if manifest.model:
        return manifest.model
    if role.name in config.models:
        return config.models[role.name]
    # A jobs directory's own manifest names its model on purpose; only a
    # built-in role's model gives way to config.json's default_model.
    builtin = role.source is not None and Path(role.source).parent == data_dir("roles")
    if not builtin:
        return role.llm_model
    return config.default_model or role.llm_model


def prepare(job: Job, manifest: JobManifest, model_override: Optional[str] = None) -> Prepared:
    """Everything about the next call that does not need the network."""
    from ..errors import NotFoundError

    jobs_dir = job.jobs_dir.path
    roles = load_roles(jobs_dir)
    role_name = manifest.turn.role
    if role_name not in roles:
        raise NotFoundError(f"job '{job.id}' needs role '{role_name}', which is not defined")
    role = roles[role_name]
    config = job.jobs_dir.config()
    model = resolve_model(config, manifest, role, model_override)
    prompt = build_prompt(manifest, role, job.workspace, jobs_dir, roles)
    metadata = RequestMetadata(
        role=role.name, phase=str(manifest.status), model=model, temperature=role.temperature, max_tokens=role.max_tokens
    )
    return Prepared(prompt=prompt, role=role, model=model, metadata=metadata,
                    response_format=role.response_format, temperature=role.temperature, config=config)


def prepare_compaction(job: Job, manifest: JobManifest, prepared: Prepared, target: int) -> Prepared:
    messages = compaction.request(manifest.turn, prepared.role, job.id, target)
    metadata = RequestMetadata(
        role=prepared.role.name, phase="compaction", model=prepared.model, temperature=0.2, max_tokens=None
    )
    return Prepared(prompt=Prompt(messages=messages), role=prepared.role, model=prepared.model, metadata=metadata,
                    response_format=None, temperature=0.2, config=prepared.config)
