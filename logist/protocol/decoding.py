"""The decoding schema: the answer protocol as a constraint on what a model may write.

An endpoint that decodes under a JSON Schema (OpenAI's structured output,
llama.cpp's grammars, vLLM's and Ollama's guided decoding) can only write
what the schema allows. :func:`decoding_schema` generates that schema from
the protocol's one definition (:data:`logist.protocol.answer.ACTION_RULES` and the
:class:`~logist.protocol.answer.Answer` model) for the actions a role may take in
its job now: one object per action, with the action's required fields, the
optional ones that go with it, and nothing else (``additionalProperties:
false``).

It is written in the subset every such engine accepts: ``type``, ``enum``,
``properties``, ``required``, ``additionalProperties``, ``items``,
``anyOf``, ``minLength``, ``minItems``, ``maxItems``, ``minimum`` and ``maximum`` (which OpenAI's
strict mode takes since May 2025 and llama.cpp's grammars keep; an engine
that does not know one ignores it); no ``if``/``then``/``allOf``, no
``$ref``, no ``pattern``, and no ``maxLength``, which llama.cpp writes out
as one grammar rule per character allowed (the reader cuts a summary over
its 1000 characters instead, with a note). Strict
decoding needs every property required, so a field an answer may leave out
is required and nullable; the answer reader takes ``null`` as a field that
is not used.

Without ``$ref``, what every action may carry (``file_changes``, with the
workspace's files listed) is written out once per action. A shared
definition would make a Worker's schema less than half as long, but
engines still mishandle references: Ollama's grammar conversion binds a
``$defs`` entry wrongly depending on the order of the definitions (its
open issue 8444), and llama-server has answered a schema with references
with a grammar error. A schema an engine cannot take is a job that cannot
start, so the repetition is the price, paid once per distinct schema in a
job's history (:mod:`logist.store.response_formats`); a listing is left
out where it would pass strict mode's limit on enum values
(:data:`ENUM_VALUES`).

What the subset cannot state stays with the answer check
(:func:`logist.protocol.answer.parse_answer`), and :data:`CONTENT_RULES` names
each such rule.

OpenAI's strict mode wants an object at the root, not ``anyOf``: the
``json_schema`` form (:func:`strict_root`) puts the choice of objects under
one ``response`` property, the ``{"response": {...}}`` wrapper TaskWeaver's
answers already use, which the answer reader unwraps (with a note). The
``json_object`` form, llama-cpp-python's, sends the choice as it is.

:func:`response_formats` gives the ``response_format`` values a request
may carry, strongest first, for a role's ``structured_output`` setting
(:data:`STRUCTURED_OUTPUT`): ``auto`` tries them in order as endpoints
refuse them (:mod:`logist.model.client`).

Pure, like the protocol: no files, no network.
"""

from __future__ import annotations

import copy
from functools import lru_cache
from typing import Optional, Sequence

from . import answer as protocol
from .answer import ACTIONS, USER

#: A role's (or a model's, in config.json) ``structured_output`` setting.
STRUCTURED_OUTPUT = ("auto", "json_schema", "json_object", "off")
#: The name the schema is sent under (``json_schema.name``).
SCHEMA_NAME = "logist_answer"

#: The rules an answer must keep that the decoding schema cannot state (the
#: engines' common subset has no patterns and no rule across two fields);
#: the answer check refuses an answer that breaks one, with its reason. An
#: engine that ignores a length bound leaves that bound to the check too.
CONTENT_RULES = (
    "a path is relative to the workspace, without '..', outside .git, at most 4096 characters",
    "a replaced text occurs exactly once in its file; a replaced or deleted file exists (the schema lists the "
    "workspace's files when there are few)",
    "a file is written or deleted at most once in an answer; the protocol example's placeholders are no answer's",
    "a Worker's evidence files exist in the workspace once its file changes are applied",
    "no NUL byte in a command or a path, no lone surrogate anywhere (what no shell, file system or UTF-8 carries)",
)

#: Keywords the common subset leaves out: what only documents (the system
#: prompt teaches what each field means; the schema only constrains).
_DROPPED = frozenset({"title", "default", "examples", "const", "description", "maxLength"})
#: Fields every action object may carry (besides its own).
_ANY_ACTION = ("file_changes",)
#: The most enum values a schema may hold in all: OpenAI's strict mode
#: refuses more ("Expected at most 500 enum values in total within a single
#: schema"; its documentation has since said 1,000). A workspace listing
#: that would pass it is left out (any path, checked by the answer check).
ENUM_VALUES = 500
#: The most workspace files a schema can list: each is listed twice (the
#: replacement and the deletion) in every action's object.
MOST_LISTED = ENUM_VALUES // (2 * len(ACTIONS))


def _subset(schema: dict, defs: dict) -> dict:
    """``schema`` in the common subset: references inlined, documentation
    dropped, ``const`` written as a one-value ``enum``."""
    if "$ref" in schema:
        return _subset(defs[schema["$ref"].rsplit("/", 1)[1]], defs)
    out: dict = {}
    for key, value in schema.items():
        if key in _DROPPED:
            continue
        if key == "properties":
            out[key] = {name: _subset(sub, defs) for name, sub in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = _subset(value, defs)
        elif key in ("anyOf", "oneOf"):
            out["anyOf"] = [_subset(sub, defs) for sub in value]
        else:
            out[key] = copy.deepcopy(value)
    if "const" in schema:
        out["enum"] = [schema["const"]]
    return out


@lru_cache(maxsize=1)
def _fields() -> dict[str, dict]:
    """Each answer field's schema, in the common subset."""
    whole = protocol.response_schema()
    return {name: _subset(sub, whole.get("$defs", {})) for name, sub in whole["properties"].items()}


protocol.ON_CHANGE.append(_fields.cache_clear)


def _nullable(schema: dict) -> dict:
    return {"anyOf": [schema, {"type": "null"}]}


def _action_object(action: str, fields: Sequence[str], required: Sequence[str], overrides: dict) -> dict:
    """One action's object: every field listed, the optional ones nullable."""
    known = _fields()
    properties: dict = {"action": {"type": "string", "enum": [action]}}
    for name in fields:
        schema = overrides.get(name, known[name])
        properties[name] = schema if name in required else _nullable(schema)
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


def decoding_schema(actions: Optional[Sequence[str]] = None, *, file_changes: bool = True,
                    planner_roles: Optional[Sequence[str]] = None, existing: Optional[Sequence[str]] = None) -> dict:
    """The schema an answer is decoded under: one object per action of
    ``actions`` (in the protocol's order).

    ``file_changes``: whether answers may carry file changes (a role whose
    file changes are refused gets none). ``planner_roles``: the answer is a
    Planner's, which addresses one of these roles or ``User``: its
    non-command answers carry ``send_to`` and the message
    (:data:`~logist.protocol.answer.PLANNER_REQUIRED`), and may carry the plan, the
    step, its reasoning and a thought (:data:`~logist.protocol.answer.PLANNER_OPTIONAL`).
    ``existing``: the workspace's files, when few enough to list: a
    replacement or a deletion names one of them (none can be made in an
    empty workspace); None: any path. A listing that would take the
    schema's enum values past :data:`ENUM_VALUES` is left out.
    """
    actions = protocol.ACTIONS if actions is None else actions
    schema = _schema(actions, file_changes, planner_roles, existing)
    if existing and enum_values(schema) > ENUM_VALUES:
        return _schema(actions, file_changes, planner_roles, None)
    return schema


def enum_values(schema, counted: Optional[dict] = None) -> int:
    """How many enum values ``schema`` holds, in all its parts. A part that
    several actions' objects share (the listing of the workspace's files is
    one object, in every object that may change files) is walked once and
    counted wherever it is (``counted``: its count by the part's id, for
    this one schema)."""
    if counted is None:
        counted = {}
    if not isinstance(schema, (dict, list)):
        return 0
    found = counted.get(id(schema))
    if found is None:
        # Loops, not generators, and no call for a scalar: a step walks its decoding schema's hundreds of parts.
        found = 0
        for key, value in (enumerate(schema) if isinstance(schema, list) else schema.items()):
            if key == "enum" and isinstance(value, list):
                found += len(value)
            elif isinstance(value, (dict, list)):
                found += enum_values(value, counted)
        counted[id(schema)] = found
    return found


def _schema(actions: Sequence[str], file_changes: bool, planner_roles: Optional[Sequence[str]],
            existing: Optional[Sequence[str]]) -> dict:
    unknown = [a for a in actions if a not in protocol.ACTION_RULES]
    if unknown or not actions:
        raise ValueError(f"no decoding schema for actions {list(actions)!r}")
    overrides: dict = {}
    if existing is not None and file_changes:
        overrides["file_changes"] = _changes_to(list(existing))
    if planner_roles is not None:
        # The Planner's answer rules (protocol.check_planner_answer): a role
        # of the job or User, a plan of at least one step, a message.
        overrides["send_to"] = {**_fields()["send_to"], "enum": [*planner_roles, USER]}
        overrides["plan"] = {**_fields()["plan"], "minItems": 1}
        overrides["message"] = {**_fields()["message"], "minLength": 1}
    variants = []
    for action in (protocol.ACTION_RULES[a] for a in protocol.ACTION_RULES if a in actions):
        fields, required, changes = action.decoding_variant(planner_roles is not None)
        fields = [*(_ANY_ACTION if file_changes else ()), *fields]
        own = {**overrides, **{name: {**overrides.get(name, _fields()[name]), **change} for name, change in changes.items()}}
        variants.append(_action_object(action.name, _ordered(fields), required, own))
    if len(variants) == 1:
        return variants[0]
    return {"anyOf": variants}


def _changes_to(existing: list[str]) -> dict:
    """``file_changes`` whose replacements and deletions name an existing file
    (new objects where they differ from the field's schema, its own parts
    shared where they do not, as the schema's other overrides share them)."""
    changes = _fields()["file_changes"]
    kinds = []
    for kind in changes["items"]["anyOf"]:
        if "content" in kind["properties"]:
            kinds.append(kind)
        elif existing:
            kinds.append({**kind, "properties": {**kind["properties"], "path": {"type": "string", "enum": existing}}})
    return {**changes, "items": kinds[0] if len(kinds) == 1 else {"anyOf": kinds}}


def _ordered(fields: list[str]) -> list[str]:
    """``fields`` once each, in the Answer model's order (the order the prompt's example writes them)."""
    order = list(_fields())
    return sorted(dict.fromkeys(fields), key=order.index)


#: The property the json_schema form puts a choice of objects under.
WRAPPER = "response"


def strict_root(schema: dict) -> dict:
    """``schema`` with an object at its root, as strict mode wants: a choice
    of objects (``anyOf``) goes under :data:`WRAPPER`; an object stays as it is."""
    if "anyOf" not in schema:
        return schema
    return {"type": "object", "properties": {WRAPPER: schema}, "required": [WRAPPER], "additionalProperties": False}


def response_formats(setting: str, schema: dict) -> list[Optional[dict]]:
    """The ``response_format`` values to try for ``setting``, strongest
    first; ``None`` stands for a request without one. ``auto`` goes down to
    none; an explicit form is that form alone."""
    strict = {"type": "json_schema", "json_schema": {"name": SCHEMA_NAME, "strict": True, "schema": strict_root(schema)}}
    with_schema = {"type": "json_object", "schema": schema}
    if setting == "auto":
        return [strict, with_schema, {"type": "json_object"}, None]
    if setting == "json_schema":
        return [strict]
    if setting == "json_object":
        return [with_schema]
    if setting == "off":
        return [None]
    raise ValueError(f"unknown structured_output {setting!r} (known: {', '.join(STRUCTURED_OUTPUT)})")


def form_name(response_format: Optional[dict]) -> str:
    """What a ``response_format`` value is called where a person reads it."""
    if response_format is None:
        return "none"
    kind = response_format.get("type")
    if kind == "json_schema":
        strict = (response_format.get("json_schema") or {}).get("strict")
        return "json_schema (strict)" if strict else "json_schema"
    if kind == "json_object":
        return "json_object with schema" if "schema" in response_format else "json_object"
    return str(kind)

