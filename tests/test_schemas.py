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
import logist.schemas
from logist.store.history import HISTORY_SCHEMA
from logist.protocol.answer import ACTIONS, InvalidAnswer, parse_answer, validate_answer
from logist.schemas import FROZEN, SCHEMAS, llm_chat_schema, render, stale_schemas, write_schemas

SCHEMAS_DIR = REPO_ROOT / "schemas"


@pytest.fixture(scope="session")
def built() -> dict[str, str]:
    """Each schema built once for this module's tests, as its file holds it
    (building them all costs about 2 s of CPU). Once per process, not per
    module: the longest tests start first (conftest), which splits a module's
    tests, and a module fixture would be built again at each return to it."""
    return {name: render(build()) for name, build in SCHEMAS.items()}


@pytest.fixture
def built_once(monkeypatch, built):
    """logist.schemas's builders give what they built once (:func:`built`):
    for the tests of what is done with the schemas (a stale file found,
    rewritten, the command's output), not of how they are built."""
    monkeypatch.setattr(logist.schemas, "SCHEMAS", {name: (lambda text=text: json.loads(text)) for name, text in built.items()})


def test_committed_schemas_are_what_the_models_generate(built, built_once):
    assert sorted(p.name for p in SCHEMAS_DIR.glob("*.json")) == sorted([*SCHEMAS, *FROZEN])
    for name, text in built.items():
        committed = (SCHEMAS_DIR / name).read_text(encoding="utf-8")
        assert committed == text, f"{name} is stale: run python -m logist.schemas"
    assert stale_schemas(SCHEMAS_DIR) == []


def test_a_stale_or_missing_file_is_named_and_rewritten(tmp_path, built, built_once):
    assert stale_schemas(tmp_path) == list(SCHEMAS), "every file is missing"
    assert write_schemas(tmp_path) == list(SCHEMAS)
    assert stale_schemas(tmp_path) == []
    assert {name: (tmp_path / name).read_text(encoding="utf-8") for name in SCHEMAS} == built
    stale = json.loads(built["llm-chat-schema.json"])
    stale["$defs"]["response"]["properties"]["command"]["minLength"] = 0
    (tmp_path / "llm-chat-schema.json").write_text(render(stale), encoding="utf-8")
    assert stale_schemas(tmp_path) == ["llm-chat-schema.json"]
    # Only a byte-exact copy is current: the newline at the end counts too.
    (tmp_path / "llm-chat-schema.json").write_text(built["llm-chat-schema.json"].rstrip("\n"), encoding="utf-8")
    assert stale_schemas(tmp_path) == ["llm-chat-schema.json"]
    assert write_schemas(tmp_path) == ["llm-chat-schema.json"]
    assert stale_schemas(tmp_path) == []
    assert write_schemas(tmp_path) == []


def _module(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(Path(logist.__file__).parent.parent))
    return subprocess.run(
        [sys.executable, "-m", "logist.schemas", *args], capture_output=True, text=True, env=env, timeout=60
    )


def test_the_command_checks_and_rewrites(tmp_path, built, built_once, capsys):
    (tmp_path / "llm-chat-schema.json").write_text("{}\n", encoding="utf-8")
    # Once as python -m logist.schemas runs it (its builders its own), then its main() in this process.
    check = _module("--check", "--dir", str(tmp_path))
    assert check.returncode == 1
    assert "stale: llm-chat-schema.json" in check.stderr
    assert (tmp_path / "llm-chat-schema.json").read_text(encoding="utf-8") == "{}\n", "--check changes nothing"
    assert logist.schemas.main(["--check", "--dir", str(tmp_path)]) == 1
    assert "stale: llm-chat-schema.json (run python -m logist.schemas)" in capsys.readouterr().err
    assert logist.schemas.main(["--dir", str(tmp_path)]) == 0
    assert "wrote llm-chat-schema.json" in capsys.readouterr().err
    assert (tmp_path / "llm-chat-schema.json").read_text(encoding="utf-8") == built["llm-chat-schema.json"]
    assert logist.schemas.main(["--check", "--dir", str(tmp_path)]) == 0
    assert capsys.readouterr().err == ""


#: Schemas that describe no file: what requests carry, not what Logist writes or reads.
NOT_FILES = ("worker-decoding-schema.json",)
FILE_SCHEMAS = [name for name in SCHEMAS if name not in NOT_FILES]


@pytest.mark.parametrize("name", list(SCHEMAS))
def test_rendering_is_stable(name, built):
    text = built[name]
    assert text.endswith("}\n") and not text.endswith("\n\n")
    assert render(json.loads(text)) == text
    assert render(SCHEMAS[name]()) == text, "building twice gives the same bytes"


@pytest.mark.parametrize("name", FILE_SCHEMAS)
def test_every_file_has_the_header(name, built):
    schema = json.loads(built[name])
    Draft202012Validator.check_schema(schema)
    assert list(schema)[:4] == ["$schema", "$id", "title", "description"]
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == "https://logist.dev/schemas/" + name
    assert schema["title"].strip() and schema["description"].strip()


# --------------------------------------------------------------------------
# Every field says what it is

#: Keywords whose values are data or conditions, not definitions of fields.
NOT_DEFINITIONS = {"if", "default", "examples", "const", "enum"}


def undescribed(schema, where: str = "#") -> list[str]:
    """The JSON pointers of the properties (at any depth, $defs included)
    and of the object definitions that have no description, in file order."""
    missing: list[str] = []
    if isinstance(schema, list):
        for i, item in enumerate(schema):
            missing += undescribed(item, f"{where}/{i}")
        return missing
    if not isinstance(schema, dict):
        return missing
    if where.count("/") == 2 and where.startswith("#/$defs/") and not str(schema.get("description", "")).strip():
        missing.append(where)
    for key, value in schema.items():
        if key in NOT_DEFINITIONS:
            continue
        if key == "properties":
            for name, field in value.items():
                if not (isinstance(field, dict) and str(field.get("description", "")).strip()):
                    missing.append(f"{where}/properties/{name}")
                missing += undescribed(field, f"{where}/properties/{name}")
        else:
            missing += undescribed(value, f"{where}/{key}")
    return missing


@pytest.mark.parametrize("name", FILE_SCHEMAS)
def test_every_field_of_every_file_has_a_description(name, built):
    missing = undescribed(json.loads(built[name]))
    assert not missing, f"{name}: {missing[0]} has no description (a docstring under the field)" + (
        f", nor have {len(missing) - 1} more" if len(missing) > 1 else "")


def test_the_check_finds_a_field_without_a_description_at_any_depth():
    schema = {
        "properties": {"a": {"description": "A.", "items": {"$ref": "#/$defs/Inner"}}},
        "allOf": [{"if": {"properties": {"kind": {"const": "x"}}}, "then": {"required": ["a"]}}],
        "$defs": {
            "Inner": {"description": "Inner.", "properties": {"b": {"description": " "}, "c": {"description": "C."}}},
            "Bare": {"type": "object", "properties": {}},
        },
    }
    assert undescribed(schema) == ["#/$defs/Inner/properties/b", "#/$defs/Bare"]
    schema["$defs"]["Inner"]["properties"]["b"]["description"] = "B."
    schema["$defs"]["Bare"]["description"] = "Bare."
    assert undescribed(schema) == [], "conditions (if) are not fields"


# --------------------------------------------------------------------------
# The document


def test_the_document_keeps_its_shape():
    schema = llm_chat_schema()
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == "https://logist.dev/schemas/llm-chat-schema.json"
    assert {name: field["$ref"] for name, field in schema["properties"].items()} == {
        "request": "#/$defs/request", "response": "#/$defs/response"}
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
    """The protocol's one shape: what the schema describes. (parse_answer
    first brings the forms real models send to it; see _reads.)"""
    try:
        validate_answer(data)
    except InvalidAnswer:
        return False
    return True


def _reads(data) -> bool:
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
    # Reading what models really send only widens what is accepted: an
    # unknown field is kept apart, a summary over 1000 characters is cut.
    long_summary = len(data.get("summary_for_supervisor") or "") > 1000
    assert _reads(data) is (valid or "extra" in data or long_summary)


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
    valid = _validator("response").is_valid(data)
    assert valid == _parses(data), data
    if valid:
        assert _reads(data), data


# --------------------------------------------------------------------------
# Every file of a real job validates against the schema it names


def _schema_for(data: dict, path: Path) -> dict:
    """The committed schema a file names in ``$schema`` (a file name, or a path or URL ending in one)."""
    named = data.get("$schema")
    assert isinstance(named, str), f"{path} names no $schema"
    name = named.rsplit("/", 1)[-1]
    assert name in SCHEMAS, f"{path} names {named!r}, which is not a file of schemas/"
    return json.loads((SCHEMAS_DIR / name).read_text(encoding="utf-8"))


def _errors(data, schema: dict) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}" for e in Draft202012Validator(schema).iter_errors(data)]


def _validate_tree(root: Path) -> dict[str, str]:
    """Validate every JSON file under ``root`` (workspaces aside: they hold
    the job's own files) against the schema it names; file -> schema."""
    checked = {}
    for path in sorted(root.rglob("*.json")):
        if {"workspace", "response_formats"} & set(path.relative_to(root).parts):
            continue  # the job's own files; the response_format values sent, each checked by its digest
        data = json.loads(path.read_text(encoding="utf-8"))
        schema = _schema_for(data, path)
        assert _errors(data, schema) == [], path
        # The validator is not vacuous: a wrong value is refused.
        assert _errors({**data, "format": "two"}, schema), path
        checked[str(path.relative_to(root))] = schema["$id"].rsplit("/", 1)[-1]
    return checked


def test_every_file_of_a_job_validates_against_the_schema_it_names(jobs, llm, tmp_path):
    from logist.engine.create import create_job
    from logist.engine.decide import user_action
    from logist.engine.step import post_answer, step_once
    from logist.replay.fixtures import record_fixture
    from logist.replay.scripted import answer

    # The files people write, naming their schema in the ways an editor accepts.
    (jobs.path / "config.json").write_text(json.dumps({
        "$schema": "https://logist.dev/schemas/config.schema.json",
        "default_model": "demo-model",
        "prices": {"demo-model": {"input_per_million": 1, "output_per_million": 2}},
        "defaults": {"command_timeout": 30},
    }))
    (jobs.path / "roles" / "tester.json").write_text(json.dumps({
        "$schema": "../../schemas/role-manifest.schema.json",
        "name": "Tester", "description": "Tests.", "instructions": "Test it.", "llm_model": "m",
    }))
    job = create_job(jobs, "demo", "Write notes.txt", acceptance=["notes.txt names the file"], allowed_commands=["echo *"])
    llm.add(answer("CMD", command="echo hi"))  # allowed: runs (a call, its prompt in full)
    step_once(job, endpoints=llm.endpoints)
    post_answer(job, answer("CMD", command="ls"))  # held for a person (a posted answer continuing the call)
    user_action(job, "approve-command")
    llm.add(answer("ASK", question="Which name?"))
    step_once(job, endpoints=llm.endpoints)
    user_action(job, "answer", "notes.txt")
    post_answer(job, answer(
        "COMPLETED", "Wrote notes.txt.", ["notes.txt"], file_changes=[{"path": "notes.txt", "content": "notes\n"}]))
    llm.add(answer("COMPLETED", "notes.txt is there."))
    step_once(job, endpoints=llm.endpoints)
    user_action(job, "approve")
    record_fixture(job, tmp_path / "fixture")
    manifest = job.manifest()
    job.session.journal.begin_applying(manifest.last_sequence + 1, manifest.workspace_commit, answer("MESSAGE", message="x"))

    history = json.loads(job.history_path.read_text(encoding="utf-8"))["interactions"]
    assert {"user_action", "llm_call", "poststep"} <= {e["kind"] for e in history}
    assert any("continues" in e.get("request", {}) for e in history), "both forms of a request are checked"
    assert any(e.get("command", {}).get("decision") == "ask" for e in history)
    assert any((e.get("usage") or {}).get("cost_usd") for e in history)
    assert manifest.status == "SUCCESS"

    assert _validate_tree(jobs.path) == {
        "config.json": "config.schema.json",
        "demo/jobHistory.json": HISTORY_SCHEMA,
        "demo/job_manifest.json": "job-manifest.v2.schema.json",
        "demo/step_journal.json": "step-journal.v2.schema.json",
        "jobs_index.json": "jobs-index.v2.schema.json",
        "roles/tester.json": "role-manifest.schema.json",
    }
    assert _validate_tree(tmp_path / "fixture") == {
        "jobHistory.json": HISTORY_SCHEMA,
        "job.json": "fixture-job.schema.json",
        "job_manifest.json": "job-manifest.v2.schema.json",
    }


@pytest.mark.parametrize("name", sorted(p.parent.name for p in (REPO_ROOT / "fixtures").glob("*/job.json")))
def test_the_bundled_fixtures_job_json_validates(name):
    data = json.loads((REPO_ROOT / "fixtures" / name / "job.json").read_text(encoding="utf-8"))
    schema = json.loads((SCHEMAS_DIR / "fixture-job.schema.json").read_text(encoding="utf-8"))
    assert _errors(data, schema) == []
    assert _errors({**data, "objectve": "typo"}, schema) == ["(top): Additional properties are not allowed ('objectve' was unexpected)"]


def test_files_people_write_may_name_their_schema_and_still_refuse_typos(jobs, tmp_path):
    from logist.errors import ConfigError
    from logist.replay.fixtures import load_fixture
    from logist.store.config import load_config
    from logist.store.roles import load_role_file

    config = jobs.path / "config.json"
    config.write_text(json.dumps({"$schema": "config.schema.json", "max_retries": 5}))
    assert load_config(jobs.path).max_retries == 5
    config.write_text(json.dumps({"$schema": "config.schema.json", "max_retrys": 5}))
    with pytest.raises(ConfigError, match=r"config.json: max_retrys: Extra inputs are not permitted"):
        load_config(jobs.path)

    role = tmp_path / "tester.json"
    fields = {"name": "Tester", "description": "Tests.", "instructions": "Test it.", "llm_model": "m"}
    role.write_text(json.dumps({"$schema": "role-manifest.schema.json", **fields}))
    assert load_role_file(role).name == "Tester"
    role.write_text(json.dumps({"$schema": "role-manifest.schema.json", **fields, "temprature": 0.1}))
    with pytest.raises(ConfigError, match=r"tester.json: temprature: Extra inputs are not permitted"):
        load_role_file(role)

    folder = tmp_path / "fixture"
    folder.mkdir()
    (folder / "job.json").write_text(json.dumps({"$schema": "fixture-job.schema.json", "job_id": "x", "objective": "o"}))
    fixture = load_fixture(folder)
    assert fixture.job_spec.model_dump(exclude_unset=True) == {"objective": "o"}
    (folder / "job.json").write_text(json.dumps({"job_id": "x", "objective": "o", "max_step": 3}))
    with pytest.raises(ConfigError, match=r"job.json: max_step: Extra inputs are not permitted"):
        load_fixture(folder)
    (folder / "job.json").write_text(json.dumps({"job_id": "not a job id", "objective": "o"}))
    with pytest.raises(ConfigError, match=r"job.json: job_id: String should match pattern"):
        load_fixture(folder)


def test_a_jobs_index_without_a_format_reads_and_is_written_back_with_one(jobs):
    jobs.index_path.write_text(json.dumps({"current_job_id": "a", "jobs": {"a": "a"}, "queue": ["a"], "later": [1]}))
    index = jobs.read_index()
    assert (index.current_job_id, index.jobs, index.queue) == ("a", {"a": "a"}, ["a"])
    jobs.write_index(index)
    written = json.loads(jobs.index_path.read_text(encoding="utf-8"))
    assert written == {
        "$schema": "jobs-index.v2.schema.json", "format": 2, "current_job_id": "a", "jobs": {"a": "a"}, "queue": ["a"],
        "later": [1],
    }, "the format named first, a newer version's field kept"
    assert list(written)[:2] == ["$schema", "format"]


def test_the_models_leave_their_field_docstrings_to_the_schemas():
    """Building a model that reads its field docstrings parses its class's
    source (in every command); only the schemas need them, and
    :func:`logist.schemas.documented` reads them there (the committed files
    above still have every description)."""
    from pydantic import BaseModel

    from logist.replay import fixtures
    from logist.store import calls, config, entries, jobsdir, journal, manifest, recovery, roles, skills

    models = [value for module in (fixtures, calls, config, entries, jobsdir, journal, manifest, recovery, roles, skills)
              for value in vars(module).values()
              if isinstance(value, type) and issubclass(value, BaseModel) and value.__module__ == module.__name__]
    assert len(models) > 15
    assert [m.__name__ for m in models if m.model_config.get("use_attribute_docstrings")] == []
