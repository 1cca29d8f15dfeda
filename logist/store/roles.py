"""Role manifests: the built-in Worker, Supervisor and Planner, plus the jobs
directory's own roles that add to them and override them by name.

A manifest is JSON (YAML accepted) with four mandatory fields, as the
reference Logist design (jjurach/logist) writes them: name, description,
instructions (inline, or ``prompt_file`` naming a text file) and llm_model
(or llm_alias); a few others are optional; unknown fields are refused so that a typo in a manifest is an
error naming the file and the field, not a silently ignored setting. A
role's instructions are a prompt template (:mod:`logist.store.prompts`):
the manifest's own ``instructions`` or ``prompt_file``, else
``roles/<name>.md`` of the jobs directory's ``prompts/`` or of Logist's. The
built-in roles name theirs with ``prompt_file: roles/<Name>.md``, a prompt
template (the shipped file stays the one text to edit), so a copy of a
built-in manifest under another name works as it is. A role with none of
these is refused when loaded, not at its first step.

A jobs directory's roles are the files of ``<jobs-dir>/roles/`` and
``<jobs-dir>/roles.json``. A file holds one role, or several as the reference Logist design's
"Core Role Types" writes them: one object keyed by role name
(``{"Worker": {...}, "Supervisor": {...}}``).

A file that cannot be loaded (a syntax error: one line naming the file and
the line) harms only the jobs that use a role only it defines:
:func:`load_roles` keeps its error, by the file's path, under the names the
file may define (its stem, and a ``name`` or a key found in its text), and
looking up such a name raises it; a role that did load, a built-in one
among them, is never hidden by a broken file (:class:`Roles`).
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Annotated, Literal, Optional

from pydantic import AliasChoices, ConfigDict, Field, ValidationError, model_validator
from pydantic.json_schema import SkipJsonSchema

from .model import StoreModel
from ..agents.providers import PROVIDERS
from ..errors import ConfigError, NoSuchNameError, format_validation_error, json_problem
from ..resources import data_dir
from .prompts import check_instructions
from . import yaml_text

MANIFEST_SUFFIXES = (".json", ".yaml", ".yml")


class RoleManifest(StoreModel):
    """A role: who the model is told to be, and how it is called."""

    model_config = ConfigDict(extra="forbid")

    schema_: str = Field(default=None, alias="$schema", exclude=True)  # absent or a string
    """The JSON Schema of this file (role-manifest.schema.json in Logist's schemas/ folder), for editors; Logist ignores it."""
    name: str = Field(min_length=1, pattern=r"^[A-Za-z][A-Za-z0-9_-]*$")
    """The role's name, by which jobs and workflows name it (a manifest with a built-in's name replaces it)."""
    description: str = Field(min_length=1)
    """One line on what the role does (shown by role list, and to the Planner)."""
    # Absent or a string (null is refused): see logist/protocol/answer.py on optional text fields.
    instructions: str = Field(default=None, min_length=1)
    """The role's part of the system prompt; instead, prompt_file names a file holding it; without either the prompt template roles/<name>.md gives it (a jobs directory's prompts/ first, then Logist's own), and a role with none of the three is refused when loaded."""
    prompt_file: str = Field(
        default=None, min_length=1, validation_alias=AliasChoices("prompt_file", "prompt_file_path")
    )
    """A text file with the role's instructions, relative to this manifest's folder (prompt_file_path is accepted as well); instead of instructions. A name no such file has but a prompt template has (roles/Worker.md, as the built-in roles name theirs) is that template in effect: a jobs directory's prompts/ first, then Logist's own. A .yaml or .yml file gives the text under its instruction_template, instructions, prompt, content or template key (TaskWeaver's planner_prompt.yaml), or is one YAML string."""
    aliases: list[Annotated[str, Field(min_length=1)]] = []
    """Other names the Planner may address this role by in send_to (matched, like the name, in any case): the built-in Worker answers to TaskWeaver's CodeInterpreter."""
    llm_model: str = Field(default=None, min_length=1)
    """The model the role calls, unless the job, config.json or --model chooses another."""
    llm_alias: str = Field(default=None, min_length=1)
    """A model alias (such as CHEAP or SMART) that config.json's model_aliases turns into a model; instead of llm_model, and an error before any call when config.json does not define it."""
    temperature: float = Field(default=0.3, ge=0, le=2)
    """The sampling temperature sent with each call."""
    max_tokens: Optional[int] = Field(default=None, gt=0)
    """The most tokens an answer may have, sent with every call; unset: 2048 (512 for the tags protocol), and at most a quarter of a known context window."""
    response_format: Optional[dict] = None
    """Sent as is as the request's response_format (such as {"type": "json_object"}) where the endpoint supports it; instead of structured_output."""
    structured_output: Optional[Literal["auto", "json_schema", "json_object", "off"]] = None
    """How the answer's shape is asked of the endpoint, from the protocol's decoding schema: auto tries json_schema (strict), then json_object with the schema (llama.cpp's form), then json_object, then none, as endpoints refuse them; json_schema or json_object send that form only; off sends none. Unset: config.json's model_settings for the model, else auto. The tags protocol sends none."""
    context_window: Optional[int] = Field(default=None, gt=0)
    """The model's context window in tokens (prompt and answer together); unset: config.json's model_settings, what the endpoint tells, or the table Logist ships."""
    protocol: Literal["json", "tags"] = "json"
    """How the role answers: json, one JSON object; tags, a line starting with [CMD], [ASK], [MESSAGE], [DONE]... (kosmos-panel's line protocol, which small local models follow more reliably). A job's skill that names a protocol wins."""
    file_changes: Literal["allowed", "refused", "approval"] = "allowed"
    """What becomes of an answer's file_changes: allowed, applied; refused, the answer is refused with the reason (and re-asked while format_retries last); approval, held until a person approves (job approve-command) or skips them (job skip-command)."""
    checks: list[str] = []
    """Checks of a job this role takes part in (shell commands Logist runs in the workspace after a COMPLETED; exit 0 passes), added to its skill's; a job's own --check replaces them."""
    agent: Optional[str] = Field(default=None, json_schema_extra={"enum": list(PROVIDERS)})
    """A coding agent that does the role's work (aider, codex, claude-code, qwen-code, opencode, or command: any program): each step of the role is one run of it in the job's workspace, its model calls made through Logist's recording gateway to the role's model (llm_model or llm_alias), and its run ends in the role's answer (COMPLETED, STUCK or RETRY). Unset: the model answers each step itself."""
    agent_command: list[Annotated[str, Field(min_length=1)]] = []
    """With agent command: the program's argv, {prompt_file} and {workspace} filled in (["my-agent", "--prompt-file", "{prompt_file}"])."""
    agent_args: list[str] = []
    """With agent: more arguments for the agent's command line, after Logist's own."""
    agent_max_calls: int = Field(default=50, ge=1)
    """With agent: the most model calls one run of the agent may make; the gateway refuses the next one and the job stops at its budget."""
    # Planner and compaction settings (SPEC section 7).
    prompt_compression: bool = False
    """Keep long conversations within bounds: older rounds are folded into a summary by a separate call."""
    compaction_threshold: int = Field(default=10, ge=1)
    """With prompt_compression: summarise once more than this many rounds are not yet summarised."""
    compaction_retain_recent: int = Field(default=3, ge=0)
    """With prompt_compression: how many of the latest rounds are kept as they are."""
    # Where the manifest came from; not part of the file.
    source: SkipJsonSchema[Optional[str]] = Field(default=None, exclude=True)

    @model_validator(mode="before")
    @classmethod
    def _one_spelling(cls, data):
        if isinstance(data, dict) and "prompt_file" in data and "prompt_file_path" in data:
            raise ValueError("give prompt_file or prompt_file_path, not both")
        return data

    @model_validator(mode="after")
    def _one_of_each(self) -> "RoleManifest":
        if self.instructions is not None and self.prompt_file is not None:
            raise ValueError("give instructions or prompt_file, not both")
        if self.response_format is not None and self.structured_output not in (None, "off"):
            raise ValueError("give response_format or structured_output, not both")
        if self.agent is not None and self.agent not in PROVIDERS:
            raise ValueError(f"agent: no agent '{self.agent}' (known: {', '.join(PROVIDERS)})")
        if self.agent_command and self.agent != "command":
            raise ValueError("agent_command is for \"agent\": \"command\"")
        if self.agent == "command" and not self.agent_command:
            raise ValueError("agent_command: the argv of the agent command to run, e.g. "
                             "[\"my-agent\", \"--prompt-file\", \"{prompt_file}\"]")
        if self.llm_model is None and self.llm_alias is None:
            raise ValueError("llm_model: Field required (or give llm_alias)")
        return self

    @property
    def model_label(self) -> str:
        """The model as the manifest names it: its alias, else its model."""
        return self.llm_alias or self.llm_model or ""


def syntax_error(path: Path, exc: Exception, what: str) -> ConfigError:
    """A JSON or YAML syntax error as one line naming the file and the line."""
    if isinstance(exc, json.JSONDecodeError):
        return ConfigError(f"{what} {path}: not valid JSON at line {exc.lineno}, column {exc.colno}: {json_problem(exc)}")
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = " ".join(str(getattr(exc, "problem", None) or exc).split())
    if mark is not None:
        return ConfigError(f"{what} {path}: not valid YAML at line {mark.line + 1}, column {mark.column + 1}: {problem}")
    return ConfigError(f"{what} {path}: cannot be read: {problem}")


def _read_file(path: Path) -> object:
    try:
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".json":
            return json.loads(text)
        try:
            return yaml_text.parse(text)
        except yaml_text.YAMLSyntaxError as exc:
            raise syntax_error(path, exc, "role manifest") from None
    except RecursionError:
        raise ConfigError(f"role manifest {path}: nested too deeply to be a role") from None
    except (OSError, ValueError) as exc:
        raise syntax_error(path, exc, "role manifest") from None


def _keyed_by_name(data: dict) -> bool:
    """The reference Logist design's form (jjurach/logist): one object keyed by role name, each value a role (and perhaps a ``$schema``)."""
    roles = {k: v for k, v in data.items() if k != "$schema"}
    return bool(roles) and "name" not in data and all(isinstance(v, dict) for v in roles.values())


def _one_role(data: dict, where: str) -> RoleManifest:
    try:
        return RoleManifest.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, where)) from None


def load_role_file(path: Path) -> RoleManifest:
    """The one role a file defines."""
    roles = load_roles_file(path)
    if len(roles) != 1:
        raise ConfigError(f"role manifest {path}: holds {len(roles)} roles, not one")
    return roles[0]


def load_roles_file(path: Path) -> list[RoleManifest]:
    """The roles a file defines: one, or several keyed by name (the reference Logist design's "Core Role Types")."""
    data = _read_file(path)
    if not isinstance(data, dict):
        raise ConfigError(f"role manifest {path}: expected an object with name, description, instructions, llm_model")
    if _keyed_by_name(data):
        roles = []
        for key, value in ((k, v) for k, v in data.items() if k != "$schema"):
            if value.get("name", key) != key:
                raise ConfigError(f"role manifest {path}: the role under '{key}' is named '{value['name']}'")
            roles.append(_one_role({"name": key, **value}, f"role manifest {path}: role '{key}'"))
    else:
        roles = [_one_role(data, f"role manifest {path}")]
    for role in roles:
        role.source = str(path)
    return roles


class Roles(dict):
    """Role name -> :class:`RoleManifest`, and the role files that could not
    be loaded (``broken``: a name the file may define, in lower case -> its
    error). Looking up a name no role that loaded has but a broken file may
    define, or asking whether it is there, meets the error instead; a role
    that loaded is never hidden by a broken file; :meth:`errors` reports
    every broken file."""

    def __init__(self, roles: dict[str, RoleManifest], broken: Optional[dict[str, ConfigError]] = None,
                 failed: Optional[list[ConfigError]] = None):
        super().__init__(roles)
        self.broken = dict(broken or {})
        #: Every file's error, in the order the files were read.
        self.failed = list(failed or [])

    def fail(self, error: ConfigError, names: set[str]) -> None:
        """A file that could not be loaded, with the role names it may define."""
        self.failed.append(error)
        self.broken.update({name: error for name in sorted(names)})

    def __contains__(self, name: object) -> bool:
        return super().__contains__(name) or (isinstance(name, str) and name.lower() in self.broken)

    def __getitem__(self, name: str) -> RoleManifest:
        if not super().__contains__(name) and name.lower() in self.broken:
            raise ConfigError(str(self.broken[name.lower()]))
        return super().__getitem__(name)

    def errors(self) -> list[str]:
        """Each broken file's error once, in the order the files were read."""
        return list(dict.fromkeys(str(error) for error in self.failed))


_NAME_IN_TEXT = re.compile(r"""^\s*["']?name["']?\s*:\s*["']?([A-Za-z][A-Za-z0-9_-]*)""", re.M)
_KEY_IN_TEXT = re.compile(r"""^\s*["']?([A-Za-z][A-Za-z0-9_-]*)["']?\s*:\s*\{""", re.M)


def _names_in(path: Path) -> set[str]:
    """The role names a file that does not load may define: its stem, any
    ``name`` its text sets, and any key that opens an object (the reference Logist design's form)."""
    names = {path.stem.lower()}
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return names
    return names | {found.lower() for pattern in (_NAME_IN_TEXT, _KEY_IN_TEXT) for found in pattern.findall(text)}


def _role_files(jobs_dir: Path) -> list[Path]:
    """A jobs directory's role files: ``roles.json``, then ``roles/``'s, by
    name, less a YAML file a role's ``prompt_file`` names (its prompt, such
    as TaskWeaver's planner_prompt.yaml, is not a role)."""
    directory = jobs_dir / "roles"
    files = [jobs_dir / "roles.json"] if (jobs_dir / "roles.json").is_file() else []
    if directory.is_dir():
        files += [p for p in sorted(directory.iterdir())
                  if p.suffix in MANIFEST_SUFFIXES and p.is_file() and not p.name.startswith(".")]
    prompts = _prompt_files(files)
    return [p for p in files if p.resolve() not in prompts]


def _prompt_files(files: list[Path]) -> set[Path]:
    """The files the role manifests among ``files`` name as their
    ``prompt_file`` (resolved); a file that does not read names none."""
    named: set[Path] = set()
    for path in files:
        try:
            data = _read_file(path)
        except ConfigError:
            continue
        if not isinstance(data, dict):
            continue
        manifests = [v for k, v in data.items() if k != "$schema"] if _keyed_by_name(data) else [data]
        for manifest in manifests:
            for key in ("prompt_file", "prompt_file_path"):
                value = manifest.get(key) if isinstance(manifest, dict) else None
                if isinstance(value, str) and value.strip():
                    named.add((path.parent / value).resolve())
    return named


def _load_files(files: list[Path], jobs_dir: Optional[Path]) -> Roles:
    roles = Roles({})
    for path in files:
        try:
            loaded = load_roles_file(path)
            for role in loaded:
                check_instructions(role, jobs_dir)
        except ConfigError as exc:
            roles.fail(exc, _names_in(path))
            continue
        for role in loaded:
            if dict.__contains__(roles, role.name):
                error = ConfigError(
                    f"role manifest {path}: role '{role.name}' is already defined by {dict.__getitem__(roles, role.name).source}")
                roles.fail(error, {role.name.lower()})
                continue
            dict.__setitem__(roles, role.name, role)
    return roles


@functools.lru_cache(maxsize=None)
def _builtin_loaded() -> Roles:
    """The roles the package ships, read and checked once: a fact of the
    installation (its files do not change while the process runs)."""
    directory = data_dir("roles")
    return _load_files([p for p in sorted(directory.iterdir()) if p.suffix in MANIFEST_SUFFIXES], None)


def builtin_roles(copies: bool = True) -> Roles:
    """The roles the package ships, each the caller's own copy (a caller may
    change its roles); ``copies=False``: the ones read once, shared, for a
    caller that changes none (a deep copy of each, three a step, cost a
    step about as much as writing its journal once)."""
    loaded = _builtin_loaded()
    if not copies:
        return Roles(dict(loaded), loaded.broken, loaded.failed)
    return Roles({name: role.model_copy(deep=True) for name, role in loaded.items()}, loaded.broken, loaded.failed)


def load_roles(jobs_dir: Optional[Path] = None, copies: bool = True) -> Roles:
    """Built-ins, then the jobs directory's (``roles.json``, ``roles/``) adding
    and overriding by name; ``copies=False``: the built-ins shared, not copied,
    for a caller that only reads them (:func:`builtin_roles`)."""
    roles = builtin_roles(copies)
    if jobs_dir is not None:
        own = _load_files(_role_files(Path(jobs_dir)), Path(jobs_dir))
        roles = Roles({**roles, **own}, {**roles.broken, **own.broken}, roles.failed + own.failed)
    return roles


def send_to_names(roles: dict[str, RoleManifest], names: list[str]) -> dict[str, str]:
    """How the Planner may name each of the roles ``names`` in send_to: its
    name and its aliases, in lower case -> the role's name (a name before any alias)."""
    spellings = {name.lower(): name for name in names}
    for name in names:
        role = dict.get(roles, name)
        for alias in role.aliases if role is not None else ():
            spellings.setdefault(alias.lower(), name)
    return spellings


def get_role(name: str, jobs_dir: Optional[Path] = None) -> RoleManifest:
    roles = load_roles(jobs_dir)
    if name not in roles:
        raise NoSuchNameError(f"no role named '{name}' (known: {', '.join(sorted(roles.keys()))})")
    return roles[name]
