"""The exchange with the model: parse and validate one answer.

Pure by design: no files, no git, no network. An answer is a string; the
result is an :class:`Answer` or an :class:`InvalidAnswer` whose message is
what gets recorded, shown to the person and (when re-asking) fed back to the
model. Path rules that can be checked without a disk live here too; the
workspace checks symlinks again when it applies the change.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import PurePosixPath
from typing import Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, ValidationError

from .resources import schema_path

EXIT_ACTIONS = ("COMPLETED", "STUCK", "RETRY")
ACTIONS = EXIT_ACTIONS + ("CMD", "ASK", "MESSAGE")

_FENCE = re.compile(r"^```(?:json|JSON)?[ \t]*\r?\n(?P<body>.*?)\r?\n?```$", re.DOTALL)


class InvalidAnswer(ValueError):
    """The answer is not one valid JSON object of the protocol."""


class WriteFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str
    content: str


class DeleteFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str
    delete: Literal[True]


class ReplaceInFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str
    old: str
    new: str


FileChange = Union[WriteFile, DeleteFile, ReplaceInFile]


class Answer(BaseModel):
    """One validated answer of the model."""

    model_config = ConfigDict(extra="forbid")

    action: Literal["COMPLETED", "STUCK", "RETRY", "CMD", "ASK", "MESSAGE"]
    evidence_files: list[str] = []
    summary_for_supervisor: Optional[str] = None
    command: Optional[str] = None
    question: Optional[str] = None
    required: bool = True
    message: Optional[str] = None
    file_changes: list[FileChange] = []
    thought: Optional[str] = None
    plan: Optional[list[str]] = None
    current_plan_step: Optional[int] = None
    send_to: Optional[str] = None

    @property
    def is_exit(self) -> bool:
        return self.action in EXIT_ACTIONS


@lru_cache(maxsize=1)
def _schema() -> dict:
    return json.loads(schema_path().read_text(encoding="utf-8"))


@lru_cache(maxsize=1)
def _response_validator():
    from jsonschema import Draft202012Validator

    schema = _schema()
    # Validate against the `response` definition while keeping the whole
    # document as the resolution root, so its `$ref`s resolve.
    sub = {"$schema": schema["$schema"], "$defs": schema["$defs"], "$ref": "#/$defs/response"}
    return Draft202012Validator(sub)


def extract_json_text(raw: str) -> str:
    """The JSON text of an answer, with a surrounding ```json fence removed."""
    text = raw.strip()
    match = _FENCE.match(text)
    if match:
        text = match.group("body").strip()
    return text


def _describe(error) -> str:
    where = "/".join(str(p) for p in error.absolute_path)
    if error.validator == "oneOf" and where.startswith("file_changes/"):
        return (
            f"{where}: a file change is {{path, content}}, {{path, delete: true}} "
            "or {path, old, new}"
        )
    return f"{where or 'answer'}: {error.message}"


def check_relative_path(path: str) -> str:
    """Refuse a path that would leave the workspace or touch .git.

    Returns the normalised path. Symlinks are checked by the workspace, which
    sees the disk.
    """
    if not path or "\x00" in path:
        raise InvalidAnswer(f"invalid path {path!r}")
    if "\\" in path:
        raise InvalidAnswer(f"path {path!r} uses backslashes; use '/'")
    pure = PurePosixPath(path)
    parts = [p for p in pure.parts if p not in ("", ".")]
    if pure.is_absolute() or (parts and re.match(r"^[A-Za-z]:", parts[0])):
        raise InvalidAnswer(f"path {path!r} is absolute; paths are relative to the workspace")
    if not parts:
        raise InvalidAnswer(f"path {path!r} names the workspace itself, not a file")
    if ".." in parts:
        raise InvalidAnswer(f"path {path!r} leaves the workspace")
    if parts[0] == ".git":
        raise InvalidAnswer(f"path {path!r} is inside .git, which Logist does not let the model touch")
    return "/".join(parts)


def parse_answer(raw: str) -> Answer:
    """Parse and validate one answer; raise :class:`InvalidAnswer` with the reason."""
    if raw is None or not raw.strip():
        raise InvalidAnswer("the answer is empty; expected one JSON object")
    text = extract_json_text(raw)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidAnswer(
            f"the answer is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); "
            "answer with exactly one JSON object"
        ) from None
    if not isinstance(data, dict):
        raise InvalidAnswer(f"the answer is JSON but not an object (got {type(data).__name__})")
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
    for change in answer.file_changes:
        change.path = check_relative_path(change.path)
    answer.evidence_files = [check_relative_path(p) for p in answer.evidence_files]
    return answer


def check_planner_answer(answer: Answer, roles: list[str]) -> None:
    """The Planner's extra fields (SPEC section 7); ``roles`` it may address."""
    if answer.action == "CMD":
        return
    missing = [f for f in ("plan", "current_plan_step", "send_to", "message") if getattr(answer, f) in (None, "")]
    if answer.action == "ASK" and "message" in missing and answer.question:
        missing.remove("message")
    if missing:
        raise InvalidAnswer(f"the Planner's answer must carry {', '.join(missing)}")
    if not answer.plan:
        raise InvalidAnswer("plan: the plan needs at least one step")
    if answer.current_plan_step >= len(answer.plan):
        raise InvalidAnswer(
            f"current_plan_step: {answer.current_plan_step} is not a step of the plan (0 to {len(answer.plan) - 1})"
        )
    if answer.send_to != "User" and answer.send_to not in roles:
        raise InvalidAnswer(
            f"send_to: '{answer.send_to}' is not a role of this job (choose one of: {', '.join(roles + ['User'])})"
        )
    if answer.action == "ASK" and answer.send_to != "User":
        raise InvalidAnswer("send_to: a question (ASK) goes to User")
