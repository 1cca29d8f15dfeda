"""The exchange with the model: the answer protocol, defined once, and its parser.

Pure by design: no files, no git, no network. An answer is a string; the
result is an :class:`Answer` or an :class:`InvalidAnswer` whose message is
what gets recorded, shown to the person and (when re-asking) fed back to the
model. Path rules that can be checked without a disk live here too; the
workspace checks symlinks again when it applies the change.

Everything else about the protocol is generated from this module, so it
cannot drift: the pydantic models (with a description on every field) and
the actions (:mod:`logist.protocol.actions`, one class each, by name in
:data:`ACTION_RULES`: what each means and requires), give

* :func:`response_schema`, the JSON Schema answers are validated against
  (and which :mod:`logist.schemas` writes into ``schemas/llm-chat-schema.json``);
* :func:`logist.protocol.prompt_text.protocol_text`, the rules of the protocol as the system prompt
  teaches them, example answer included (the ``protocol`` prompt template
  words the rest);
* :data:`ACTIONS` and :data:`EXIT_ACTIONS`.

Validation runs the generated JSON Schema first, because its messages
(``'command' is a required property``) read well to a person and to a model,
then pydantic, which builds the objects. The schema is the answer's one
shape; what models really send (a ``<think>`` block, prose around the
object, ``"completed"``, extra keys, TaskWeaver's wrapper) is brought to that
shape first by :mod:`logist.protocol.forms`, which notes each liberty taken.

Two protocols speak the same actions (:data:`PROTOCOLS`): ``json``, one
JSON object per answer, and ``tags``, kosmos-panel's line protocol (``[CMD] ls``,
``[ASK] ...``, ``[DONE] ...``), which small local models follow more
reliably. Each action's class gives its tag, so both prompt texts, both
parsers and the schema come from one place.
"""

from __future__ import annotations

import json
import re
from contextlib import contextmanager
from functools import lru_cache
from typing import Annotated, Iterator, Literal, Optional, get_args

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, model_validator
from pydantic.json_schema import GenerateJsonSchema

from . import forms
from .forms import extract_json_text  # noqa: F401 (the protocol's names)
from .actions import ACTION_RULES, BUILTIN, PLANNER_OPTIONAL, PLANNER_REQUIRED, USER, Action, Event  # noqa: F401 (the protocol's names)
from ..errors import InvalidAnswer  # noqa: F401 (the parser's error, named here too)
from .paths import PATH_MAX, check_relative_path, is_git_name  # noqa: F401 (the path rules of answers)
from .file_changes import (PATH_RULE, PLACEHOLDER_PATH, DeleteFile, FileChange, ReplaceInFile,  # noqa: F401 (an answer's
                           WorkspacePath, WriteFile)                                              # file changes)


#: The most characters a summary keeps (a longer one is cut, with a note).
SUMMARY_LIMIT = 1000
_SUMMARY = "summary_for_supervisor"

#: The protocols a role (``protocol`` in its manifest) or a skill can speak.
PROTOCOLS = ("json", "tags")


def _derived() -> None:
    """The names derived from :data:`ACTION_RULES`, brought up to date."""
    global ACTIONS, EXIT_ACTIONS, ACTION_SPELLINGS, TAGS, TAG_OPTIONS
    ACTIONS = tuple(ACTION_RULES)
    EXIT_ACTIONS = tuple(name for name, rule in ACTION_RULES.items() if rule.exit)
    #: Every spelling of an action the parsers accept: its name, and its tag.
    ACTION_SPELLINGS = {**{rule.tag: name for name, rule in ACTION_RULES.items() if rule.tag},
                        **{name: name for name in ACTIONS}}
    #: The line protocol's tags -> (action, the field the text fills); action names work as tags too.
    TAGS = {spelling: (name, ACTION_RULES[name].tag_field) for spelling, name in ACTION_SPELLINGS.items()}
    #: The line protocol's options, by action: option -> the fields it sets.
    TAG_OPTIONS = {name: rule.tag_options for name, rule in ACTION_RULES.items() if rule.tag_options}


_derived()


def action_of(name: str) -> Action:
    """The action an answer's ``action`` names."""
    return ACTION_RULES[name]


# --------------------------------------------------------------------------
# The models. Optional text fields are typed `str` with a None default, not
# Optional[str]: a field is absent or a string, and JSON null is refused by
# pydantic and by the generated schema alike.

#: The protocol's example answer stands for a path, a file's content and a
#: summary with these words (the path's, PLACEHOLDER_PATH, is the file change
#: models'), which no real job takes for its own; an answer that copies one is
#: refused. A job that names a file shows that path instead (:func:`example_answer`).
PLACEHOLDER_CONTENT = "THE FILE'S WHOLE NEW CONTENT"
PLACEHOLDER_SUMMARY = "WHAT YOU DID AND HOW YOU CHECKED IT"
#: A file's whole content an answer may not give: the examples' (the file change
#: forms write "...", the example answer without a path the words in capitals).
PLACEHOLDER_CONTENTS = (PLACEHOLDER_CONTENT, "...")
#: The most file changes one answer may carry (the decoding schema's maxItems too):
#: a model that repeats an item until max_tokens is stopped by the schema, or refused.
FILE_CHANGES_MAX = 50

def file_changes_from(data: list) -> list[FileChange]:
    """File changes kept as data (held for a person) as the models, checked again."""
    answer = validate_answer({"action": "MESSAGE", "message": "", "file_changes": data})
    return answer.file_changes


def _per_action_requirements(schema: dict) -> None:
    """The table's required fields as ``allOf`` of ``if``/``then``, one per group of actions."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for name, rule in ACTION_RULES.items():
        groups.setdefault(rule.required, []).append(name)
    schema["allOf"] = [
        {
            "if": {
                "required": ["action"],
                "properties": {"action": {"enum": names} if len(names) > 1 else {"const": names[0]}},
            },
            "then": {"required": list(required)},
        }
        for required, names in groups.items()
    ]


class Answer(BaseModel):
    """The model's answer: exactly one JSON object."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=_per_action_requirements)

    action: Literal[ACTIONS] = Field(  # type: ignore[valid-type]
        description=f"what the answer does; {', '.join(EXIT_ACTIONS)} end the role's turn"
    )
    file_changes: list[FileChange] = Field(
        [], max_length=FILE_CHANGES_MAX,
        description=f"changes to workspace files, applied before anything else; at most {FILE_CHANGES_MAX}, a file "
                    "written or deleted once")
    evidence_files: list[WorkspacePath] = Field([], description="workspace paths of the files that show the result")
    summary_for_supervisor: str = Field(
        None, min_length=1, max_length=SUMMARY_LIMIT,
        description=f"at most {SUMMARY_LIMIT} characters: what you did and how you checked it"
    )
    command: str = Field(None, min_length=1, description="the shell command, run in the workspace directory")
    question: str = Field(None, min_length=1, description="the question for the person")
    required: bool = Field(True, description="false if you can go on without an answer; true by default")
    message: str = Field(None, description="the progress note; from the Planner, what the addressee must do now")
    thought: str = Field(None, description="your reasoning; recorded, never acted on")
    plan: list[Annotated[str, Field(min_length=1)]] = Field(
        None, description="the Planner's plan, one step per item; left out, the plan stays as it was")
    current_plan_step: int = Field(
        None, ge=0, le=100_000, description="the Planner's step being worked on, counted from 0; left out, it stays as it was")
    plan_reasoning: str = Field(None, description="why the Planner's plan is what it is; kept with the plan")
    send_to: str = Field(None, min_length=1, description="the role the Planner addresses next, or User")
    # How the answer was read (not part of the protocol): recorded in the history.
    _notes: list[str] = PrivateAttr(default_factory=list)
    _extra: dict = PrivateAttr(default_factory=dict)

    @model_validator(mode="after")
    def _has_the_fields_its_action_requires(self) -> "Answer":
        for name in ACTION_RULES[self.action].required:
            if name not in self.model_fields_set:
                raise ValueError(f"'{name}' is a required property for action {self.action}")
        return self

    @property
    def is_exit(self) -> bool:
        return self.action in EXIT_ACTIONS

    @property
    def notes(self) -> list[str]:
        """Each liberty taken to read the answer (a reasoning block set aside,
        a lower-case action, no tag...); empty for an answer in the protocol's shape."""
        return self._notes

    @property
    def extra(self) -> dict:
        """Fields the answer carried that the protocol does not know: kept, never acted on."""
        return self._extra


# --------------------------------------------------------------------------
# The registry: an action added (or taken away again) from outside this
# package, as a test does; the built-in ones are in BUILTIN.

#: Functions whose cached result depends on the actions: called when they change
#: (:mod:`logist.protocol.prompt_text` and :mod:`logist.protocol.decoding` add theirs).
ON_CHANGE: list = []


def register_action(action: Action) -> Action:
    """Add ``action`` to the protocol: the answer model, the schemas, the
    prompt text and the parsers take it from now on. Its fields must be
    fields of :class:`Answer`."""
    if action.name in ACTION_RULES:
        raise ValueError(f"the protocol has an action {action.name} already")
    unknown = [f for f in (*action.required, *action.optional) if f not in Answer.model_fields]
    if unknown:
        raise ValueError(f"action {action.name}: {', '.join(unknown)} is not a field of an answer")
    ACTION_RULES[action.name] = action
    _changed()
    return action


def unregister_action(name: str) -> None:
    """Take an action :func:`register_action` added away again."""
    if any(action.name == name for action in BUILTIN):
        raise ValueError(f"{name} is a built-in action")
    del ACTION_RULES[name]
    _changed()


@contextmanager
def registered(action: Action) -> Iterator[Action]:
    """``action`` in the protocol while the block runs, and no longer after it."""
    register_action(action)
    try:
        yield action
    finally:
        unregister_action(action.name)


def _changed() -> None:
    _derived()
    field = Answer.model_fields["action"]
    field.annotation = Literal[ACTIONS]  # type: ignore[valid-type]
    field.description = f"what the answer does; {', '.join(EXIT_ACTIONS)} end the role's turn"
    Answer.model_rebuild(force=True)
    response_schema.cache_clear()
    _response_validator.cache_clear()
    for clear in ON_CHANGE:
        clear()


# --------------------------------------------------------------------------
# The JSON Schema


class SchemaGenerator(GenerateJsonSchema):
    """pydantic's JSON Schema without the noise: no per-field titles (the
    names say it) and no ``"default": null`` (absent is how a field says
    nothing; null itself is refused)."""

    def field_title_should_be_set(self, schema) -> bool:
        return False

    def default_schema(self, schema):
        json_schema = super().default_schema(schema)
        if json_schema.get("default", ...) is None:
            del json_schema["default"]
        return json_schema


def model_schema(model: type[BaseModel]) -> dict:
    """The JSON Schema of a model, its sub-models under ``$defs``."""
    return model.model_json_schema(ref_template="#/$defs/{model}", schema_generator=SchemaGenerator)


@lru_cache(maxsize=1)
def response_schema() -> dict:
    """The JSON Schema (draft 2020-12) of one answer, generated from :class:`Answer`."""
    schema = model_schema(Answer)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}


@lru_cache(maxsize=1)
def _response_validator():
    from jsonschema import Draft202012Validator

    return Draft202012Validator(response_schema())


# --------------------------------------------------------------------------
# Parsing


def _file_change_forms() -> list[tuple[str, str]]:
    """Each kind of file change as (its example, what it does)."""
    return [(json.dumps(m.model_config["json_schema_extra"]["examples"][0]), m.__doc__) for m in get_args(FileChange)]


def _describe(error) -> str:
    where = "/".join(str(p) for p in error.absolute_path)
    if error.validator in ("anyOf", "oneOf") and re.fullmatch(r"file_changes/\d+", where):
        return f"{where}: a file change is " + " or ".join(form for form, _ in _file_change_forms())
    return f"{where or 'answer'}: {error.message}"


def validate_answer(data: dict) -> Answer:
    """An answer in the protocol's one shape (the schema's), or :class:`InvalidAnswer`.

    What the model takes in strict mode the schema takes too (the verdicts
    agree: tests/test_schemas.py), so nearly every answer needs no jsonschema
    import (30 ms of a step as a process); the rest is judged in the schema's words."""
    try:
        return _checked(Answer.model_validate(data, strict=True))
    except ValidationError:
        pass
    errors = sorted(_response_validator().iter_errors(data), key=lambda e: list(e.absolute_path))
    if errors:
        from jsonschema.exceptions import best_match

        raise InvalidAnswer("schema violation: " + _describe(best_match(errors)))
    try:
        answer = Answer.model_validate(data)
    except ValidationError as exc:  # what the schema cannot say (e.g. integers too large for Python's int fields)
        err = exc.errors()[0]
        where = "/".join(str(x) for x in err["loc"]) or "answer"
        raise InvalidAnswer(f"schema violation: {where}: {err['msg']}") from None
    return _checked(answer)


def _checked(answer: Answer) -> Answer:
    """What the schema cannot say: the path rules, and a command a shell can be given."""
    if answer.command is not None and "\x00" in answer.command:
        raise InvalidAnswer("command: holds a NUL byte, which no shell command can carry")
    for change in answer.file_changes:
        change.path = check_relative_path(change.path)
    answer.evidence_files = [check_relative_path(p) for p in answer.evidence_files]
    _check_copied(answer)
    _check_each_file_once(answer)
    return answer


def _check_copied(answer: Answer) -> None:
    """Refuse an answer that copies the protocol's example: its placeholder path or summary."""
    paths = [change.path for change in answer.file_changes] + list(answer.evidence_files)
    if PLACEHOLDER_PATH in paths:
        raise InvalidAnswer(f"'{PLACEHOLDER_PATH}' is the protocol example's placeholder, not a file of this job: "
                            "name the job's own files")
    if (answer.summary_for_supervisor or "").strip().upper() in (PLACEHOLDER_SUMMARY, "..."):
        raise InvalidAnswer("summary_for_supervisor is the protocol example's placeholder: say what you did in this job")
    for change in answer.file_changes:
        if isinstance(change, WriteFile) and change.content.strip() in PLACEHOLDER_CONTENTS:
            raise InvalidAnswer(f"file_changes: the content of {change.path} is the protocol example's placeholder: "
                                "write the file's real content")


def _check_each_file_once(answer: Answer) -> None:
    """A file is written or deleted at most once in an answer, and the same
    change is never given twice (several replacements in one file, each of
    another text, are one edit each)."""
    seen: set[str] = set()
    whole: set[str] = set()
    for change in answer.file_changes:
        key = json.dumps(change.model_dump(mode="json"), sort_keys=True)
        if key in seen:
            raise InvalidAnswer(f"file_changes: the same change to {change.path} is given twice; give it once")
        seen.add(key)
        if not isinstance(change, ReplaceInFile):
            if change.path in whole:
                raise InvalidAnswer(f"file_changes: {change.path} is written or deleted twice; give one change per file")
            whole.add(change.path)


def parse_answer(raw: Optional[str], protocol: str = "json", *, planner: bool = False,
                 plan: Optional[list[str]] = None) -> Answer:
    """Read and validate one answer; raise :class:`InvalidAnswer` with the reason.

    ``protocol``: "json" or "tags" (the role's). ``planner``: the answer is
    a Planner's, which may leave out ``action`` (its ``send_to`` says what it
    does); ``plan``: its plan so far, which a step named by its text is
    found in when the answer sends no plan of its own. The returned answer's :attr:`Answer.notes` and
    :attr:`Answer.extra` say how it was read.
    """
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown protocol {protocol!r} (known: {', '.join(PROTOCOLS)})")
    notes: list[str] = []
    try:
        if protocol == "tags":
            data = forms.read_tag_text(raw, TAGS, notes, TAG_OPTIONS)
        else:
            data = forms.read_json_text(raw, notes)
        forms.check_value(data)
    except forms.Unreadable as exc:
        raise InvalidAnswer(str(exc)) from None
    if not isinstance(data, dict):
        raise InvalidAnswer(f"the answer is JSON but not an object (got {type(data).__name__})")
    data, extra = forms.normalise(data, set(Answer.model_fields), ACTION_SPELLINGS, planner=planner, notes=notes,
                                  plan=plan)
    summary = data.get(_SUMMARY)
    if isinstance(summary, str) and len(summary) > SUMMARY_LIMIT:
        data[_SUMMARY] = summary[:SUMMARY_LIMIT - 1] + "\u2026"
        notes.append(f"the summary was cut to {SUMMARY_LIMIT} characters")
    if "action" not in data and planner:
        raise InvalidAnswer("schema violation: answer: the Planner's answer needs 'send_to' (or an 'action')")
    answer = validate_answer(data)
    answer._notes, answer._extra = notes, extra
    return answer


def check_planner_answer(answer: Answer, roles: "dict[str, str] | list[str]", plan: "list[str] | None" = None) -> None:
    """The Planner's extra fields (SPEC section 7). ``roles``: the roles it
    may address, or every spelling it may use for them (a name or an alias,
    in lower case) -> the role's name; ``send_to`` is matched in any case
    and set to the role's name (with a note when it was spelt otherwise).
    ``plan``: the plan so far, which an answer without one keeps."""
    action = action_of(answer.action)
    if not action.planner_fields:
        return
    missing = [f for f in action.planner_required(answer) if getattr(answer, f) in (None, "")]
    if missing:
        raise InvalidAnswer(f"the Planner's answer must carry {', '.join(missing)}")
    if answer.plan is not None and not answer.plan:
        raise InvalidAnswer("plan: the plan needs at least one step")
    steps = answer.plan if answer.plan is not None else list(plan or [])
    if answer.current_plan_step is not None and answer.current_plan_step >= len(steps):
        # Whatever the schema allows is read, not refused: a step past the plan's end (a plan counted from 1)
        # is its last step, a step of no plan is none; each with a note.
        if steps:
            answer._notes.append(f"current_plan_step {answer.current_plan_step} is past the plan's last step "
                                 f"({len(steps) - 1}, counted from 0): read as {len(steps) - 1}")
            answer.current_plan_step = len(steps) - 1
        else:
            answer._notes.append(f"current_plan_step {answer.current_plan_step} was left out: there is no plan yet")
            answer.current_plan_step = None
    spellings = roles if isinstance(roles, dict) else {name.lower(): name for name in roles}
    spellings = {USER.lower(): USER, **spellings}
    named = spellings.get(answer.send_to.strip().lower())
    if named is None:
        choices = list(dict.fromkeys([*spellings.values()]))
        choices = [c for c in choices if c != USER] + [USER]
        raise InvalidAnswer(
            f"send_to: '{answer.send_to}' is not a role of this job (choose one of: {', '.join(choices)})"
        )
    if named != answer.send_to:
        answer._notes.append(f"send_to '{answer.send_to}' read as {named}")
        answer.send_to = named
    refused = action.check_addressee(answer)
    if refused:
        raise InvalidAnswer(refused)


# --------------------------------------------------------------------------
# The protocol as the system prompt states it

def example_answer(path: Optional[str] = None) -> Answer:
    """The prompt's example of a COMPLETED answer: writing ``path``, a file
    the job itself names (:func:`~logist.protocol.paths.named_path`), so that
    a model copying it copies this job's own path; without one, the
    placeholder path. The content and the summary are always placeholders,
    which an answer may not copy."""
    path = path or PLACEHOLDER_PATH
    return Answer(action="COMPLETED", file_changes=[WriteFile(path=path, content=PLACEHOLDER_CONTENT)],
                  evidence_files=[path], summary_for_supervisor=PLACEHOLDER_SUMMARY)


#: The example answer of a prompt whose job names no file; a test checks that its shape is the protocol's.
EXAMPLE_ANSWER = example_answer()


def answer_json(answer: Answer) -> str:
    """An answer as the model would write it: one line, only the fields it set."""
    return json.dumps(answer.model_dump(mode="json", exclude_unset=True), ensure_ascii=False)
