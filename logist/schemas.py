"""The JSON Schemas in ``schemas/``, generated from the pydantic models.

The files are copies for readers and other tools; the models are the
definition. :data:`SCHEMAS` maps each file name to the function that builds
its schema, so adding a schema for another file is one line. The files
Logist writes name theirs in ``"$schema"`` by the file name used here; the
files people write (config.json, role manifests, a fixture's job.json) may,
for their editor. Regenerate the files after changing a model, and let the
test (or CI) catch a stale one::

    python -m logist.schemas            # rewrite every file in schemas/
    python -m logist.schemas --check    # exit 1, naming each stale file

The output is deterministic: pydantic sorts the keywords of every schema
(property order stays the model's field order), the rest is built here in a
fixed order, and :func:`render` always indents the same way and ends with a
newline, so a diff of ``schemas/`` shows only real changes.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import json
import sys
from pathlib import Path
from typing import Callable, Optional

from pydantic import BaseModel

from .protocol.answer import Answer, model_schema
from .resources import data_dir
from .store.entries import Request
from .store.manifest import MANIFEST_SCHEMA, JobManifest
from .store.entries import SEED_FIELDS, JobHistory
from .store.history import HISTORY_SCHEMA
from .store.journal import StepJournal
from .store.jobsdir import INDEX_SCHEMA, JobsIndex
from .store.config import LogistConfig
from .store.roles import RoleManifest
from .replay.fixtures import FIXTURE_SCHEMA, FixtureJob
from .protocol.decoding import SCHEMA_NAME, decoding_schema
from .store.atomic import atomic_write

DRAFT = "https://json-schema.org/draft/2020-12/schema"
BASE_ID = "https://logist.dev/schemas/"


def _attribute_docs(module: str) -> dict[str, dict[str, str]]:
    """For each class the module ``module`` defines (by qualified name), the
    docstrings under the fields it declares itself (a string right after an
    annotated name, as pydantic's ``use_attribute_docstrings`` reads them).
    The module's source is parsed once: ``inspect.getsource`` of a class
    parses its whole module again for each class."""
    try:
        tree = ast.parse(inspect.getsource(sys.modules[module]))
    except (KeyError, OSError, TypeError, SyntaxError):
        return {}
    found: dict[str, dict[str, str]] = {}

    def visit(body: list, prefix: str) -> None:
        for node in body:
            if not isinstance(node, ast.ClassDef):
                continue
            docs = found.setdefault(prefix + node.name, {})
            for field, after in zip(node.body, node.body[1:]):
                if (isinstance(field, ast.AnnAssign) and isinstance(field.target, ast.Name)
                        and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
                        and isinstance(after.value.value, str)):
                    docs[field.target.id] = inspect.cleandoc(after.value.value)
            visit(node.body, prefix + node.name + ".")

    visit(tree.body, "")
    return found


def documented(model: type[BaseModel]) -> type[BaseModel]:
    """``model`` and every model its fields hold, each field described by its
    docstring. The models do not read their docstrings when they are built
    (pydantic's ``use_attribute_docstrings`` parses each class's source:
    a fifth of what building them costs, in every command); the schemas
    read them here, and the models are rebuilt so their JSON Schema has them."""
    from typing import get_args

    found: list[type[BaseModel]] = []

    def walk(annotation) -> None:
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            if annotation not in found:
                for field in annotation.model_fields.values():
                    walk(field.annotation)
                found.append(annotation)  # the models it holds come first
        for arg in get_args(annotation):
            walk(arg)

    walk(model)
    changed = False
    modules: dict[str, dict[str, dict[str, str]]] = {}  # this call's: each module parsed once
    for cls in found:
        for name, field in cls.model_fields.items():
            owner = next((k for k in cls.__mro__ if name in k.__dict__.get("__annotations__", {})), None)
            if owner is None:
                continue
            if owner.__module__ not in modules:
                modules[owner.__module__] = _attribute_docs(owner.__module__)
            doc = modules[owner.__module__].get(owner.__qualname__, {}).get(name)
            if doc and field.description is None:
                field.description, changed = doc, True
    if changed:  # every one: a model holds a copy of the schemas of those it holds
        for cls in found:
            cls.model_rebuild(force=True)
    return model


def _merge_defs(into: dict, schema: dict) -> dict:
    """Move ``schema``'s sub-model definitions into ``into``; return what is left."""
    schema = dict(schema)
    for name, definition in schema.pop("$defs", {}).items():
        if into.get(name, definition) != definition:
            raise ValueError(f"two different models are both named {name}; rename one")
        into[name] = definition
    return schema


def llm_chat_schema() -> dict:
    """The LLM exchange: ``$defs.request`` (what Logist sends, as recorded in
    the history) and ``$defs.response`` (the one JSON object the model answers)."""
    defs: dict = {}
    request = _merge_defs(defs, model_schema(documented(Request)))
    response = _merge_defs(defs, model_schema(Answer))
    defs.update(request=request, response=response)
    return {
        "$schema": DRAFT,
        "$id": BASE_ID + "llm-chat-schema.json",
        "title": "Logist LLM exchange",
        "description": "What Logist sends to the model (request) and the one JSON object the model must answer with (response).",
        "type": "object",
        "properties": {
            "request": {"$ref": "#/$defs/request", "description": "What Logist sends, as the history records it."},
            "response": {"$ref": "#/$defs/response", "description": "The one JSON object the model answers with."},
        },
        "$defs": dict(sorted(defs.items())),
    }


def file_schema(name: str, title: str, description: str, model: type, first: tuple[str, ...] = ()) -> dict:
    """The schema of the file ``name``: ``model``'s, with the header every
    file of ``schemas/`` has. ``first`` names properties to list first."""
    schema = model_schema(documented(model))
    defs = schema.pop("$defs", {})
    properties = schema.pop("properties")
    properties = {key: properties[key] for key in first} | properties
    schema.pop("title", None)
    schema.pop("description", None)
    built = {"$schema": DRAFT, "$id": BASE_ID + name, "title": title, "description": description}
    built |= {"type": schema.pop("type"), "properties": properties, **schema}
    if defs:
        built["$defs"] = dict(sorted(defs.items()))
    return built


def _schema_key(name: str) -> dict:
    """The ``$schema`` property of a file whose model writes it by hand."""
    return {"default": name, "description": "The JSON Schema of this file (in Logist's schemas/ folder).", "type": "string"}


def job_manifest_schema() -> dict:
    return file_schema(
        MANIFEST_SCHEMA, "Logist job manifest (job_manifest.json)",
        "A job's current state, format 2: what the job is (fixed at create), then where it stands. "
        "It holds no conversation: the turn points at history entries.",
        JobManifest,
    )


def job_history_schema() -> dict:
    schema = file_schema(
        HISTORY_SCHEMA, "Logist job history (jobHistory.json)",
        "A job's append-only record, format 5: one entry per step, oldest first. An entry holds what is new at "
        "its step (a call's request in full, or the entry it continues and the messages it added: the one delta) "
        "and the job's state after it; a call entry carries the reference Logist design's fields in full. (Older files: "
        "job-history.v2.schema.json, job-history.v3.schema.json and job-history.v4.schema.json, kept as they were.)",
        JobHistory,
    )
    # A call entry writes the reference Logist design's fields (SEED_FIELDS) even when empty or null (HistoryEntry.dump).
    defs = schema["$defs"]
    for name, model in (("request", "Request"), ("metadata", "RequestMetadata"), ("response", "Response")):
        defs[model]["required"] = sorted(set(defs[model].get("required", [])) | set(SEED_FIELDS[name]))
    # The header is written as bytes (store/history.py), not from the model.
    schema["properties"] = {"$schema": _schema_key(HISTORY_SCHEMA), **schema["properties"]}
    return schema


def step_journal_schema() -> dict:
    return file_schema(
        StepJournal.model_fields["schema_"].default, "Logist step journal (step_journal.json)",
        "Present in a job's folder only while a step is being applied: what recovery needs after a crash. "
        "Written on one line (compact JSON), unlike the job's other files: only Logist reads it, and it is "
        "written up to three times a step.",
        StepJournal,
    )


def jobs_index_schema() -> dict:
    return file_schema(
        INDEX_SCHEMA, "Logist jobs index (jobs_index.json)",
        "The jobs of a jobs directory, the current one and the queue.",
        JobsIndex,
    )


def config_schema() -> dict:
    return file_schema(
        "config.schema.json", "Logist configuration (<jobs-dir>/config.json)",
        "Endpoint, models, prices and job defaults of a jobs directory. Written by people; unknown keys are "
        "refused. The API key never goes here: it is read from LOGIST_API_KEY or OPENAI_API_KEY.",
        LogistConfig,
    )


def role_manifest_schema() -> dict:
    return file_schema(
        "role-manifest.schema.json", "Logist role manifest (roles/<name>.json or .yaml)",
        "A role: its instructions and how it is called. Written by people; unknown keys are refused.",
        RoleManifest,
    )


def fixture_job_schema() -> dict:
    return file_schema(
        FIXTURE_SCHEMA, "Logist fixture job (fixtures/<name>/job.json)",
        "How a recorded job is created again: its id and the options of job create. Unknown keys are refused.",
        FixtureJob, first=("$schema", "job_id"),
    )


def worker_decoding_schema() -> dict:
    """The decoding schema a default Worker's calls carry (every action open:
    the default workflow, command policy ask; :mod:`logist.protocol.decoding`)."""
    return {
        "$schema": DRAFT,
        "title": f"Logist decoding schema ({SCHEMA_NAME}) of a default Worker",
        "description": "What a default Worker's calls send as the response_format's schema (structured_output; "
                       "the json_schema form, for strict mode, puts it under an object's one property, response), "
                       "generated from the answer protocol; other roles and policies get the actions open to "
                       "them, and a workspace of at most 200 files has them listed as the paths a replacement or "
                       "deletion may name (job preview --json shows a job's). A copy for readers: Logist generates "
                       "it per request.",
        **decoding_schema(),
    }


#: Every generated schema: file name in ``schemas/`` -> the function building it.
SCHEMAS: dict[str, Callable[[], dict]] = {
    "llm-chat-schema.json": llm_chat_schema,
    "job-manifest.v2.schema.json": job_manifest_schema,
    "job-history.v5.schema.json": job_history_schema,
    "step-journal.v2.schema.json": step_journal_schema,
    "jobs-index.v2.schema.json": jobs_index_schema,
    "config.schema.json": config_schema,
    "role-manifest.schema.json": role_manifest_schema,
    "fixture-job.schema.json": fixture_job_schema,
    "worker-decoding-schema.json": worker_decoding_schema,
}


#: Schemas of older formats, kept as they were for the files still in them (not generated any more).
FROZEN = ("job-history.v2.schema.json", "job-history.v3.schema.json", "job-history.v4.schema.json")


def render(schema: dict) -> str:
    """A schema as its file holds it."""
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def schemas_dir() -> Path:
    return data_dir("schemas")


def stale_schemas(directory: Optional[Path] = None) -> list[str]:
    """The files of :data:`SCHEMAS` missing from ``directory`` or differing from what the models generate."""
    directory = directory or schemas_dir()
    stale = []
    for name, build in SCHEMAS.items():
        path = directory / name
        if not path.is_file() or path.read_text(encoding="utf-8") != render(build()):
            stale.append(name)
    return stale


def write_schemas(directory: Optional[Path] = None) -> list[str]:
    """Rewrite every stale schema file in ``directory``; return their names."""
    directory = directory or schemas_dir()
    stale = stale_schemas(directory)
    for name in stale:
        atomic_write(directory / name, render(SCHEMAS[name]()))
    return stale


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m logist.schemas", description="Generate schemas/ from the models.")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a file is stale")
    parser.add_argument("--dir", type=Path, help="the schemas directory (default: the bundled schemas/)")
    args = parser.parse_args(argv)
    if args.check:
        stale = stale_schemas(args.dir)
        for name in stale:
            print(f"stale: {name} (run python -m logist.schemas)", file=sys.stderr)
        return 1 if stale else 0
    for name in write_schemas(args.dir):
        print(f"wrote {name}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
