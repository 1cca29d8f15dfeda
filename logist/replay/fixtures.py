"""Recorded jobs (fixtures): a folder that recreates a job and replays it.

A fixture folder (``fixtures/<name>/``, see ``fixtures/README.md``) holds::

    job.json            how to create the job: a JobSpec, and the job's id
    workspace/          the files the job starts from (job.json "files")
    job_manifest.json   the manifest the recorded job ended with
    jobHistory.json     its whole history: every prompt, answer and decision
    response_formats/   the response_format values its calls sent, by digest
                        (:mod:`logist.store.response_formats`)

From it a job is created again (:func:`create_from_fixture`) and replayed,
either through poststep (``job replay``) or live against a
:class:`logist.replay.server.ReplayLLMServer` serving the history
(:func:`logist.replay.apply.replay_history` with a ``base_url``); ``logist demo``
does the latter. A fixture carries its own settings: those job.json leaves
out are the built-in defaults, not the jobs directory's config.json, so it
replays the same in any jobs directory. What else shaped its requests (the
model, the context window and structured_output form its machine chose) is
in each call's recorded metadata, and a replay uses those
(:class:`logist.engine.prepare.Recorded`), so the requests are the recorded
ones byte for byte whatever the replaying config.json says.

:func:`record_fixture` makes a fixture from any job (one run against a real
model, say); :func:`record_scripted` re-records a fixture whose answers were
written by hand, and :func:`rerecord` one from its own recorded answers,
after a change to the prompts.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional, Union

from pydantic import ConfigDict, Field, ValidationError

from ..store.atomic import atomic_write, atomic_write_json
from ..store.config import JobDefaults
from ..engine.create import SETTINGS, JobSpec, create_job
from ..errors import ConfigError, LogistError, format_validation_error
from ..store.history import JobHistory
from ..store.recovery import manifest_at
from ..store.jobsdir import JOB_ID_RE, JobsDir
from ..store.session import JobFiles
from ..store.manifest import JobManifest, parse_manifest
from ..resources import data_dir
from ..store.manifest import WORKFLOW_SLOTS
from .apply import read_history_file
from ..engine.decide import user_action
from ..engine.step import step_once
from .scripted import ScriptedLLMServer
from .apply import replay_history
from .server import ReplayLLMServer

JOB_SPEC = "job.json"
FIXTURE_SCHEMA = "fixture-job.schema.json"

#: A step of a hand-written script: an answer, or a person's action
#: ``(action, text)`` such as ``("answer", "yes")`` or ``("approve-command", None)``.
ScriptItem = Union[str, tuple[str, Optional[str]]]


def fixture_path(name_or_path: Union[str, Path]) -> Path:
    """A fixture folder: a path, or the name of a bundled fixture."""
    path = Path(name_or_path)
    if path.exists() or len(path.parts) != 1:
        return path
    bundled = data_dir("fixtures") / path.name
    return bundled if bundled.is_dir() else path


class FixtureJob(JobSpec):
    """A fixture's ``job.json``: the recorded job's id and how to create the
    job again, in the fields of :class:`JobSpec` (``job create``'s options)."""

    # Python's re: the job id pattern looks ahead (no "..", no final "." or ".lock").
    model_config = ConfigDict(extra="forbid", regex_engine="python-re")
    schema_: str = Field(default=None, alias="$schema")  # absent or a string
    """The JSON Schema of this file (fixture-job.schema.json in Logist's schemas/ folder), for editors."""
    job_id: str = Field(default=None, pattern=JOB_ID_RE.pattern)  # absent or a string
    """The recorded job's id: a job created from the fixture gets it unless given another (default: the folder's name)."""
    objective: str = Field(min_length=1)
    """What the job must achieve."""


@dataclass
class Fixture:
    path: Path
    #: job.json as written: the job's id and its JobSpec's fields.
    spec: dict
    job_spec: JobSpec

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def files(self) -> JobFiles:
        """The fixture folder read as a job's folder (its manifest, history, workspace files, response formats)."""
        return JobFiles(self.path)

    @property
    def history_path(self) -> Path:
        return self.files.history_path

    def history(self) -> JobHistory:
        return read_history_file(self.history_path)

    def manifest(self) -> JobManifest:
        """The manifest the recorded job ended with."""
        path = self.files.manifest_path
        return parse_manifest(json.loads(path.read_text(encoding="utf-8")), str(path))


def load_fixture(name_or_path: Union[str, Path]) -> Fixture:
    path = fixture_path(name_or_path)
    spec_file = path / JOB_SPEC
    try:
        spec = json.loads(spec_file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path} is not a fixture: it has no {JOB_SPEC}") from None
    except ValueError as exc:
        raise ConfigError(f"{spec_file}: not valid JSON: {exc}") from None
    if not isinstance(spec, dict):
        raise ConfigError(f"{spec_file}: it needs an object with an objective (and a job_id text)")
    if not spec.get("objective"):
        raise ConfigError(f"{spec_file}: it needs an objective")
    try:
        written = FixtureJob.model_validate(spec)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, str(spec_file))) from None
    job_spec = JobSpec.model_validate(written.model_dump(exclude_unset=True, exclude={"schema_", "job_id"}))
    return Fixture(path, spec, job_spec)


def create_from_fixture(
    jobs: JobsDir, fixture: Union[Fixture, str, Path], job_id: Optional[str] = None, *, make_current: bool = True
) -> JobFiles:
    """Create the fixture's job (under ``job_id``, else its recorded id)."""
    if not isinstance(fixture, Fixture):
        fixture = load_fixture(fixture)
    spec = fixture.job_spec
    # Settings job.json leaves out are the built-in defaults, not config.json's.
    built_in = JobDefaults()
    unset = {name: getattr(built_in, name) for name in SETTINGS if name not in spec.model_fields_set}
    if spec.allowed_commands and "command_policy" in unset:
        unset["command_policy"] = "allow"
    if spec.skill and "max_steps" in unset:
        del unset["max_steps"]  # the skill's own
    files = [str(fixture.files.workspace / name) for name in spec.files]
    return create_job(
        jobs, job_id or fixture.spec.get("job_id") or fixture.name, spec, **unset, files=files,
        make_current=make_current,
    )


def job_spec(job: JobFiles) -> JobSpec:
    """How ``job`` was created, from its history's first entry: the fields
    that differ from a plain job (settings: from the built-in defaults)."""
    created = next(job.entries(), None)
    if created is None or created.user_input is None or created.user_input.action != "create":
        raise LogistError(f"job '{job.id}' has no creation entry at the start of its history")
    start = manifest_at(job, created, job.manifest())
    if start.source.repo:
        raise LogistError(
            f"job '{job.id}' was created from a repository; only jobs created from files can be recorded as fixtures"
        )
    fields: dict = {
        "objective": start.objective, "details": start.details, "acceptance": start.acceptance_criteria,
        "files": start.files,
    }
    # Said when it is not the one a job of this kind gets unasked (solo for a skill's job, else default).
    if start.workflow != ("solo" if start.skill else "default"):
        fields["workflow"] = start.workflow
    slots = WORKFLOW_SLOTS[start.workflow]
    for slot, name in slots.items():
        if start.roles.get(slot) != name:
            fields[slot] = start.roles.get(slot)
    fields["extra_roles"] = [name for slot, name in start.roles.items() if slot not in slots]
    if start.skill:
        fields["skill"], fields["params"] = start.skill.name, start.skill.params
    built_in = JobDefaults()
    for name in SETTINGS:
        value = getattr(start.settings, name)
        if value != getattr(built_in, name):
            fields[name] = value
    if start.settings.allowed_commands:
        # Said even when it is the built-in one: allowed commands alone would imply "allow".
        fields["command_policy"] = start.settings.command_policy
    return JobSpec.model_validate(fields)


def fixture_json(job: JobFiles) -> dict:
    """job.json for ``job``: its schema, its id, then the fields of its JobSpec
    that are not the defaults (so a fixture says only what is particular to it)."""
    return {"$schema": FIXTURE_SCHEMA, "job_id": job.id, **job_spec(job).model_dump(mode="json", exclude_defaults=True)}


def record_fixture(job: JobFiles, into: Union[str, Path]) -> Path:
    """Write ``job`` as a fixture folder ``into`` (replacing what it held)."""
    into = Path(into)
    if into.is_dir() and any(into.iterdir()) and not (into / JOB_SPEC).is_file():
        raise LogistError(f"{into} is neither empty nor a fixture folder (it has no {JOB_SPEC}); choose another")
    spec = fixture_json(job)
    start = manifest_at(job, next(job.entries()), job.manifest())
    with job.lock():
        history = job.history_path.read_bytes()
        manifest = job.manifest_path.read_bytes()
        # The files as the job started with them (its first commit), not as
        # they are now.
        files = {name: job.repo.file_at(start.workspace_commit, name) for name in spec.get("files", [])}
        formats = {path.name: path.read_bytes() for path in sorted(job.response_formats_dir.glob("*.json"))}
    target = JobFiles(into)
    into.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(target.workspace, ignore_errors=True)
    shutil.rmtree(target.response_formats_dir, ignore_errors=True)
    for name, data in files.items():
        atomic_write(target.workspace / name, data)
    for name, data in formats.items():
        atomic_write(target.response_formats_dir / name, data)
    atomic_write_json(into / JOB_SPEC, spec)
    atomic_write(target.manifest_path, manifest)
    atomic_write(target.history_path, history)
    return into


def record_scripted(fixture_dir: Union[str, Path], script: Iterable[ScriptItem]) -> list[str]:
    """Re-record a fixture whose answers were written by hand.

    Creates the job from the folder's job.json and workspace/ in a temporary
    jobs directory, runs ``script`` live (answers through a
    :class:`~logist.replay.scripted.ScriptedLLMServer`, a person's actions in
    between), and writes the result back into the folder. Returns one line
    per step saying what it did.
    """
    fixture = load_fixture(fixture_dir)
    results = []
    with tempfile.TemporaryDirectory() as tmp, ScriptedLLMServer() as server:
        job = create_from_fixture(JobsDir(Path(tmp) / "jobs"), fixture)
        for item in script:
            if isinstance(item, str):
                server.add(item)
                r = step_once(job, base_url=server.base_url)
                results.append(f"step {r.sequence}: {r.role} {r.action} -> {r.status}" + (f" ({r.error})" if r.error else ""))
            else:
                action, text = item
                m = user_action(job, "answer" if action == "skip" else action, text, skip=action == "skip")
                results.append(f"entry {m.last_sequence}: {action} -> {m.status}")
        record_fixture(job, fixture.path)
    return results


def rerecord(fixture_dir: Union[str, Path]) -> list[str]:
    """Re-record a fixture from its own recorded answers and actions.

    For after a change to the prompts: the job runs live again against a
    lenient replay of its old history, so the answers and decisions stay and
    the prompts become today's. Returns the differences the replay found.
    """
    fixture = load_fixture(fixture_dir)
    history = fixture.history()
    with tempfile.TemporaryDirectory() as tmp, ReplayLLMServer(history, strict=False) as server:
        job = create_from_fixture(JobsDir(Path(tmp) / "jobs"), fixture)
        replay_history(job, history, base_url=server.base_url)
        record_fixture(job, fixture.path)
    return server.mismatches
