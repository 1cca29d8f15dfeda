"""Skills: reusable task templates in ``SKILL.md`` files.

A skill is a folder ``<name>/SKILL.md``: YAML frontmatter (``name``,
``description``, ``params`` with ``name``/``description``/``required``/
``default``, optional ``max_steps``, and ``protocol``: json or tags, the
protocol the roles of a job made from it answer in, a Planner's staying
json) and a Markdown body with the skill's instructions, in which ``{{param}}`` is replaced by the param's value. The
built-in skills ship with Logist; ``<jobs-dir>/skills/`` adds to and
overrides them by name.

A job made from a skill keeps the instructions as they were when it was
created (in its manifest), so editing a SKILL.md later never changes what a
running or recorded job was told.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal, Optional

from pydantic import ConfigDict, Field, ValidationError
from pydantic.json_schema import SkipJsonSchema

from .model import StoreModel
from ..errors import ConfigError, NoSuchNameError, format_validation_error
from ..resources import data_dir
from . import yaml_text
from .manifest import ActiveSkill  # noqa: F401 (what a job keeps of its skill: a part of its manifest)

SKILL_FILE = "SKILL.md"
_FRONTMATTER = re.compile(r"\A---[ \t]*\r?\n(?P<yaml>.*?)\r?\n---[ \t]*(?:\r?\n|\Z)(?P<body>.*)\Z", re.DOTALL)
_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_-]*)\s*\}\}")


class SkillParam(StoreModel):
    """A value the skill's instructions name as {{name}}."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_-]*$")
    """The param's name: --param NAME=VALUE sets it."""
    description: str = ""
    """What the value is for (shown by skill inspect)."""
    required: bool = False
    """True: a job cannot be made from the skill without it (unless it has a default)."""
    default: Optional[str] = None
    """The value when none is given; it may name other params as {{name}}."""


class Skill(StoreModel):
    """A skill as its SKILL.md says it: the frontmatter's fields and the body."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    """The skill's name, the same as its folder's."""
    description: str = Field(min_length=1)
    """One line on what the skill does; a job made from it without --objective takes it as its objective."""
    params: list[SkillParam] = []
    """The values the instructions name."""
    max_steps: Optional[int] = Field(default=None, ge=1)
    """The max_steps of a job made from the skill, unless the job sets its own."""
    protocol: Optional[Literal["json", "tags"]] = None
    """How the job's roles answer (json or tags, kosmos-panel's line protocol); unset: each role's own protocol."""
    checks: list[str] = []
    """Checks of a job made from the skill (shell commands Logist runs in the workspace after the Worker's COMPLETED; exit 0 passes), its parameters filled in; a job's own --check replaces them."""
    body: str = ""
    """The instructions (the Markdown after the frontmatter)."""
    source: SkipJsonSchema[Optional[str]] = Field(default=None, exclude=True)

    def resolve_params(self, given: dict[str, str]) -> dict[str, str]:
        """The full set of values: given, else defaults; refuses unknown or missing ones."""
        known = {p.name: p for p in self.params}
        unknown = sorted(set(given) - set(known))
        if unknown:
            names = ", ".join(known) or "none"
            raise ConfigError(f"skill '{self.name}' has no param {', '.join(repr(u) for u in unknown)} (its params: {names})")
        values: dict[str, str] = {}
        missing = []
        for param in self.params:
            if param.name in given:
                values[param.name] = given[param.name]
            elif param.default is not None:
                values[param.name] = param.default
            elif param.required:
                missing.append(param.name)
        for param in self.params:  # a default may name other params: docs/{{module}}.md
            if param.name not in given and param.name in values:
                values[param.name] = _PLACEHOLDER.sub(lambda m: given.get(m.group(1), m.group(0)), values[param.name])
        if missing:
            raise ConfigError(
                f"skill '{self.name}' needs --param {' --param '.join(f'{m}=...' for m in missing)}"
            )
        return values

    def render(self, values: dict[str, str]) -> str:
        return self.render_text(self.body, values)

    @staticmethod
    def render_text(text: str, values: dict[str, str]) -> str:
        return _PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), text).strip()


def parse_skill(path: Path) -> Skill:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"skill {path}: cannot be read: {exc}") from None
    match = _FRONTMATTER.match(text)
    if not match:
        raise ConfigError(f"skill {path}: no YAML frontmatter (the file must start with a '---' block)")
    try:
        meta = yaml_text.parse(match.group("yaml"))
    except yaml_text.YAMLSyntaxError as exc:
        where = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        line = f" at line {where.line + 2}" if where is not None else ""  # + the opening '---'
        problem = " ".join(str(getattr(exc, "problem", None) or "").split())
        raise ConfigError(f"skill {path}: frontmatter is not valid YAML{line}" + (f": {problem}" if problem else "")) from None
    if not isinstance(meta, dict):
        raise ConfigError(f"skill {path}: frontmatter must be a mapping with name and description")
    try:
        skill = Skill.model_validate({**meta, "body": match.group("body")})
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, f"skill {path}")) from None
    if not skill.body.strip():
        raise ConfigError(f"skill {path}: the body (the skill's instructions) is empty")
    skill.source = str(path)
    return skill


def _load_dir(directory: Path) -> dict[str, Path]:
    found: dict[str, Path] = {}
    if directory.is_dir():
        for folder in sorted(directory.iterdir()):
            if (folder / SKILL_FILE).is_file():
                found[folder.name] = folder / SKILL_FILE
    return found


def skill_files(jobs_dir: Optional[Path] = None) -> dict[str, Path]:
    """Skill name (its folder) → SKILL.md, built-ins overridden by the jobs dir's."""
    files = _load_dir(data_dir("skills"))
    if jobs_dir is not None:
        files.update(_load_dir(Path(jobs_dir) / "skills"))
    return files


def load_skill(name: str, jobs_dir: Optional[Path] = None) -> Skill:
    files = skill_files(jobs_dir)
    if name not in files:
        raise NoSuchNameError(f"no skill named '{name}' (known: {', '.join(sorted(files)) or 'none'})")
    skill = parse_skill(files[name])
    if skill.name != name:
        raise ConfigError(f"skill {files[name]}: its name '{skill.name}' differs from its folder '{name}'")
    return skill


def list_skills(jobs_dir: Optional[Path] = None, errors: Optional[list[str]] = None) -> list[Skill]:
    """Every skill that loads; a SKILL.md that does not is left out, its
    error appended to ``errors`` (given) or raised (not given). Only jobs
    made from that skill need it."""
    skills = []
    for path in skill_files(jobs_dir).values():
        try:
            skills.append(parse_skill(path))
        except ConfigError as exc:
            if errors is None:
                raise
            errors.append(str(exc))
    return skills
