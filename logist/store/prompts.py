"""Prompt templates: every text Logist sends a model, as files a person edits.

The built-in templates are the files in ``logist/prompts/`` (``NAME.md``,
NAME being the path without ``.md``: ``system``, ``compaction/system``,
``roles/Worker``, ...). A jobs directory overrides any of them with a file
of the same name in ``<jobs-dir>/prompts/``: ``NAME.md``, else ``NAME.yaml``
or ``NAME.yml``, else TaskWeaver's names (:data:`SEED_FILES`:
``planner_prompt.yaml`` gives the Planner's instructions,
``compaction_prompt.yaml`` the summary call's system message); then with a
key of ``<jobs-dir>/prompts.json`` (kosmos-panel's file: a template's name, or
a seed key of :data:`SEED_KEYS` such as ``SKILL_SYSTEM_PROMPT_WITH_ASK``).
A role's instructions (``roles/<Role>``) come first from the role manifest
itself, its ``prompt_file`` (a text file beside the manifest, else the
prompt template it names, as the built-in roles name theirs; TaskWeaver's
``prompt_file_path`` is accepted) or its inline ``instructions``. A
``.yaml`` or ``.yml`` file is read as TaskWeaver's ``planner_prompt.yaml`` is
written: a mapping whose prompt is under one of :data:`YAML_PROMPT_KEYS`
(``instruction_template`` in TaskWeaver's planner file, ``content`` in its
compaction file), or a YAML string.

A template is plain text with ``{name}`` placeholders; :data:`TEMPLATES`
says which names each one may use, and a file that uses another is one
error naming the file and the placeholder (``{{name}}`` writes a literal
``{name}``; any other brace is text, so JSON examples need no escaping).
Optional parts need no conditionals: a paragraph, or a line, whose
placeholders all have no value this time (no details, no feedback) is left
out, heading and all. So the composition of a prompt stays in the engine,
and its wording in the files.

No new format or dependency: str.format would need every JSON brace
doubled, and Jinja would be a dependency for what two rules do. The files
are read when a prompt is built (small, and a step reads each once), so an
edit applies from the next step on; a prompt already sent, or a message
already recorded (feedback, a person's answer), keeps the words it had.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Protocol

from ..errors import ConfigError, json_problem
from . import yaml_text


class RoleLike(Protocol):
    """What a template needs of a role manifest (:class:`logist.store.roles.RoleManifest`,
    which imports this module to check a role's instructions as it loads it)."""

    name: str
    instructions: Optional[str]
    prompt_file: Optional[str]
    source: Optional[str]

#: The built-in templates, shipped in the package.
BUILTIN_DIR = Path(__file__).resolve().parent.parent / "prompts"
SUFFIX = ".md"
PROMPTS_DIR = "prompts"
ROLE_PREFIX = "roles/"

#: The keys a YAML prompt file may hold its prompt under, in the order they are looked for.
YAML_PROMPT_KEYS = ("instruction_template", "instructions", "prompt", "content", "template")
YAML_SUFFIXES = (".yaml", ".yml")
#: The suffixes of a template's file in ``<jobs-dir>/prompts/``, in the order they are looked for.
FILE_SUFFIXES = (SUFFIX, *YAML_SUFFIXES)
#: TaskWeaver's prompt files in ``<jobs-dir>/prompts/`` (NAME.yaml or NAME.yml) -> the template each gives.
SEED_FILES = {"planner_prompt": "roles/Planner", "compaction_prompt": "compaction/system"}
#: kosmos-panel's file of prompts beside ``<jobs-dir>/prompts/``: one JSON object, a template name or a key of
#: :data:`SEED_KEYS` -> the template's text.
PROMPTS_JSON = "prompts.json"
#: kosmos-panel's keys in ``prompts.json`` -> the template each gives.
SEED_KEYS = {"SKILL_SYSTEM_PROMPT_WITH_ASK": "protocol/tags"}

_TOKEN = re.compile(r"\{\{([A-Za-z_][A-Za-z0-9_]*)\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True)
class Template:
    """What a template is for, and the placeholders it may use."""

    description: str
    placeholders: tuple[str, ...] = ()


#: Every template but the roles' instructions (``roles/<Role>``, placeholder ``role``).
TEMPLATES: dict[str, Template] = {
    "system": Template(
        "The system message: its parts in order.",
        ("protocol", "context", "role", "instructions", "planner", "skill", "this_turn"),
    ),
    "protocol": Template(
        "How to answer; {protocol_rules} is the protocol generated from its one definition (logist/protocol/answer.py).",
        ("protocol_rules",),
    ),
    "protocol/tags": Template(
        "How a tags-protocol role answers: kosmos-panel's base prompt (SKILL_SYSTEM_PROMPT_WITH_ASK), word for word."),
    "protocol/agent": Template(
        "How a role whose work a coding agent does ends its run: the exit command it gives (COMPLETED, STUCK or RETRY)."),
    "answer_form/json": Template("How a JSON-protocol answer is given, in a re-ask (messages/refused's {answer_form})."),
    "answer_form/tags": Template("How a tags-protocol answer is given, in a re-ask (messages/refused's {answer_form})."),
    "answer_reminder/json": Template("The last line of a JSON-protocol role's turn-opening message ({answer_reminder})."),
    "answer_reminder/agent": Template(
        "The last line of the turn-opening message of a role whose work a coding agent does ({answer_reminder})."),
    "planner": Template("The Planner's list of the roles it can address (send_to).", ("roles",)),
    "skill": Template("The active skill's part of the system message.", ("skill", "instructions")),
    "job": Template(
        "The first message of a role's turn: the job, and what the turn is for.",
        ("objective", "details", "parameters", "acceptance_criteria", "review", "last_turn_files", "job_files",
         "plan", "task", "memory", "feedback", "answer_reminder"),
    ),
    "job/tags": Template(
        "The first message of a tags-protocol role's turn (kosmos-panel's): Execute skill: {skill}, or the person's own "
        "{objective}, then the parameters and whatever else the turn has.",
        ("skill", "objective", "parameters", "details", "acceptance_criteria", "review", "last_turn_files",
         "job_files", "plan", "task", "memory", "feedback"),
    ),
    "review": Template("The Supervisor's part of the first message: the work to review, the job's checks "
                       "and what changed in the workspace.",
                       ("role", "action", "summary", "evidence_files", "checks", "changes")),
    "check": Template("One of the job's checks as a prompt shows it: its command, how it ended, its output's end.",
                      ("command", "status", "output")),
    "changes": Template("What changed in the workspace since the job began (the Supervisor's review): the files "
                        "changed, then the diff, cut with a note when it is long.", ("files", "diff", "cut")),
    "file": Template("A workspace file shown in a prompt.", ("path", "content")),
    "file_missing": Template("A file named for a prompt that the workspace does not have.", ("path",)),
    "file_over_budget": Template("A file left out because the prompt's file budget is spent.", ("path",)),
    "call": Template("Every user message: the message, then the step it is of the job's max_steps ([Step N of MAX]).",
                     ("message", "call", "max_calls")),
    "memory": Template("What the person answered and said earlier in the job, in a turn's first message.",
                       ("items",)),
    "memory/answer": Template("One question the person answered.", ("role", "question", "answer")),
    "memory/rejected": Template("The person's feedback when rejecting the result.", ("feedback",)),
    "memory/resubmitted": Template("The person's feedback when resubmitting the job.", ("feedback",)),
    "compaction/system": Template("The summary call's system message (context compaction)."),
    "compaction/request": Template(
        "The summary call's user message.", ("role", "summarised_rounds", "summary", "first", "last", "rounds")
    ),
    "compaction/round": Template("One round of the conversation in the summary call.",
                                 ("number", "message", "role", "answer")),
    "compaction/summary": Template(
        "In the system message after a compaction: the turn's opening message and the summary.",
        ("opening", "summarised_rounds", "summary", "memory"),
    ),
    "command/output": Template("The next message after a command ran: the command, its output, how it ended.",
                               ("command", "output", "ending")),
    "command/tags": Template("The next message after a command ran, in the tags protocol (kosmos-panel's): its cleaned "
                             "output; {ending} only when it timed out.", ("output", "ending")),
    "command/stdout": Template("A command's standard output.", ("text",)),
    "command/stderr": Template("A command's standard error.", ("text",)),
    "command/no_output": Template("What a command that printed nothing shows."),
    "command/exit_code": Template("How a command that ran to the end ended.", ("exit_code",)),
    "command/timed_out": Template("How a command stopped at the job's timeout ended.", ("seconds",)),
    "messages/continue": Template("The next message after a MESSAGE answer."),
    "messages/command_denied": Template("The next message after a command the job's policy refuses.", ("command",)),
    "messages/refused": Template(
        "The next message after an invalid answer (a re-ask); {answer_form} is how the role's protocol answers.",
        ("reason", "answer_form")),
    "messages/sent_back": Template("The Worker's feedback when the Supervisor sends the work back (RETRY).",
                                   ("role", "summary")),
    "messages/retry": Template("A role's feedback after its own RETRY.", ("summary",)),
    "messages/checks_failed": Template("The Worker's feedback when the job's checks fail after its COMPLETED (the "
                                       "Planner's next message in a planned job).", ("checks",)),
    "messages/planner_retry": Template("The Planner's feedback after its own RETRY.", ("summary",)),
    "messages/report": Template("The Planner's next message when a role it addressed ends its turn.",
                                ("role", "action", "summary", "evidence_files")),
    "messages/answered": Template("The next message after the person answers a question.", ("answer",)),
    "messages/skipped_question": Template("The next message after the person skips a question."),
    "messages/skipped_command": Template("The next message after the person skips a held command."),
    "messages/rejected": Template("The Worker's feedback when the person rejects the result.", ("feedback",)),
    "messages/resubmitted": Template("The feedback when the person resubmits a stopped job with a text.",
                                     ("reason", "feedback")),
    "messages/resubmitted_without_feedback": Template("The feedback when the person resubmits without a text.",
                                                      ("reason",)),
}

ROLE_TEMPLATE = Template("The role's instructions, in the system message.", ("role",))


def placeholders(text: str) -> list[str]:
    """The placeholder names ``text`` uses, in order (``{{name}}`` is not one)."""
    return [m.group(2) for m in _TOKEN.finditer(text) if m.group(2)]


def _substitute(text: str, values: dict[str, Optional[str]]) -> str:
    def one(match: re.Match) -> str:
        if match.group(1):
            return "{" + match.group(1) + "}"
        return values.get(match.group(2)) or ""

    return _TOKEN.sub(one, text)


def render_text(text: str, values: dict[str, Optional[str]]) -> str:
    """``text`` with its placeholders filled; a paragraph or a line whose
    placeholders are all ``None`` (or not given) is left out."""

    def absent(part: str) -> bool:
        names = placeholders(part)
        return bool(names) and all(values.get(n) is None for n in names)

    paragraphs = []
    for paragraph in text.split("\n\n"):
        if absent(paragraph):
            continue
        lines = [_substitute(line, values) for line in paragraph.split("\n") if not absent(line)]
        paragraphs.append("\n".join(lines))
    return "\n\n".join(paragraphs)


def read_template(path: Path) -> str:
    """A template file's text: line ends made ``\\n``, trailing newlines not part of it."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"prompt template {path}: cannot be read: {exc}") from None
    text = text.replace("\r\n", "\n")
    if path.suffix.lower() in YAML_SUFFIXES:
        text = _yaml_prompt(path, text)
    return text.rstrip("\n")


def _yaml_prompt(path: Path, text: str) -> str:
    """The prompt a YAML prompt file holds (TaskWeaver's ``planner_prompt.yaml`` shape)."""
    try:
        data = yaml_text.parse(text)
    except yaml_text.YAMLSyntaxError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"prompt file {path}{where}: not valid YAML: {problem}") from None
    if isinstance(data, str):
        return data
    if isinstance(data, dict):
        for key in YAML_PROMPT_KEYS:
            if isinstance(data.get(key), str):
                return data[key]
        found = ", ".join(map(str, data)) or "none"
    else:
        found = f"a {type(data).__name__}, not a mapping"
    raise ConfigError(
        f"prompt file {path}: no prompt in it: give its text under one of {', '.join(YAML_PROMPT_KEYS)} "
        f"(keys found: {found})"
    )


@dataclass(frozen=True)
class Resolved:
    """A template's text and where it came from."""

    name: str
    text: str
    #: "built-in", "jobs directory", "prompts.json", "role manifest" (inline instructions) or "prompt_file".
    origin: str
    #: The file the text was read from.
    path: Optional[Path]
    #: The key of prompts.json that holds the text.
    key: Optional[str] = None

    @property
    def file(self) -> Optional[str]:
        """The file (and the key in it) the text came from."""
        if self.path is None:
            return None
        return f"{self.path}, key {self.key}" if self.key else str(self.path)

    @property
    def where(self) -> str:
        return f"{self.origin} ({self.file})" if self.path else self.origin


def template_named(value: str) -> Optional[str]:
    """The template a file name names (``roles/Worker.md``, ``prompts/system.md``), if any."""
    name = value.replace("\\", "/").removeprefix("./").removeprefix(PROMPTS_DIR + "/")
    for suffix in FILE_SUFFIXES:
        name = name.removesuffix(suffix)
    if name in TEMPLATES or re.fullmatch(re.escape(ROLE_PREFIX) + r"[A-Za-z][A-Za-z0-9_-]*", name):
        return name
    return None


def _read_prompts_json(path: Path) -> dict[str, tuple[str, str]]:
    """``prompts.json``: template name -> (the key that gives it, its text)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"prompts file {path}: cannot be read: {exc}") from None
    except ValueError as exc:
        raise ConfigError(f"prompts file {path}: not valid JSON at line {exc.lineno}, column {exc.colno}: {json_problem(exc)}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"prompts file {path}: expected one object, key -> prompt text")
    found: dict[str, tuple[str, str]] = {}
    for key, text in data.items():
        name = SEED_KEYS.get(key) or template_named(key)
        if name is None:
            continue  # listed by Prompts.unused
        if not isinstance(text, str):
            raise ConfigError(f"prompts file {path}: key {key}: expected the prompt's text, got {type(text).__name__}")
        found.setdefault(name, (key, text.replace("\r\n", "\n").rstrip("\n")))
    return found


def check_instructions(role: RoleLike, jobs_dir: Optional[Path]) -> None:
    """Refuse a role that has no instructions in any of the places they may
    come from (:class:`ConfigError` naming its file), without reading them."""
    Prompts(jobs_dir, {role.name: role})._instructions_found(role)


class Prompts:
    """The templates in effect for one jobs directory (``None``: the built-ins only).

    ``roles`` are the role manifests known there, whose own instructions
    come before any file of the prompts directories.
    """

    def __init__(self, jobs_dir: Optional[Path] = None, roles: Optional[dict[str, RoleLike]] = None):
        self.dir = Path(jobs_dir) / PROMPTS_DIR if jobs_dir is not None else None
        self.json_path = Path(jobs_dir) / PROMPTS_JSON if jobs_dir is not None else None
        self.roles = roles or {}
        self._cache: dict[str, Resolved] = {}
        self._json: Optional[dict[str, tuple[str, str]]] = None
        self._names: Optional[frozenset[str]] = None

    # -- finding a template -------------------------------------------------------------------

    @staticmethod
    def spec(name: str) -> Template:
        if name.startswith(ROLE_PREFIX):
            return ROLE_TEMPLATE
        if name not in TEMPLATES:
            raise ConfigError(f"no prompt template named '{name}' (logist prompts list shows them)")
        return TEMPLATES[name]

    def _file(self, name: str) -> Optional[Path]:
        """The jobs directory's file of template ``name``: NAME.md, NAME.yaml, NAME.yml, then TaskWeaver's file name for it."""
        if self.dir is None:
            return None
        if self._names is None:
            # Listed once for these templates (a step's): each name asked of the disk cost a step six stats.
            try:
                self._names = frozenset(os.listdir(self.dir))
            except OSError:  # no folder (nearly always), or not one
                self._names = frozenset()
        stems = [name, *(stem for stem, template in SEED_FILES.items() if template == name)]
        for stem in stems:
            for suffix in FILE_SUFFIXES if stem == name else YAML_SUFFIXES:
                # A name in a folder (compaction/system) is looked for when the folder is listed.
                if (stem + suffix).split("/", 1)[0] in self._names and (self.dir / (stem + suffix)).is_file():
                    return self.dir / (stem + suffix)
        return None

    def _prompts_json(self) -> dict[str, tuple[str, str]]:
        if self._json is None:
            exists = self.json_path is not None and self.json_path.is_file()
            self._json = _read_prompts_json(self.json_path) if exists else {}
        return self._json

    def _from_files(self, name: str, read: bool = True) -> Optional[Resolved]:
        """Template ``name`` from the jobs directory's files, prompts.json or
        Logist's own (``read``: False, its text is left unread)."""
        path = self._file(name)
        if path is not None:
            return Resolved(name, read_template(path) if read else "", "jobs directory", path)
        if name in self._prompts_json():
            key, text = self._prompts_json()[name]
            return Resolved(name, text, "prompts.json", self.json_path, key)
        path = BUILTIN_DIR / (name + SUFFIX)
        if path.is_file():
            return Resolved(name, read_template(path) if read else "", "built-in", path)
        return None

    def _role_own(self, role: RoleLike, read: bool = True) -> Optional[Resolved]:
        name = ROLE_PREFIX + role.name
        if role.prompt_file:
            base = Path(role.source).parent if role.source else Path.cwd()
            path = (base / role.prompt_file).resolve()
            if path.is_file():
                return Resolved(name, read_template(path) if read else "", "prompt_file", path)
            template = template_named(role.prompt_file)
            found = self._from_files(template, read) if template else None
            if found is None:
                raise ConfigError(
                    f"role manifest {role.source or role.name}: prompt_file {role.prompt_file}: no such file ({path})"
                    + (" and no prompt template of that name" if template is None else "")
                )
            return Resolved(name, found.text, found.origin, found.path, found.key)  # the template in effect
        if role.instructions:
            path = Path(role.source) if role.source else None
            return Resolved(name, role.instructions.strip(), "role manifest", path)
        return None

    def _instructions_found(self, role: RoleLike) -> Resolved:
        """Where ``role``'s instructions come from (:class:`ConfigError` when nowhere)."""
        name = ROLE_PREFIX + role.name
        found = self._role_own(role, read=False) or self._from_files(name, read=False)
        if found is None:
            where = f"role manifest {role.source}: " if role.source else ""
            raise ConfigError(
                f"{where}role '{role.name}' has no instructions: give its manifest 'instructions' or 'prompt_file', "
                f"or write {self.dir or PROMPTS_DIR}/{name}{SUFFIX}"
            )
        return found

    def resolve(self, name: str, role: Optional[RoleLike] = None) -> Resolved:
        """The template ``name`` in effect, its placeholders checked."""
        if role is None and name.startswith(ROLE_PREFIX):
            role = self.roles.get(name[len(ROLE_PREFIX):])
        key = name if role is None else f"{name}\0{id(role)}"
        if key in self._cache:
            return self._cache[key]
        spec = self.spec(name)
        found = self._role_own(role) if role is not None else None
        found = found or self._from_files(name)
        if found is None:
            who = name[len(ROLE_PREFIX):]
            raise ConfigError(
                f"role '{who}' has no instructions: give its manifest 'instructions' or 'prompt_file', "
                f"or write {self.dir or PROMPTS_DIR}/{name}{SUFFIX}"
            )
        unknown = [p for p in dict.fromkeys(placeholders(found.text)) if p not in spec.placeholders]
        if unknown:
            allowed = ", ".join("{" + p + "}" for p in spec.placeholders) or "none"
            raise ConfigError(
                f"prompt template {found.file or found.where}: unknown placeholder "
                + ", ".join("{" + p + "}" for p in unknown)
                + f" (allowed here: {allowed}; write {{{{name}}}} for a literal {{name}})"
            )
        self._cache[key] = found
        return found

    # -- using one ----------------------------------------------------------------------------

    def render(self, name: str, **values: Optional[str]) -> str:
        return render_text(self.resolve(name).text, values)

    def instructions(self, role: RoleLike) -> str:
        """The role's instructions as the system message gives them."""
        return render_text(self.resolve(ROLE_PREFIX + role.name, role).text, {"role": role.name})

    # -- listing ------------------------------------------------------------------------------

    def names(self) -> list[str]:
        """Every template: the fixed ones, then one per known role."""
        return list(TEMPLATES) + [ROLE_PREFIX + name for name in self.roles]

    def unused_files(self) -> list[Path]:
        """Files in ``<jobs-dir>/prompts/`` that no template reads (a misspelt name, say)."""
        if self.dir is None or not self.dir.is_dir():
            return []
        known = set(self.names())
        used = {self._file(name) for name in known}
        return sorted(p for p in self.dir.rglob("*") if p.is_file() and p not in used)

    def unused_keys(self) -> list[str]:
        """Keys of ``prompts.json`` that name no template."""
        if self.json_path is None or not self.json_path.is_file():
            return []
        given = {key for key, _text in self._prompts_json().values()}
        try:
            data = json.loads(self.json_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return []
        return [key for key in data if key not in given]


#: The built-in templates only, for code that has no jobs directory at hand.
def builtin() -> Prompts:
    return Prompts(None)
