"""Creating a job: its folder, workspace, manifest, history, README and index entry.

Every way to create a job says what it wants with one model, :class:`JobSpec`:
``create_job`` takes it (or its fields as keywords), ``logist job create``
makes its options from it (name, type, limits and help from the field), and a
fixture's ``job.json`` is one. A new create option is one new field.

The creation is the history's first entry (a ``user_action`` named
``create``), so the state right after create, the baseline, is on record
like every later state.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from ..views.refresh import refresh
from ..errors import ConfigError, UsageError, format_validation_error
from ..store.entries import UserInput
from ..store.jobsdir import JobsDir, check_job_id
from ..store.session import JobFiles
from ..store.upgrade import WORKSPACE_CONTEXT
from ..store.manifest import JobManifest, JobSettings, Source, Turn
from ..store.config import JobDefaults
from ..store.roles import load_roles
from ..store.skills import ActiveSkill, load_skill
from ..store.manifest import PLANNER, WORKER, WORKFLOW_SLOTS
from ..workspace.repository import Workspace
from .workflow import creation

#: What ``job create`` adds to a setting's help: how an option given at create acts on another.
CREATE_NOTES = {"allowed_commands": " Giving one at create implies the allow command policy."}


def _shown(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    return f"{value:,}" if isinstance(value, int) else f"{value:g}"


def _setting(name: str) -> tuple[Any, Any]:
    """The JobSpec field of the job setting ``name``: its type, limits and
    help are :class:`JobDefaults`'s, so the two cannot disagree; unset (None,
    or an empty list) means the jobs directory's default."""
    field = JobDefaults.model_fields[name]
    limits = {key: getattr(rule, key) for rule in field.metadata for key in ("ge", "gt", "le", "lt") if hasattr(rule, key)}
    default = field.get_default(call_default_factory=True)
    help_text = field.description + CREATE_NOTES.get(name, "")
    if isinstance(default, list):
        return field.annotation, Field(default=[], description=help_text + " Repeatable.", **limits)
    if default is not None:
        help_text += f" Default {_shown(default)}, or config.json's defaults."
    return Optional[field.annotation], Field(default=None, description=help_text, **limits)


class _JobWhat(BaseModel):
    """What the job is; :class:`JobSpec` adds the settings."""

    model_config = ConfigDict(extra="forbid")

    objective: Optional[str] = Field(
        default=None, description="What the job must achieve (with --skill: defaults to the skill's description).")
    details: str = Field(default="", description="Background, constraints, hints.")
    acceptance: list[str] = Field(default=[], description="An acceptance criterion (repeatable).")
    files: list[str] = Field(default=[], description=(
        "A file to give the Worker: copied into the workspace, or with --from-repo a path in it (repeatable)."))
    from_repo: Optional[str] = Field(
        default=None, description="Start the workspace as a clone of this git repository (never modified).")
    ref: Optional[str] = Field(default=None, description="With --from-repo: the branch, tag or commit to start from.")
    model: Optional[str] = Field(default=None, description="Use this model for every role of the job.")
    llm_alias: Optional[str] = Field(default=None, description=(
        "Use this model alias (model_aliases in config.json, such as CHEAP) for every role of the job."))
    workflow: Optional[Literal["default", "planned", "solo"]] = Field(
        default=None, description=(
            "default: Worker then Supervisor, then a person approves; planned: a Planner routes work to the roles; "
            "solo: the Worker alone, its COMPLETED ([DONE]) ends the job. Unset: solo with --skill (default with "
            "--review), else default."))
    review: Optional[bool] = Field(
        default=None, description="With --skill: keep the Supervisor's review and a person's approval (the default "
                                   "workflow) instead of ending the job at the Worker's [DONE]. --no-review: a solo "
                                   "job with no checks ends SUCCESS at the Worker's [DONE] (without it, a person "
                                   "approves).")
    planner: Optional[str] = Field(
        default=None, description="With --workflow planned: the role in the Planner's place (default Planner).")
    # Not "roles": the manifest's ``roles`` is every slot; these are only the added ones.
    extra_roles: list[str] = Field(
        default=[], description="With --workflow planned: another role the Planner can address (repeatable).")
    worker: Optional[str] = Field(default=None, description="The role in the Worker's place (default Worker).")
    supervisor: Optional[str] = Field(
        default=None, description="The role in the Supervisor's place (default Supervisor).")
    rank: Optional[int] = Field(default=None, ge=0, description="Position in the queue (0 = first); default last.")
    skill: Optional[str] = Field(default=None, description="Make the job from this skill (logist skill list).")
    params: dict[str, str] = Field(default={}, description="A skill parameter (repeatable).")
    make_current: bool = Field(
        default=True, description="Make it the current job (default; --no-current leaves the current job as it is).")


#: Its fields: :class:`_JobWhat`'s, then one per :class:`JobDefaults` setting.
JobSpec = create_model(
    "JobSpec", __base__=_JobWhat, __module__=__name__,
    __doc__="What a new job should be. Every field is optional but the objective (which a skill can supply); "
            "settings left unset come from config.json.",
    **{name: _setting(name) for name in JobDefaults.model_fields},
)


#: The fields that become the job's settings (the rest say what the job is).
SETTINGS = tuple(name for name in JobSpec.model_fields if name in JobDefaults.model_fields)


def create_job(jobs_dir: JobsDir, job_id: str, spec: Union[JobSpec, str, None] = None, **options: Any) -> JobFiles:
    """Create a job and return it.

    ``spec`` is a :class:`JobSpec`, or the objective with the other fields as
    keywords: ``create_job(jobs, "hello", "Write hello.py", max_steps=3)``.
    ``files`` are local files copied into the workspace (or, with
    ``from_repo``, paths already in it) that the Worker is shown in its
    opening message."""
    spec = as_spec(spec, options)
    check_job_id(job_id)
    spec = spec.model_copy(update={"workflow": _workflow(spec)})
    active_skill, objective, max_steps = None, spec.objective, spec.max_steps
    given_checks: list[str] = []
    if spec.skill:
        template = load_skill(spec.skill, jobs_dir.path)
        values = template.resolve_params(spec.params)
        active_skill = ActiveSkill(
            name=template.name, params=values, instructions=template.render(values), protocol=template.protocol,
            prompted=bool(objective and objective.strip()))
        objective = objective or template.render_text(template.description, values)
        if max_steps is None:
            max_steps = template.max_steps
        given_checks = [template.render_text(check, values) for check in template.checks]
    elif spec.params:
        raise UsageError("--param goes with --skill")
    if not objective or not objective.strip():
        raise UsageError("a job needs an objective (--objective TEXT)")
    jobs_dir.init()
    roles = load_roles(jobs_dir.path)
    slots = _slots(spec, roles)
    given_checks += [check for name in slots.values() for check in roles[name].checks]
    model = spec.model
    if spec.llm_alias:
        if spec.model:
            raise UsageError("give --model or --llm-alias, not both")
        # Checked now, so a job never starts with an alias nothing defines;
        # kept as the alias, so config.json decides the model at each call.
        jobs_dir.config().alias(spec.llm_alias, "--llm-alias")
        model = spec.llm_alias
    # The job's own checks; else its skill's and its roles' (each once); else config.json's defaults.
    checks = spec.checks or list(dict.fromkeys(given_checks))
    settings = _settings(spec.model_copy(update={"max_steps": max_steps, "checks": checks}), jobs_dir.config().defaults)

    first_slot = PLANNER if spec.workflow == "planned" else WORKER
    job = jobs_dir.new_job(job_id)
    session = job.session
    job.dir.mkdir(parents=True)
    try:
        baseline, source, rel_files = _make_workspace(spec, job.workspace, job_id)
        drafted, started = creation()  # the workflow table's create row
        manifest = JobManifest(
            job_id=job_id,
            status=started,
            objective=objective.strip(),
            details=spec.details.strip(),
            acceptance_criteria=[a.strip() for a in spec.acceptance if a.strip()],
            files=rel_files,
            roles=slots,
            model=model,
            settings=settings,
            skill=active_skill,
            source=source,
            baseline_commit=baseline,
            workspace_commit=baseline,
            workflow=spec.workflow,
            no_review=spec.review is False,
            turn=Turn(slot=first_slot, role=slots[first_slot]),
        )
        session.create_history()
        before = manifest.model_copy(deep=True)
        before.status = drafted
        entry = session.new_entry(
            before, manifest, kind="user_action",
            user_input=UserInput(action="create", text=objective.strip()), workspace_commit=baseline,
            role=slots[first_slot], definition=manifest.definition(),
        )
        session.record(entry, manifest)
        session.write_readme(manifest.objective)
        project_context = job.workspace / WORKSPACE_CONTEXT
        if project_context.is_file():  # read from here on: the model cannot change it (engine/prompt.py)
            session.write_context(project_context.read_bytes())
    except BaseException:
        shutil.rmtree(job.dir, ignore_errors=True)
        raise
    jobs_dir.register(job_id, make_current=spec.make_current, rank=spec.rank)
    refresh(job)  # the transcript starts with the create entry
    return job


def as_spec(spec: Union[JobSpec, str, None], options: dict[str, Any]) -> JobSpec:
    """The one JobSpec from create_job's arguments; a bad field is a
    :class:`ConfigError` naming it."""
    if isinstance(spec, JobSpec):
        if not options:
            return spec
        options = {**spec.model_dump(exclude_unset=True), **options}
    elif spec is not None:
        options = {**options, "objective": spec}
    try:
        return JobSpec.model_validate(options)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, "job options")) from None


def _workflow(spec: JobSpec) -> str:
    """The job's workflow: the one asked for, else solo for a skill's job (as kosmos-panel's [DONE] ends a skill)
    unless ``review`` keeps the Supervisor, else default."""
    if spec.review and spec.workflow == "solo":
        raise UsageError("--review keeps the Supervisor; --workflow solo has none: give one of them")
    if spec.workflow is not None:
        return spec.workflow
    return "solo" if spec.skill and not spec.review else "default"


def _slots(spec: JobSpec, roles: dict) -> dict[str, str]:
    """Slot -> role name: the workflow's slots, then the spec's choices."""
    slots = dict(WORKFLOW_SLOTS[spec.workflow])
    for slot, name in (("worker", spec.worker), ("supervisor", spec.supervisor), ("planner", spec.planner)):
        if name:
            if slot not in slots and spec.workflow == "solo":
                raise UsageError(f"--{slot}: a solo job has only a Worker (a skill's job is solo unless --review)")
            if slot not in slots:
                raise UsageError(f"--{slot} goes with --workflow planned")
            slots[slot] = name
    for name in spec.extra_roles:
        if spec.workflow != "planned":
            raise UsageError("--role adds a role the Planner can address; it goes with --workflow planned")
        if name not in slots.values():
            slots[name.lower()] = name
    for slot, name in slots.items():
        if name not in roles:
            raise UsageError(f"the {slot} role '{name}' is not defined (known: {', '.join(sorted(roles.keys()))})")
        roles[name]  # a role whose file does not load raises that file's error
    return slots


def _settings(spec: JobSpec, defaults: JobDefaults) -> JobSettings:
    """The jobs directory's defaults with the spec's settings on top."""
    chosen = {name: getattr(spec, name) for name in SETTINGS if getattr(spec, name) not in (None, [])}
    if spec.allowed_commands and spec.command_policy is None:
        chosen["command_policy"] = "allow"
    return JobSettings.model_validate({**defaults.model_dump(), **chosen})


def _make_workspace(spec: JobSpec, path: Path, job_id: str) -> tuple[str, Source, list[str]]:
    """The workspace (empty, or cloned) with the spec's files committed:
    its baseline commit, where it came from and the files, relative."""
    if spec.from_repo:
        workspace = Workspace.clone(Path(spec.from_repo), spec.ref, path, job_id)
        baseline = workspace.head()
        source = Source(repo=str(Path(spec.from_repo).resolve()), ref=spec.ref, commit=baseline)
    else:
        if spec.ref:
            raise UsageError("--ref goes with --from-repo")
        workspace = Workspace.init(path, job_id)
        baseline = workspace.head()
        source = Source()
    rel_files: list[str] = []
    for name in spec.files:
        candidate = Path(name)
        if spec.from_repo and not candidate.is_absolute() and (path / name).is_file():
            rel_files.append(candidate.as_posix())
        elif candidate.is_file():
            target = path / candidate.name
            if target.exists():
                raise UsageError(f"--file {name}: {candidate.name} already exists in the workspace")
            shutil.copyfile(candidate, target)
            rel_files.append(candidate.name)
        else:
            raise UsageError(f"--file {name}: no such file")
    if rel_files:
        baseline = workspace.commit_all(f"logist: files given to job {job_id}") or baseline
    return baseline, source, rel_files
