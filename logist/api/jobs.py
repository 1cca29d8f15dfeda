"""The verbs of :mod:`logist.api`: :class:`Jobs` and :class:`Job`, the
read side's :class:`~logist.api.reading.JobsReader` and
:class:`~logist.api.reading.JobReader` with every verb of ``logist job
...`` added, and the facts about the engine a caller shows.

This module gathers the engine's, the replay's and the store's functions
under one object per job, and decides once what every call of a process
shares: the endpoint (``base_url``), the request timeout, how long to wait
for a job's lock, and what the process learns of its endpoints
(:class:`logist.model.client.Endpoints`, made by :class:`Jobs`, closed by
:meth:`Jobs.close` or at the end of a ``with`` block; nothing of it
outlives the :class:`Jobs` that made it). :mod:`logist.api` gives its
names when they are first asked for (the package's docstring says why).
"""

from __future__ import annotations

import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Callable, Literal, Optional, Sequence, Union

from ..views.refresh import refresh
from ..agents.providers import PINNED, PROVIDERS, find_program, version as agent_version
from ..engine.budget import BUDGETS, SETTABLE, raise_hint, stopped_by_budget  # noqa: F401 (BUDGETS, SETTABLE: logist.api's)
from ..engine.call import CallWatch, call_settings, finish_interrupted
from ..engine.commands import CommandWatch
from ..engine.context import context_window, sized_call
from ..engine.create import JobSpec, as_spec, create_job  # noqa: F401 (as_spec: logist.api's)
from ..engine.checks import approval_refusal, check_job
from ..engine.decide import user_action
from ..engine.choices import DEFAULT_CONCURRENCY, DEFAULT_ENGINE, engine_names  # noqa: F401 (logist.api's)
from ..engine.engines import BatchCounts, make_engine, run_batch
from ..engine.export import export_branch, export_patch, job_diff
from ..engine.loop import QueueOutcome, run_job, step_turn
from ..engine.prepare import answer_budget, chosen_model, model_for_endpoint, resolve_model, structured_output
from ..engine.rewind import rewind
from ..engine.session import upgrade
from ..engine.apply import StepResult
from ..engine.step import post_answer, step_once
from ..engine import workflow as _workflow
from ..engine.workflow import NEEDS_PERSON, STEPPABLE, Rule
from ..errors import ConfigError
from ..secrets.redact import url_shown
from ..model.client import Endpoints, LLMSettings, list_models, probe_form
from ..protocol.answer import file_changes_from
from ..protocol.decoding import form_name
from ..model.base import Model
from ..replay.apply import entry_by_sequence, post_recorded, read_history_file, replay_history
from ..replay.demo import demo_summary, run_demo
from ..replay.fixtures import create_from_fixture
from ..store.config import (DEFAULT_BASE_URL, endpoint_source, key_variable, resolve_api_key, resolve_base_url,
                           resolve_endpoint)
from ..store.entries import HistoryEntry, JobHistory
from ..store.fsck import FsckReport, fsck as check_files
from ..store import jobsdir
from ..store.manifest import JobManifest, Status
from ..store.prompts import Prompts
from ..store.roles import RoleManifest, Roles, get_role, load_roles
from ..store.session import JobFiles
from ..store.skills import Skill, list_skills, load_skill
from ..workspace.repository import ChangeDiff
from .reading import JobReader, JobsReader


OnStep = Optional[Callable[[StepResult], None]]


@dataclass
class Preview:
    """The exact request the job's next step would send (no call is made,
    and no file of the job is written: a job in an older format is read as
    it is)."""

    #: The Chat Completions body, key for key as the step sends it.
    body: dict
    #: The endpoint's ``/chat/completions`` would receive it (the base URL, without a trailing slash).
    endpoint: str
    #: A summary call (compaction) is due instead of the role's: the rounds it would summarise.
    compaction_rounds: Optional[int]
    #: The role whose turn it is.
    role: str
    #: Why a step would stop before any call (no endpoint configured), or None.
    unconfigured: Optional[str]
    #: Always None: a preview never rewrites a job (it did before 0.3.0). See :attr:`older_format`.
    upgraded: Optional[str] = None
    #: The job is in an older format (read as it is), and ``logist job upgrade`` (or the next command
    #: that changes it) rewrites it: said in a line; None when it is current.
    older_format: Optional[str] = None


@dataclass(frozen=True)
class Endpoint:
    """Where a process's calls go, and why (``logist doctor`` shows it)."""

    #: The endpoint's base URL; None when none is named and no key is set (a call then stops before it is made).
    url: Optional[str]
    #: What named it: ``--base-url``, the environment variable, ``config.json``; "" for none (OpenAI's default).
    named_by: str
    #: The environment variable the API key is read from, or None when no key is set.
    key_variable: Optional[str]


@dataclass(frozen=True)
class RoleFacts:
    """What a role's calls would be (``logist doctor``): its model, price, window and answer size."""

    role: RoleManifest
    #: The model its calls name, and what named it.
    model: str
    model_from: str
    #: config.json's price for the model (None: unknown).
    price: Optional[object]
    #: The model's context window in tokens (None: unknown), and where it was found.
    context_window: Optional[int]
    context_window_from: Optional[str]
    #: The max_tokens every call of the role carries.
    max_tokens: int
    #: The structured-output setting its calls use ("off (...)" when the role's protocol has none).
    structured_output: str


@dataclass(frozen=True)
class AgentFacts:
    """A coding agent a role may name (``logist agents``, ``logist doctor``)."""

    #: Its name in a role file (``"agent": NAME``).
    name: str
    #: The program looked up on PATH ("" for ``command``: the role's agent_command names it).
    program: str
    #: The API it calls through the gateway: chat, responses or messages.
    api: str
    description: str
    #: Where its program was found on PATH (None: not installed).
    path: Optional[str] = None
    #: The version it reports (asked only when wanted: some agents take seconds to say it).
    version: Optional[str] = None
    #: The version Logist's tests run (the agents' command lines were written against it).
    tested: Optional[str] = None


@dataclass(frozen=True)
class Workflow:
    """The workflow table (what ``logist workflow`` prints): every state change a job can make."""

    #: Its rows, in order.
    rules: tuple[Rule, ...]
    #: The named next states that depend on the job, and what each means.
    targets: dict[str, str]
    #: What each row does to the turn.
    turn_effects: dict[str, str]
    #: Who may act, by key, and the name each is shown by.
    who_names: dict[str, str]
    #: The ``who`` of a row any role may take.
    any_role: frozenset
    #: What a person can do next in a state.
    hint: Callable[[Status], str]


def workflow() -> Workflow:
    """The workflow table (:data:`logist.engine.workflow.TABLE`) and what it names."""
    return Workflow(rules=_workflow.TABLE, targets=_workflow.TARGETS, turn_effects=_workflow.TURN_EFFECTS,
                    who_names=_workflow.WHO_NAMES, any_role=_workflow.ROLES, hint=_workflow.describe_state_hint)


def check_engine(engine: str, concurrency: Optional[int] = None, address: Optional[str] = None) -> None:
    """Refuse (:class:`~logist.errors.ConfigError`) what ``engine`` cannot
    take (``--address`` for one without a cluster), before a batch starts."""
    make_engine(engine, concurrency, address)


def read_history(path: Union[str, Path]) -> JobHistory:
    """A recorded ``jobHistory.json`` (a fixture's, or another job's), read and checked."""
    return read_history_file(Path(path))


def open(path: Union[str, Path, None] = None, *, base_url: Optional[str] = None,  # noqa: A001 (logist.open)
         request_timeout: Optional[float] = None, lock_timeout: float = 0, model: Optional[Model] = None) -> "Jobs":
    """The jobs directory at ``path`` (None: found upward from here like git,
    else ``./jobs``; created by the first job). ``base_url``: the
    OpenAI-compatible endpoint (default ``LOGIST_BASE_URL``, then
    ``OPENAI_BASE_URL``, then config.json's); ``request_timeout``: seconds
    to wait for the model (default config.json's); ``lock_timeout``:
    seconds to wait for a job another process holds (-1: for ever); ``model``: what answers every
    call instead of the endpoint (a :class:`logist.model.base.Model`, e.g. the in-memory
    :class:`logist.replay.scripted.ScriptedModel`).

    The :class:`Jobs` keeps a client per endpoint its calls use:
    ``with logist.open(...) as jobs:`` closes them at the end of the block;
    without ``with``, :meth:`Jobs.close` does (or the process's end)."""
    return Jobs(jobsdir.JobsDir(path), base_url=base_url, request_timeout=request_timeout, lock_timeout=lock_timeout,
                model=model)


class Jobs(JobsReader):
    """A jobs directory: its jobs, and what every call made through it shares.

    Its calls keep a client per endpoint (:class:`logist.model.client.Endpoints`),
    as an ``httpx.Client`` keeps its connections: :meth:`close` releases
    them, and ``with`` closes them at the end of the block. A :class:`Jobs`
    is the one place a process's endpoint settings are decided: the
    endpoint (``base_url``), the request timeout and the endpoints' clients
    are given from here to every call its jobs make."""

    def __init__(self, directory: jobsdir.JobsDir, *, base_url: Optional[str] = None,
                 request_timeout: Optional[float] = None, lock_timeout: float = 0,
                 endpoints: Optional[Endpoints] = None, model: Optional[Model] = None):
        super().__init__(directory)
        self.base_url = base_url
        self.request_timeout = request_timeout
        self.lock_timeout = lock_timeout
        #: What this process learned of its endpoints (clients, refused forms, windows).
        self.endpoints = endpoints if endpoints is not None else Endpoints(model)

    # -- lifecycle ----------------------------------------------------------------------------

    def close(self) -> None:
        """Close the endpoints' clients (their connections). The jobs can
        still be read and stepped after: a later call opens a client again."""
        self.endpoints.close()

    def __enter__(self) -> "Jobs":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def using(self, *, base_url: Optional[str] = None, request_timeout: Optional[float] = None,
              lock_timeout: float = 0) -> "Jobs":
        """The same jobs directory with these settings, sharing this one's
        endpoints (closing either closes their clients)."""
        return Jobs(self.directory, base_url=base_url, request_timeout=request_timeout, lock_timeout=lock_timeout,
                    endpoints=self.endpoints)

    # -- the directory ------------------------------------------------------------------------

    def init(self) -> bool:
        """Set up the directory (index, roles/, skills/); False when it was already."""
        return self.directory.init()

    def select(self, job_id: str) -> "Job":
        """Make ``job_id`` the current job."""
        return self.of(self.directory.select(job_id))

    # -- roles, skills, prompts ---------------------------------------------------------------

    def roles(self) -> Roles:
        """The roles jobs here can use (built-ins, then the directory's); ``.errors()``: those that did not load."""
        return load_roles(self.path)

    def role(self, name: str) -> RoleManifest:
        """One role (a :class:`~logist.errors.NotFoundError` naming those there are)."""
        return get_role(name, self.path)

    def prompts(self, *, builtin_only: bool = False) -> Prompts:
        """The prompt templates in effect here (``builtin_only``: Logist's own)."""
        return Prompts(None) if builtin_only else Prompts(self.path, self.roles())

    def skills(self, errors: Optional[list[str]] = None) -> list[Skill]:
        """Every skill that loads; one that does not is appended to ``errors`` (else raised)."""
        return list_skills(self.path, errors)

    def skill(self, name: str) -> Skill:
        return load_skill(name, self.path)

    def agents(self, *, versions: bool = False) -> list[AgentFacts]:
        """The coding agents a role may name (:data:`logist.agents.PROVIDERS`),
        each with where its program is on PATH; ``versions``: also the version
        each installed one reports (it is run once with ``--version``)."""
        facts = []
        for name, agent in PROVIDERS.items():
            path = find_program(agent.program) if agent.program else None
            facts.append(AgentFacts(name, agent.program, agent.api, agent.description, path,
                                    agent_version(agent, path) if versions and path else None, PINNED.get(name)))
        return facts

    # -- endpoints ----------------------------------------------------------------------------

    def endpoint(self, base_url: Optional[str] = None) -> Endpoint:
        """Where calls go and what named it (``base_url``: a command's
        ``--base-url``, else this one's): with none named, OpenAI's when a
        key is set, else none."""
        named, source = endpoint_source(base_url or self.base_url, self.config())
        variable = key_variable()
        return Endpoint(url=named or (DEFAULT_BASE_URL if variable else None), named_by=source, key_variable=variable)

    def endpoint_url(self, base_url: Optional[str] = None) -> str:
        """The endpoint calls go to (OpenAI's when none is named), as a
        failed call's line names it."""
        return resolve_base_url(base_url or self.base_url, self.config())

    def require_endpoint(self, base_url: Optional[str] = None) -> str:
        """The endpoint calls go to; :class:`~logist.errors.ConfigError`
        (:data:`NOT_CONFIGURED`) when none is named and no key is set."""
        return resolve_endpoint(base_url or self.base_url, self.config())

    def check_settings(self, base_url: Optional[str] = None) -> LLMSettings:
        """The settings ``logist doctor`` and ``logist models`` ask the
        endpoint with: a short timeout (10 s at most), no retries, this
        directory's endpoints' clients."""
        config = self.config()
        return LLMSettings(base_url=self.require_endpoint(base_url), api_key=resolve_api_key(),
                           endpoints=self.endpoints, timeout=min(config.request_timeout, 10.0), max_retries=0)

    def models(self, settings: LLMSettings) -> list[str]:
        """The models the endpoint lists (its ``GET /models``), sorted."""
        return list_models(settings)

    def role_facts(self, role: RoleManifest, settings: Optional[LLMSettings] = None) -> RoleFacts:
        """What ``role``'s calls would be for a job that names no model;
        ``settings``: the endpoint to ask for the model's context window
        (None: config.json's only)."""
        config = self.config()
        no_job = SimpleNamespace(model=None)
        model = resolve_model(config, no_job, role, None)
        model_from = chosen_model(config, no_job, role, None)[1]
        if settings is not None and settings.base_url.rstrip("/") != DEFAULT_BASE_URL:
            try:
                served = model_for_endpoint(config, no_job, role, None, settings.endpoints.served_models(settings),
                                            url_shown(settings.base_url))
            except ConfigError as exc:
                served, model_from = None, f"{model_from}; but {exc}"
            if served:
                model, model_from = served, "the endpoint's only model (GET /models), as none is named"
        window = context_window(config, role, model, settings)
        setting = "off (the role's own response_format)" if role.response_format is not None else \
            "off (the tags protocol)" if role.protocol == "tags" else structured_output(role, config, model)
        return RoleFacts(role=role, model=model, model_from=model_from,
                         price=config.price(model), context_window=window.tokens,
                         context_window_from=window.source or None,
                         max_tokens=answer_budget(role, role.protocol, window.tokens), structured_output=setting)

    def probe(self, settings: LLMSettings, model: str, setting: str) -> str:
        """The strongest structured-output form the endpoint takes for
        ``model`` (one tiny call), by name; an :class:`~logist.errors.LLMCallError` when none works."""
        return form_name(probe_form(settings, model, setting))

    # -- jobs ---------------------------------------------------------------------------------

    def create(
        self, job_id: str, objective: Optional[str] = None, *, details: Optional[str] = None,
        acceptance: Sequence[str] = (), files: Sequence[str] = (), from_repo: Optional[str] = None,
        ref: Optional[str] = None, model: Optional[str] = None,
        workflow: Optional[Literal["default", "planned"]] = None, skill: Optional[str] = None,
        params: Optional[dict[str, str]] = None, max_steps: Optional[int] = None,
        max_cost_usd: Optional[float] = None, spec: Optional[JobSpec] = None,
    ) -> "Job":
        """Create a job (see :class:`~logist.engine.create.JobSpec` for what
        each field means); ``spec`` gives any field not named here, the
        keywords given win over it. A field left out takes JobSpec's default
        (settings: config.json's)."""
        given = {
            "objective": objective, "details": details, "acceptance": list(acceptance) or None,
            "files": list(files) or None, "from_repo": from_repo, "ref": ref, "model": model,
            "workflow": workflow, "skill": skill, "params": params, "max_steps": max_steps,
            "max_cost_usd": max_cost_usd,
        }
        fields = {name: value for name, value in given.items() if value is not None}
        # A bad value is a ConfigError naming its field (create_job checks the spec).
        return self.of(create_job(self.directory, job_id, spec, **fields))

    def create_from_fixture(self, fixture: Union[str, Path], job_id: Optional[str] = None) -> "Job":
        """Create a recorded job's job (a fixture folder, or a bundled
        fixture's name) under ``job_id``, else its recorded id; its history
        can then be replayed (:meth:`Job.replay`)."""
        return self.of(create_from_fixture(self.directory, fixture, job_id))

    def run_demo(self, job_id: str = "demo", *, echo: Callable[[str], None] = print,
                 summary: Optional[Callable[[str], None]] = None) -> StepResult:
        """``logist demo``: create a job from the bundled recording and run
        it against a local replay of it (no network, no key) until it waits
        for approval; ``echo`` gets the progress lines, ``summary`` (default
        ``echo``) where the job is and what to open. Its last step."""
        return run_demo(self.directory, job_id, echo=echo, summary=summary)

    def demo_summary(self, job_id: str, status: str) -> dict:
        """Where a demo job is, what to open and what to try next."""
        return demo_summary(self.directory, self.get(job_id).stored, status)

    def run_all(self, *, engine: str = DEFAULT_ENGINE, concurrency: Optional[int] = None,
                address: Optional[str] = None, model: Optional[str] = None, on_step: OnStep = None,
                on_outcome: Optional[Callable[[QueueOutcome, BatchCounts], None]] = None,
                watch: Optional[CallWatch] = None) -> list[QueueOutcome]:
        """Every queued job, each to its resting state under its lease
        (``job run --all``), on ``engine`` (serial, threads, ray, or one
        another package registers) with at most ``concurrency`` at once;
        ``on_outcome`` is told of each job as it finishes. The outcomes in
        queue order; jobs that have finished leave the queue."""
        return run_batch(self.directory, engine=engine, concurrency=concurrency, address=address, model=model,
                         on_step=on_step, on_outcome=on_outcome, watch=watch, base_url=self.base_url,
                         request_timeout=self.request_timeout, lock_timeout=self.lock_timeout,
                         endpoints=self.endpoints)

    def of(self, stored: JobFiles) -> "Job":
        """The :class:`Job` of a stored job (:class:`logist.store.session.JobFiles`)."""
        return Job(self, stored)


class Job(JobReader):
    """One job of a :class:`Jobs`: its state, its history and its verbs.

    Every verb takes the job's lock for what it changes and releases it
    before it returns, so a person (or another process) can act between
    any two of them."""

    jobs: Jobs

    # -- reading (more than JobReader's: the budgets' rules, the next request) ----------------

    def stopped_by_budget(self, manifest: Optional[JobManifest] = None) -> bool:
        """Whether a spent budget stopped the job (``manifest``: as read, else read now)."""
        return stopped_by_budget(self.stored, manifest or self.manifest())

    def hint(self, manifest: Optional[JobManifest] = None) -> str:
        """What a person can do next with the job (``manifest``: as read, else read now)."""
        manifest = manifest or self.manifest()
        return _workflow.describe_job_hint(manifest, self.stopped_by_budget(manifest))

    def waits_for(self, manifest: Optional[JobManifest] = None) -> str:
        """What the job waits for, in a line ("" for nothing: it is done, or
        its next step simply goes on): a person's decision (:meth:`hint`), or,
        for a job whose last call failed and that keeps its turn, the step
        that makes the call again, with the endpoint's reason."""
        manifest = manifest or self.manifest()
        if str(manifest.status) in NEEDS_PERSON:
            return self.hint(manifest)
        if manifest.status not in STEPPABLE:
            return ""
        last = self.stored.last_entry()
        response = last.response if last is not None and last.sequence == manifest.last_sequence else None
        if response is None or response.status != "FAILED" or not response.error:
            return ""
        reason = " ".join(response.error.split())
        reason = reason if len(reason) <= 200 else reason[:199] + "…"
        return (f"a step: its last call failed ({reason}); logist job step {self.id} makes it again, "
                "with the same conversation")

    def raise_hint(self, manifest: Optional[JobManifest] = None) -> Optional[str]:
        """How to raise the budget the job has spent, or None."""
        return raise_hint(self.id, manifest or self.manifest())

    def preview(self, *, model: Optional[str] = None, base_url: Optional[str] = None) -> Preview:
        """The exact next request, sized as a step sizes it (the endpoint
        may be asked for the model's context window; no call is made). No
        file of the job is written: a job in an older format is read as it
        is (:attr:`Preview.older_format` says so)."""
        manifest = self.manifest()
        base_url = base_url or self.jobs.base_url
        config = self.jobs.config()
        try:
            settings = call_settings(self.stored, manifest, config, base_url, self.jobs.request_timeout,
                                     endpoints=self.jobs.endpoints)
        except ConfigError as exc:  # what a step would say before any call
            settings, unconfigured = None, str(exc)
        else:
            unconfigured = None
        prepared = sized_call(self.stored, manifest, model, settings)
        return Preview(
            body=prepared.body, endpoint=resolve_base_url(base_url, prepared.config).rstrip("/"),
            compaction_rounds=prepared.compaction_target if prepared.is_compaction else None,
            role=prepared.role.name, unconfigured=unconfigured, older_format=self.format_note(),
        )

    def held_diff(self, manifest: Optional[JobManifest] = None) -> list[ChangeDiff]:
        """The file changes held for a person, each file as a unified diff
        against the workspace's content now, bounded (none held: empty).
        Raises :class:`~logist.errors.InvalidAnswer` when they no longer apply
        to the workspace (a file edited since), as approving them would: they
        are checked by the answer protocol again, which the read side
        (:class:`JobReader`) does not load."""
        held = (manifest or self.manifest()).pending_changes
        if not held:
            return []
        return self.stored.repo.diff_changes(file_changes_from(held))

    def diff(self, entry: Optional[int] = None, *, stat: bool = False) -> str:
        """What history entry ``entry`` changed in the workspace, or the whole job since its baseline (a patch;
        ``stat``: the files changed)."""
        return job_diff(self.stored, entry, stat=stat)

    # -- taking the work out ------------------------------------------------------------------

    def export_branch(self, branch: str, *, force: bool = False) -> tuple[str, bool]:
        """Create ``branch`` at the job's commit in its source repository (a
        ``from_repo`` job's); (the commit, whether an existing branch was replaced: ``force``)."""
        return export_branch(self.stored, branch, force=force)

    def export_patch(self, path: Union[str, Path]) -> int:
        """Write the job's commits since its baseline, combined, as one patch
        (``git apply`` or ``git am``); the number of the job's commits it holds."""
        return export_patch(self.stored, Path(path))

    def patch(self) -> str:
        """The patch :meth:`export_patch` writes, as text (``logist serve``'s download)."""
        with tempfile.TemporaryDirectory(prefix="logist-export-") as folder:
            target = Path(folder) / f"{self.id}.patch"
            self.export_patch(target)
            return target.read_text(encoding="utf-8", errors="surrogateescape")

    # -- keeping the files --------------------------------------------------------------------

    def upgrade(self) -> Optional[str]:
        """Rewrite the job in the current format (the old files kept beside
        it); what was done, or None when it was current."""
        return upgrade(self.stored, self.jobs.lock_timeout)

    def fsck(self, *, rebuild_manifest: bool = False) -> FsckReport:
        """Check every file of the job under its lock, repairing what can be
        repaired (recorded in the history) and naming what a person must fix
        (``rebuild_manifest``: a manifest with an invalid field too, rebuilt
        from the history)."""
        report = check_files(self.stored, finish_interrupted(self.stored), self.jobs.lock_timeout, rebuild_manifest)
        refresh(self.stored)  # a repair recorded an entry
        return report

    # -- stepping -----------------------------------------------------------------------------

    def _calls(self, model: Optional[str], base_url: Optional[str], watch: Optional[CallWatch]) -> dict:
        return dict(base_url=base_url or self.jobs.base_url, model=model, lock_timeout=self.jobs.lock_timeout,
                    request_timeout=self.jobs.request_timeout, watch=watch, endpoints=self.jobs.endpoints)

    def call(self, *, model: Optional[str] = None, base_url: Optional[str] = None,
             watch: Optional[CallWatch] = None) -> StepResult:
        """Exactly one LLM call (``job step --oneshot``): the role's, or a
        summary call when its conversation is due for compaction."""
        return step_once(self.stored, **self._calls(model, base_url, watch))

    def turn(self, *, model: Optional[str] = None, base_url: Optional[str] = None, on_step: OnStep = None,
             watch: Optional[CallWatch] = None) -> list[StepResult]:
        """One role turn (``job step``): steps until the role hands over or a
        person is needed; each step's result, in order."""
        return step_turn(self.stored, on_step=on_step, **self._calls(model, base_url, watch))

    def step(self, *, model: Optional[str] = None, base_url: Optional[str] = None, on_step: OnStep = None,
             watch: Optional[CallWatch] = None) -> list[StepResult]:
        """Deprecated: :meth:`turn` (a *step* is one answer applied; this ran a role's turn)."""
        warnings.warn("Job.step() runs a role's turn and is now Job.turn(); Job.step() goes away in a later "
                      "release", DeprecationWarning, stacklevel=2)
        return self.turn(model=model, base_url=base_url, on_step=on_step, watch=watch)

    def run(self, *, model: Optional[str] = None, base_url: Optional[str] = None, on_step: OnStep = None,
            watch: Optional[CallWatch] = None) -> list[StepResult]:
        """Turns until the job needs a person or is done (``job run``)."""
        return run_job(self.stored, on_step=on_step, **self._calls(model, base_url, watch))

    def post(self, answer: str) -> StepResult:
        """Apply ``answer`` as the model's without calling it (``job poststep``)."""
        return post_answer(self.stored, answer, lock_timeout=self.jobs.lock_timeout)

    def post_recorded(self, history_file: Union[str, Path], sequence: int) -> StepResult:
        """Apply entry ``sequence`` of a recorded ``jobHistory.json`` (``job poststep --from-history``)."""
        from_history = read_history_file(Path(history_file))
        return post_recorded(self.stored, entry_by_sequence(from_history, sequence), self.jobs.lock_timeout)

    def replay(self, history: Union[str, Path, JobHistory], *, base_url: Optional[str] = None,
               on_entry: Optional[Callable[[HistoryEntry, object], None]] = None) -> int:
        """Re-apply every recorded answer and decision of a history (a
        ``jobHistory.json``, or one read) in order (``job replay``); the
        number of entries applied. With ``base_url`` (a replay server's),
        each recorded call is made again there instead."""
        if not isinstance(history, JobHistory):
            history = read_history_file(Path(history))
        return replay_history(self.stored, history, base_url=base_url, on_entry=on_entry,
                              lock_timeout=self.jobs.lock_timeout)

    # -- a person's decisions -----------------------------------------------------------------
    # ``at``: the history entry the person decided on (a page's form carries the one it showed);
    # a job that has recorded another since raises MovedOnError and nothing is done.

    def _decide(self, action: str, text: Optional[str] = None, *, skip: bool = False,
                settings: Optional[dict] = None, watch: Optional[CommandWatch] = None,
                at: Optional[int] = None, despite_checks: bool = False) -> JobManifest:
        return user_action(self.stored, action, text, skip=skip, settings=settings, lock_timeout=self.jobs.lock_timeout,
                           watch=watch, at=at, despite_checks=despite_checks)

    def approve(self, *, at: Optional[int] = None, despite_checks: bool = False) -> JobManifest:
        """Approve the work: the job becomes SUCCESS. Refused while one of
        the job's checks fails or they have not run on the workspace's
        commit, unless ``despite_checks`` (recorded in the entry)."""
        return self._decide("approve", at=at, despite_checks=despite_checks)

    def check(self, *, watch: Optional[CommandWatch] = None) -> StepResult:
        """Run the job's checks now (``job check``): due ones decide what
        happens next; otherwise the run is recorded and the state stays."""
        return check_job(self.stored, self.jobs.lock_timeout, watch)

    def approval_refusal(self) -> Optional[str]:
        """Why :meth:`approve` would refuse now because of the checks (None: it would not)."""
        return approval_refusal(self.stored, self.manifest())

    def set_checks(self, checks: Sequence[str], *, at: Optional[int] = None) -> JobManifest:
        """Replace the job's checks (an empty list: none); recorded as a ``set`` entry."""
        return self._decide("set", settings={"checks": list(checks)}, at=at)

    def reject(self, feedback: str, *, at: Optional[int] = None) -> JobManifest:
        """Reject the work; the Worker redoes it with ``feedback``."""
        return self._decide("reject", feedback, at=at)

    def answer(self, text: str, *, at: Optional[int] = None) -> JobManifest:
        """Answer the job's question."""
        return self._decide("answer", text, at=at)

    def skip_question(self, *, at: Optional[int] = None) -> JobManifest:
        """Skip an optional question instead of answering it."""
        return self._decide("answer", skip=True, at=at)

    def approve_command(self, *, watch: Optional[CommandWatch] = None, at: Optional[int] = None) -> JobManifest:
        """Run the held command (or apply the held file changes); the model
        sees the outcome. ``watch`` is told while the command runs."""
        return self._decide("approve-command", watch=watch, at=at)

    def skip_command(self, *, at: Optional[int] = None) -> JobManifest:
        """Skip the held command (or file changes); the model is told so."""
        return self._decide("skip-command", at=at)

    def suspend(self, *, at: Optional[int] = None) -> JobManifest:
        """Set the job aside until :meth:`resume`. While a step holds the job,
        asked of its runner instead, which applies it once the step ends
        (:meth:`stop_request` says so; the manifest returned is the job's as it is)."""
        return self._decide("suspend", at=at)

    def resume(self, *, at: Optional[int] = None) -> JobManifest:
        """Resume a suspended job where it was."""
        return self._decide("resume", at=at)

    def cancel(self, *, at: Optional[int] = None) -> JobManifest:
        """Cancel the job for good (it cannot be resumed, rerun or restepped)."""
        return self._decide("cancel", at=at)

    def resubmit(self, feedback: Optional[str] = None, *, max_steps: Optional[int] = None,
                 max_cost_usd: Optional[float] = None, max_tokens: Optional[int] = None,
                 max_wall_seconds: Optional[float] = None, max_answer_bytes: Optional[int] = None,
                 at: Optional[int] = None) -> JobManifest:
        """Send a stopped job back to work with ``feedback`` (and new budgets; None keeps one)."""
        return self._decide("resubmit", feedback or None, settings=dict(
            max_steps=max_steps, max_cost_usd=max_cost_usd, max_tokens=max_tokens,
            max_wall_seconds=max_wall_seconds, max_answer_bytes=max_answer_bytes), at=at)

    def set_budgets(self, *, max_steps: Optional[int] = None, max_cost_usd: Optional[float] = None,
                    max_tokens: Optional[int] = None, max_wall_seconds: Optional[float] = None,
                    max_answer_bytes: Optional[int] = None, at: Optional[int] = None) -> JobManifest:
        """Change the job's budgets (None keeps one); a job a spent budget stopped then goes on."""
        return self._decide("set", settings=dict(
            max_steps=max_steps, max_cost_usd=max_cost_usd, max_tokens=max_tokens,
            max_wall_seconds=max_wall_seconds, max_answer_bytes=max_answer_bytes), at=at)

    # -- going back ---------------------------------------------------------------------------

    def restep(self, to: Optional[int] = None, *, at: Optional[int] = None) -> JobManifest:
        """Rewind workspace and state to the end of entry ``to`` (default: the step before the last)."""
        return rewind(self.stored, to=to, lock_timeout=self.jobs.lock_timeout, at=at)

    def rerun(self, *, at: Optional[int] = None) -> JobManifest:
        """Rewind the job to its baseline (right after create)."""
        return rewind(self.stored, baseline=True, lock_timeout=self.jobs.lock_timeout, at=at)
