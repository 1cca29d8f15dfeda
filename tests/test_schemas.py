"""logist.schemas: the committed schemas/ are what the models generate, and
the generated answer schema agrees with parse_answer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import pytest
from conftest import REPO_ROOT
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

import logist
from logist.protocol import ACTIONS, InvalidAnswer, parse_answer
from logist.schemas import SCHEMAS, llm_chat_schema, render, stale_schemas, write_schemas

SCHEMAS_DIR = REPO_ROOT / "schemas"


def test_committed_schemas_are_what_the_models_generate():
    assert sorted(p.name for p in SCHEMAS_DIR.glob("*.json")) == sorted(SCHEMAS)
    for name, build in SCHEMAS.items():
        committed = (SCHEMAS_DIR / name).read_text(encoding="utf-8")
        assert committed == render(build()), f"{name} is stale: run python -m logist.schemas"
    assert stale_schemas(SCHEMAS_DIR) == []


def test_a_stale_or_missing_file_is_named_and_rewritten(tmp_path):
    assert stale_schemas(tmp_path) == ["llm-chat-schema.json"]
    stale = json.loads(render(llm_chat_schema()))
    stale["$defs"]["response"]["properties"]["command"]["minLength"] = 0
    (tmp_path / "llm-chat-schema.json").write_text(render(stale), encoding="utf-8")
    assert stale_schemas(tmp_path) == ["llm-chat-schema.json"]
    # Only a byte-exact copy is current: the newline at the end counts too.
    (tmp_path / "llm-chat-schema.json").write_text(render(llm_chat_schema()).rstrip("\n"), encoding="utf-8")
    assert stale_schemas(tmp_path) == ["llm-chat-schema.json"]
    assert write_schemas(tmp_path) == ["llm-chat-schema.json"]
    assert stale_schemas(tmp_path) == []
    assert write_schemas(tmp_path) == []


def _module(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(Path(logist.__file__).parent.parent))
    return subprocess.run(
        [sys.executable, "-m", "logist.schemas", *args], capture_output=True, text=True, env=env, timeout=60
    )


def test_the_command_checks_and_rewrites(tmp_path):
    (tmp_path / "llm-chat-schema.json").write_text("{}\n", encoding="utf-8")
    check = _module("--check", "--dir", str(tmp_path))
    assert check.returncode == 1
    assert "stale: llm-chat-schema.json" in check.stderr
    assert (tmp_path / "llm-chat-schema.json").read_text(encoding="utf-8") == "{}\n", "--check changes nothing"
    write = _module("--dir", str(tmp_path))
    assert write.returncode == 0, write.stderr
    assert "wrote llm-chat-schema.json" in write.stderr
    assert (tmp_path / "llm-chat-schema.json").read_text(encoding="utf-8") == render(llm_chat_schema())
    assert _module("--check", "--dir", str(tmp_path)).returncode == 0


def test_rendering_is_stable():
    text = render(llm_chat_schema())
    assert text.endswith("}\n") and not text.endswith("\n\n")
    assert render(json.loads(text)) == text


# --------------------------------------------------------------------------
# The document


def test_the_document_keeps_its_shape():
    schema = llm_chat_schema()
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == "https://logist.dev/schemas/llm-chat-schema.json"
    assert schema["properties"] == {"request": {"$ref": "#/$defs/request"}, "response": {"$ref": "#/$defs/response"}}
    assert schema["$defs"]["response"]["properties"]["action"]["enum"] == list(ACTIONS)


def test_a_whole_exchange_validates_from_the_root():
    validator = Draft202012Validator(llm_chat_schema())
    good = {
        "request": {
            "prompt": [{"role": "system", "content": "x"}],
            "files_context": [],
            "metadata": {"role": "Worker", "phase": "work", "model": "m", "temperature": 0.2, "max_tokens": None},
        },
        "response": {"action": "COMPLETED", "evidence_files": ["a.txt"], "summary_for_supervisor": "done"},
    }
    assert list(validator.iter_errors(good)) == []
    good["response"]["file_changes"] = [{"path": "a", "delete": False}]
    assert list(validator.iter_errors(good)) != []
    del good["response"]["file_changes"]
    good["request"]["prompt"][0]["role"] = "tool"
    assert list(validator.iter_errors(good)) != []


def test_a_recorded_request_validates():
    history = json.loads((REPO_ROOT / "fixtures" / "wordcount" / "jobHistory.json").read_text(encoding="utf-8"))
    requests = [e["request"] for e in history["interactions"] if e.get("request")]
    assert requests
    validator = _validator("request")
    for request in requests:
        assert list(validator.iter_errors(request)) == []


# --------------------------------------------------------------------------
# The file's response definition and parse_answer agree


@lru_cache(maxsize=None)
def _validator(definition: str) -> Draft202012Validator:
    """A validator for one definition of the committed file, its $refs resolving from the root."""
    schema = json.loads((SCHEMAS_DIR / "llm-chat-schema.json").read_text(encoding="utf-8"))
    return Draft202012Validator({"$schema": schema["$schema"], "$defs": schema["$defs"], "$ref": f"#/$defs/{definition}"})


def _parses(data) -> bool:
    try:
        parse_answer(json.dumps(data))
    except InvalidAnswer:
        return False
    return True


SAMPLES = [
    ({"action": "COMPLETED", "evidence_files": ["a.py"], "summary_for_supervisor": "done"}, True),
    ({"action": "STUCK", "evidence_files": [], "summary_for_supervisor": "need a key"}, True),
    ({"action": "RETRY", "summary_for_supervisor": "again"}, False),
    ({"action": "CMD", "command": "ls"}, True),
    ({"action": "CMD", "command": ""}, False),
    ({"action": "CMD", "command": None}, False),
    ({"action": "ASK", "question": "Which?", "required": False}, True),
    ({"action": "ASK", "question": "Which?", "required": "no"}, False),
    ({"action": "ASK", "question": ""}, False),
    ({"action": "COMPLETED", "evidence_files": [], "summary_for_supervisor": None}, False),
    ({"action": "COMPLETED", "evidence_files": None, "summary_for_supervisor": "done"}, False),
    ({"action": "MESSAGE", "message": ""}, True),
    ({"action": "MESSAGE"}, False),
    ({"action": "LAUNCH", "message": "x"}, False),
    ({"message": "x"}, False),
    ({"action": "MESSAGE", "message": "x", "extra": 1}, False),
    ({"action": "COMPLETED", "evidence_files": [], "summary_for_supervisor": "x" * 1000}, True),
    ({"action": "COMPLETED", "evidence_files": [], "summary_for_supervisor": "x" * 1001}, False),
    ({"action": "MESSAGE", "message": "x", "plan": ["a", "b"], "current_plan_step": 1, "send_to": "Worker"}, True),
    ({"action": "MESSAGE", "message": "x", "current_plan_step": -1}, False),
    ({"action": "MESSAGE", "message": "x", "current_plan_step": 100_001}, False),
    ({"action": "MESSAGE", "message": "x", "plan": [""]}, False),
    ({"action": "MESSAGE", "message": "x", "file_changes": [{"path": "a", "content": ""}]}, True),
    ({"action": "MESSAGE", "message": "x", "file_changes": [{"path": "a", "delete": True}]}, True),
    ({"action": "MESSAGE", "message": "x", "file_changes": [{"path": "a", "old": "x", "new": ""}]}, True),
    ({"action": "MESSAGE", "message": "x", "file_changes": [{"path": "a", "old": "", "new": "y"}]}, False),
    ({"action": "MESSAGE", "message": "x", "file_changes": [{"path": "a", "delete": 1}]}, False),
    ({"action": "MESSAGE", "message": "x", "file_changes": [{"path": "", "content": "x"}]}, False),
    ({"action": "MESSAGE", "message": "x", "file_changes": [{"path": "a", "content": "x", "delete": True}]}, False),
    ({"action": "MESSAGE", "message": "x", "file_changes": {"path": "a", "content": "x"}}, False),
]


@pytest.mark.parametrize("data, valid", SAMPLES, ids=[json.dumps(d)[:60] for d, _ in SAMPLES])
def test_the_schema_and_parse_answer_accept_and_refuse_the_same_answers(data, valid):
    assert _validator("response").is_valid(data) is valid
    assert _parses(data) is valid


# Path rules need more than a schema can say ('..', .git, drive letters), so
# the fuzzed answers use paths both accept; everything else varies.
BOUNDARIES = [
    None, True, False, 0, 1, -1, 100_000, 100_001, 2.0, 1.5, "", "a.txt", "x" * 1000, "x" * 1001, [], [""], ["a.txt"],
    [1], {}, [{"path": "a.txt", "content": ""}], [{"path": "a.txt", "delete": True}], [{"path": "a.txt", "delete": 1}],
    [{"path": "a.txt", "old": "", "new": "x"}], [{"path": "a.txt", "old": "x", "new": "y"}], [{"path": "", "content": "x"}],
    [{"path": "a.txt", "content": "x", "delete": True}], [{"path": "a.txt", "delete": True, "mode": "755"}],
]
leaves = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=5)
values = st.sampled_from(BOUNDARIES) | st.recursive(
    leaves,
    lambda children: st.lists(children, max_size=3)
    | st.dictionaries(st.sampled_from(["path", "content", "delete", "old", "new"]), children, max_size=4),
    max_leaves=10,
)
VALID = {
    "COMPLETED": {"evidence_files": ["a.txt"], "summary_for_supervisor": "done"},
    "STUCK": {"evidence_files": [], "summary_for_supervisor": "need a key"},
    "RETRY": {"evidence_files": ["a.txt"], "summary_for_supervisor": "again"},
    "CMD": {"command": "ls"},
    "ASK": {"question": "Which?"},
    "MESSAGE": {"message": "hi"},
}
FIELDS = [
    "action", "evidence_files", "summary_for_supervisor", "command", "question", "required", "message",
    "file_changes", "thought", "plan", "current_plan_step", "send_to", "extra",
]
# A valid answer with up to three fields replaced, dropped or added: most
# examples sit next to the boundary, where a disagreement would show.
answers = st.builds(
    lambda action, changes, dropped: {
        k: v for k, v in {"action": action, **VALID[action], **changes}.items() if k not in dropped
    },
    st.sampled_from(ACTIONS),
    st.dictionaries(st.sampled_from(FIELDS), values, max_size=3),
    st.sets(st.sampled_from(FIELDS), max_size=2),
)


def _safe_paths(data: dict) -> bool:
    def ok(path) -> bool:
        return not isinstance(path, str) or path in ("", "a.txt")

    changes = data.get("file_changes")
    paths = [c.get("path") for c in changes if isinstance(c, dict)] if isinstance(changes, list) else []
    evidence = data.get("evidence_files")
    paths += evidence if isinstance(evidence, list) else []
    return all(ok(p) for p in paths)


def test_every_single_field_change_gets_the_same_verdict_from_both():
    """Each valid answer with one field dropped or set to a boundary value, exhaustively."""
    cases = []
    for action in ACTIONS:
        base = {"action": action, **VALID[action]}
        cases += [{k: v for k, v in base.items() if k != dropped} for dropped in base]
        cases += [{**base, field: value} for field in FIELDS for value in BOUNDARIES]
    validator = _validator("response")
    disagreements = [data for data in cases if validator.is_valid(data) != _parses(data)]
    assert disagreements == []
    assert len(cases) > 1000


@settings(max_examples=500)
@given(answers)
def test_fuzzed_answers_get_the_same_verdict_from_both(data):
    if not _safe_paths(data):
        data = {k: v for k, v in data.items() if k not in ("file_changes", "evidence_files")}
    assert _validator("response").is_valid(data) == _parses(data), data
