"""Creating a job: its folder, workspace, manifest, history and index entry.

The creation is the history's first entry (a ``user_action`` named
``create``), so the state right after create, the baseline, is on record
like every later state.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Optional

from ..store import history as hist
from ..store import recovery as journal
from ..errors import LogistError
from ..store.history import UserInput
from ..store.jobsdir import Job, JobsDir, check_job_id
from ..store.manifest import JobManifest, Source, Turn, write_manifest
from ..store.config import JobDefaults
from ..store.roles import load_roles
from ..store.skills import ActiveSkill, load_skill
from ..store.manifest import DEFAULT_SLOTS, PLANNED_SLOTS, PLANNER, WORKER
from .workflow import creation


def create_job(
    jobs_dir: JobsDir,
    job_id: str,
    objective: Optional[str] = None,
    *,
    details: str = "",
    acceptance: Optional[list[str]] = None,
    files: Optional[list[str]] = None,
    from_repo: Optional[str] = None,
    ref: Optional[str] = None,
    model: Optional[str] = None,
    worker: Optional[str] = None,
    supervisor: Optional[str] = None,
    max_steps: Optional[int] = None,
    format_retries: Optional[int] = None,
    rank: Optional[int] = None,
    make_current: bool = True,
    skill: Optional[str] = None,
    params: Optional[dict[str, str]] = None,
    command_policy: Optional[str] = None,
    allowed_commands: Optional[list[str]] = None,
    command_timeout: Optional[float] = None,
    max_cost_usd: Optional[float] = None,
    max_tokens: Optional[int] = None,
    max_wall_seconds: Optional[float] = None,
    max_retries_in_a_row: Optional[int] = None,
    workflow: str = "default",
    planner: Optional[str] = None,
    extra_roles: Optional[list[str]] = None,
) -> Job:
    """Create a job and return it. ``files`` are local files copied into the
    workspace (or, with ``from_repo``, paths already in it) that the Worker is
    shown in its opening message."""
    from .. import workspace as ws

    check_job_id(job_id)
    active_skill = None
    if skill:
        template = load_skill(skill, jobs_dir.path)
        values = template.resolve_params(params or {})
        active_skill = ActiveSkill(name=template.name, params=values, instructions=template.render(values))
        objective = objective or template.render_text(template.description, values)
        if max_steps is None:
            max_steps = template.max_steps
    elif params:
        raise LogistError("--param goes with --skill")
    if not objective or not objective.strip():
        raise LogistError("a job needs an objective (--objective TEXT)")
    jobs_dir.init()
    roles = load_roles(jobs_dir.path)
    if workflow not in ("default", "planned"):
        raise LogistError(f"unknown workflow '{workflow}' (default or planned)")
    slots = dict(DEFAULT_SLOTS if workflow == "default" else PLANNED_SLOTS)
    for slot, name in (("worker", worker), ("supervisor", supervisor), ("planner", planner)):
        if name:
            if slot not in slots:
                raise LogistError(f"--{slot} goes with --workflow planned")
            slots[slot] = name
    for name in extra_roles or []:
        if workflow != "planned":
            raise LogistError("--role adds a role the Planner can address; it goes with --workflow planned")
        if name not in slots.values():
            slots[name.lower()] = name
    for slot, name in slots.items():
        if name not in roles:
            raise LogistError(f"the {slot} role '{name}' is not defined (known: {', '.join(sorted(roles))})")
    config = jobs_dir.config()
    settings = config.defaults.model_copy()
    if max_steps is not None:
        settings.max_steps = max_steps
    if format_retries is not None:
        settings.format_retries = format_retries
    if command_policy is not None:
        settings.command_policy = command_policy
    if allowed_commands:
        settings.allowed_commands = list(allowed_commands)
        if command_policy is None:
            settings.command_policy = "allow"
    if command_timeout is not None:
        settings.command_timeout = command_timeout
    for name, value in (("max_cost_usd", max_cost_usd), ("max_tokens", max_tokens),
                        ("max_wall_seconds", max_wall_seconds), ("max_retries_in_a_row", max_retries_in_a_row)):
        if value is not None:
            setattr(settings, name, value)
    settings = JobDefaults.model_validate(settings.model_dump())

    first_slot = PLANNER if workflow == "planned" else WORKER
    job_dir = jobs_dir.new_job_dir(job_id)
    job_dir.mkdir(parents=True)
    workspace = job_dir / "workspace"
    try:
        if from_repo:
            baseline = ws.clone_workspace(Path(from_repo), ref, workspace, job_id)
            source = Source(repo=str(Path(from_repo).resolve()), ref=ref, commit=baseline)
        else:
            if ref:
                raise LogistError("--ref goes with --from-repo")
            baseline = ws.init_workspace(workspace, job_id)
            source = Source()
        rel_files: list[str] = []
        for name in files or []:
            candidate = Path(name)
            in_workspace = workspace / name
            if from_repo and not candidate.is_absolute() and in_workspace.is_file():
                rel_files.append(Path(name).as_posix())
            elif candidate.is_file():
                target = workspace / candidate.name
                if target.exists():
                    raise LogistError(f"--file {name}: {candidate.name} already exists in the workspace")
                shutil.copyfile(candidate, target)
                rel_files.append(candidate.name)
            else:
                raise LogistError(f"--file {name}: no such file")
        if rel_files and not all((workspace / f).is_file() for f in rel_files):  # pragma: no cover
            raise LogistError("could not place the job files in the workspace")
        added = ws.commit_all(workspace, f"logist: files given to job {job_id}") if rel_files else None
        baseline = added or baseline
        drafted, started = creation()  # the workflow table's create row
        manifest = JobManifest(
            job_id=job_id,
            status=started,
            objective=objective.strip(),
            details=(details or "").strip(),
            acceptance_criteria=[a.strip() for a in acceptance or [] if a.strip()],
            files=rel_files,
            roles=slots,
            model=model,
            settings=settings,
            skill=active_skill,
            source=source,
            baseline_commit=baseline,
            workspace_commit=baseline,
            workflow=workflow,
            turn=Turn(slot=first_slot, role=slots[first_slot]),
        )
        hist.create_history(job_dir, job_id)
        before = manifest.model_copy(deep=True)
        before.status = drafted
        entry = journal.new_entry(
            job_dir, workspace, before, manifest, kind="user_action",
            user_input=UserInput(action="create", text=objective.strip()), workspace_commit=baseline,
            role=slots[first_slot],
        )
        hist.append_entry(job_dir, entry)
        write_manifest(job_dir, manifest)
    except BaseException:
        shutil.rmtree(job_dir, ignore_errors=True)
        raise
    jobs_dir.register(job_id, make_current=make_current, rank=rank)
    return Job(jobs_dir, job_id, job_dir)
