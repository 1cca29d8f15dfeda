"""The JSON Schemas in ``schemas/``, generated from the pydantic models.

The files are copies for readers and other tools; the models are the
definition. :data:`SCHEMAS` maps each file name to the function that builds
its schema, so adding a schema for another file is one line. Regenerate the
files after changing a model, and let the test (or CI) catch a stale one::

    python -m logist.schemas            # rewrite every file in schemas/
    python -m logist.schemas --check    # exit 1, naming each stale file

The output is deterministic: pydantic sorts the keywords of every schema
(property order stays the model's field order), the rest is built here in a
fixed order, and :func:`render` always indents the same way and ends with a
newline, so a diff of ``schemas/`` shows only real changes.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Callable, Optional

from .protocol import Answer, model_schema
from .resources import data_dir

DRAFT = "https://json-schema.org/draft/2020-12/schema"
BASE_ID = "https://logist.dev/schemas/"


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
    from .store.entries import Request

    defs: dict = {}
    request = _merge_defs(defs, model_schema(Request))
    response = _merge_defs(defs, model_schema(Answer))
    defs.update(request=request, response=response)
    return {
        "$schema": DRAFT,
        "$id": BASE_ID + "llm-chat-schema.json",
        "title": "Logist LLM exchange",
        "description": "What Logist sends to the model (request) and the one JSON object the model must answer with (response).",
        "type": "object",
        "properties": {"request": {"$ref": "#/$defs/request"}, "response": {"$ref": "#/$defs/response"}},
        "$defs": dict(sorted(defs.items())),
    }


#: Every generated schema: file name in ``schemas/`` -> the function building it.
SCHEMAS: dict[str, Callable[[], dict]] = {
    "llm-chat-schema.json": llm_chat_schema,
}


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
    from .store.atomic import atomic_write

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
