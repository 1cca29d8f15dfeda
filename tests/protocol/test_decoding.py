"""The decoding schema (logist/protocol/decoding.py): generated from the protocol for
the actions open to each role and policy, in the engines' common subset, and
every answer that fits it passes the answer check (issue 26, acceptance 2).

hypothesis-jsonschema would draw instances of a schema, but its releases
fail with the hypothesis this suite uses ('many' object has no attribute
'more'); the subset is small and ours, so :func:`instances` draws from it
here, and every draw is checked against the schema with jsonschema first.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from logist.store.session import JobFiles
from logist.engine.create import create_job
from logist.protocol.decoding import (CONTENT_RULES, ENUM_VALUES, MOST_LISTED, decoding_schema, enum_values,
                                     response_formats, strict_root)
from logist.engine.prepare import answer_formats, structured_output
from logist.engine.prepare import open_actions
from logist.protocol.answer import ACTION_RULES, ACTIONS, InvalidAnswer, check_planner_answer, parse_answer
from logist.schemas import render, schemas_dir, worker_decoding_schema
from logist.store.manifest import PLANNER, Status
from logist.store.roles import builtin_roles

POLICIES = ("ask", "allow", "deny")
#: Keywords outside the subset every engine takes (see logist/protocol/decoding.py).
FORBIDDEN = {"if", "then", "else", "allOf", "oneOf", "not", "$ref", "$defs", "pattern", "maxLength", "const",
             "patternProperties", "dependentRequired"}


def _walk(schema, path="#"):
    yield path, schema
    if isinstance(schema, dict):
        for key, value in schema.items():
            yield from _walk(value, f"{path}/{key}")
    elif isinstance(schema, list):
        for index, value in enumerate(schema):
            yield from _walk(value, f"{path}/{index}")


def _schema_of(job) -> dict:
    manifest = job.manifest()
    role = builtin_roles()[manifest.turn.role]
    config = job.jobs_dir.config()
    formats = answer_formats(role, config, manifest, role.llm_model, "json", job.repo)
    assert structured_output(role, config, role.llm_model) == "auto"
    assert [f and f["type"] for f in formats] == ["json_schema", "json_object", "json_object", None]
    # Strict mode's form has an object at its root: the choice of objects under "response".
    assert formats[0]["json_schema"]["schema"] == strict_root(formats[1]["schema"])
    assert formats[0]["json_schema"]["schema"]["properties"]["response"] is formats[1]["schema"]
    return formats[1]["schema"]


def _variants(schema: dict) -> dict[str, dict]:
    variants = schema["anyOf"] if "anyOf" in schema else [schema]
    return {v["properties"]["action"]["enum"][0]: v for v in variants}


def _jobs_for_every_role_and_policy(jobs):
    """(label, job, role, policy) for the Worker, the Supervisor and the Planner at their turn."""
    from logist.engine.step import post_answer

    found = []
    for policy in POLICIES:
        worker = create_job(jobs, f"w-{policy}", "Write hello.py", command_policy=policy)
        found.append(("Worker", worker, policy))
        supervisor = create_job(jobs, f"s-{policy}", "Write hello.py", command_policy=policy)
        post_answer(supervisor, json.dumps({"action": "COMPLETED", "evidence_files": [], "summary_for_supervisor": "x"}))
        assert supervisor.manifest().status == Status.REVIEWING
        found.append(("Supervisor", supervisor, policy))
        planned = create_job(jobs, f"p-{policy}", "Write hello.py", command_policy=policy, workflow="planned")
        assert planned.manifest().turn.slot == PLANNER
        found.append(("Planner", planned, policy))
    return found


def test_the_schema_follows_the_protocol_for_every_builtin_role_and_policy(jobs):
    for label, job, policy in _jobs_for_every_role_and_policy(jobs):
        manifest = job.manifest()
        schema = _schema_of(job)
        Draft202012Validator.check_schema(schema)
        variants = _variants(schema)
        expected = [a for a in ACTIONS if not (a == "CMD" and policy == "deny")]
        assert list(variants) == expected == list(open_actions(manifest)), (label, policy)
        role = builtin_roles()[label]
        for action, variant in variants.items():
            rule = ACTION_RULES[action]
            props = variant["properties"]
            assert variant["additionalProperties"] is False and variant["required"] == list(props), (label, action)
            for name in rule.required:
                assert {"type": "null"} not in props[name].get("anyOf", []), f"{action}.{name} is required, not nullable"
            assert ("file_changes" in props) is (role.file_changes != "refused"), (label, action)
            if label == "Planner" and action != "CMD":
                roles = [n for slot, n in manifest.roles.items() if slot != PLANNER]
                assert props["send_to"]["enum"] == (["User"] if action == "ASK" else [*roles, "User"])
                assert {"plan", "current_plan_step", "send_to"} <= set(props)
            else:
                assert "send_to" not in props and "plan" not in props
        for where, node in _walk(schema):
            if isinstance(node, dict):
                assert not FORBIDDEN & set(node), f"{label}/{policy}: {where} uses {FORBIDDEN & set(node)}"


def test_the_default_workers_schema_is_committed_and_current(jobs):
    worker = create_job(jobs, "w", "Write hello.py")
    committed = json.loads((schemas_dir() / "worker-decoding-schema.json").read_text(encoding="utf-8"))
    assert (schemas_dir() / "worker-decoding-schema.json").read_text(encoding="utf-8") == render(worker_decoding_schema())
    assert {k: v for k, v in committed.items() if k not in ("$schema", "title", "description")} == decoding_schema()
    # A job's own lists its workspace's files as what an edit or a deletion may name: none in a new, empty one.
    assert _schema_of(worker) == decoding_schema(existing=[])
    (worker.workspace / "a.py").write_text("x = 1\n")
    edits = _variants(_schema_of(worker))["MESSAGE"]["properties"]["file_changes"]["anyOf"][0]["items"]["anyOf"]
    assert [kind["properties"]["path"] for kind in edits[1:]] == [{"type": "string", "enum": ["a.py"]}] * 2


def test_a_listing_stays_within_strict_modes_enum_limit(jobs):
    """OpenAI's strict mode refuses a schema of more than 500 enum values in
    all: each listed file counts twice in every action's object, so a
    workspace listing that would pass the limit is left out (any path)."""
    for options in ({}, {"planner_roles": ["Worker", "Supervisor"]}):
        own = enum_values(decoding_schema(existing=None, **options))  # the actions' own values
        fits = [count for count in range(1, 201) if 2 * len(ACTIONS) * count + own <= ENUM_VALUES]
        assert 30 < max(fits) <= MOST_LISTED
        for count in (1, 10, max(fits), max(fits) + 1, MOST_LISTED + 1, 200):
            files = [f"src/module_{n}.py" for n in range(count)]
            schema = decoding_schema(existing=files, **options)
            assert enum_values(schema) <= ENUM_VALUES, count
            listed = [node for _, node in _walk(schema) if isinstance(node, dict) and node.get("enum") == files]
            assert len(listed) == (2 * len(ACTIONS) if count in fits else 0), count
    # Through a job: a workspace of 60 files is sent no listing, one of 3 files is.
    worker = create_job(jobs, "many", "Write hello.py")
    for n in range(60):
        (worker.workspace / f"f{n}.txt").write_text("x\n")
    schema = _schema_of(worker)
    assert enum_values(schema) <= ENUM_VALUES and schema == decoding_schema(existing=None)
    few = create_job(jobs, "few", "Write hello.py")
    for n in range(3):
        (few.workspace / f"f{n}.txt").write_text("x\n")
    edits = _variants(_schema_of(few))["MESSAGE"]["properties"]["file_changes"]["anyOf"][0]["items"]["anyOf"]
    assert [kind["properties"]["path"]["enum"] for kind in edits[1:]] == [["f0.txt", "f1.txt", "f2.txt"]] * 2


def test_forms_for_each_setting():
    schema = decoding_schema(("MESSAGE",))
    assert response_formats("json_schema", schema) == [
        {"type": "json_schema", "json_schema": {"name": "logist_answer", "strict": True, "schema": schema}}], \
        "one object: the root as it is"
    choice = decoding_schema(("MESSAGE", "CMD"))
    assert response_formats("json_schema", choice)[0]["json_schema"]["schema"] == {
        "type": "object", "properties": {"response": choice}, "required": ["response"], "additionalProperties": False}
    assert response_formats("json_object", schema) == [{"type": "json_object", "schema": schema}]
    assert response_formats("off", schema) == [None]
    with pytest.raises(ValueError, match="unknown structured_output"):
        response_formats("grammar", schema)
    with pytest.raises(ValueError):
        decoding_schema(("LAUNCH",))


# --------------------------------------------------------------------------
# Whatever fits the schema passes the answer check

#: Paths as the content rules want them (the schema cannot say '..' or .git).
safe_paths = st.from_regex(r"\A[a-z][a-z0-9_]{0,8}(/[a-z][a-z0-9_]{0,8}){0,2}(\.[a-z]{1,3})?\Z")
#: CONTENT_RULES: no NUL, no lone surrogate.
texts = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=40)


def instances(schema: dict, name: str = "") -> st.SearchStrategy:
    """Values of ``schema`` (the decoding subset); ``name``: the property it is the value of."""
    if "anyOf" in schema:
        return st.one_of([instances(sub, name) for sub in schema["anyOf"]])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kind = schema.get("type")
    if kind == "null":
        return st.none()
    if kind == "boolean":
        return st.booleans()
    if kind == "integer":
        return st.integers(schema.get("minimum", -10**6), schema.get("maximum", 10**6))
    if kind == "string":
        if name == "path" or name == "evidence_files":
            return safe_paths
        return texts.filter(lambda t: len(t) >= schema.get("minLength", 0))
    if kind == "array":
        return st.lists(instances(schema["items"], name), min_size=schema.get("minItems", 0), max_size=3)
    if kind == "object":
        return st.fixed_dictionaries({key: instances(sub, key) for key, sub in schema["properties"].items()})
    raise AssertionError(f"a keyword the decoding subset does not have: {schema}")


def _schemas() -> list[tuple[str, dict, bool, list[str]]]:
    planner_roles = ["Worker", "Supervisor"]
    found = []
    for policy in POLICIES:
        actions = [a for a in ACTIONS if not (a == "CMD" and policy == "deny")]
        found.append((f"worker-{policy}", decoding_schema(actions), False, []))
        found.append((f"supervisor-{policy}", decoding_schema(actions, file_changes=False), False, []))
        found.append((f"planner-{policy}", decoding_schema(actions, planner_roles=planner_roles), True, planner_roles))
    return found


@pytest.mark.parametrize("label, schema, planner, roles", _schemas(), ids=[s[0] for s in _schemas()])
@pytest.mark.parametrize("form", ["json_object", "json_schema"])
def test_an_answer_that_fits_the_decoding_schema_passes_the_answer_check(label, schema, planner, roles, form):
    sent = strict_root(schema) if form == "json_schema" else schema
    validator = Draft202012Validator(sent)

    @settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(instances(sent))
    def check(written: dict) -> None:
        assert validator.is_valid(written), written  # the draw fits the schema
        answer = written["response"] if sent is not schema else written
        changed = [c["path"] for c in answer.get("file_changes") or [] if "old" not in c]
        if len(changed) != len(set(changed)) or len({json.dumps(c, sort_keys=True) for c in answer.get("file_changes") or []}) != len(answer.get("file_changes") or []):
            return  # CONTENT_RULES: a file is written or deleted at most once, a change never given twice
        # current_plan_step needs no exception: any the schema allows is read (past the plan's end, as its last step).
        try:
            read = parse_answer(json.dumps(written), planner=planner)
            if planner:
                check_planner_answer(read, roles)
        except InvalidAnswer as exc:
            pytest.fail(f"{label}: {answer} fits the decoding schema but was refused: {exc}")
        assert read.action == answer["action"]

    check()


def test_the_content_rules_are_the_only_gap():
    """What the schema lets through and the check refuses is exactly a content rule."""
    schema = decoding_schema()
    validator = Draft202012Validator(schema)
    outside = {"action": "MESSAGE", "message": "x", "file_changes": [{"path": "../etc/passwd", "content": "x"}]}
    assert validator.is_valid(outside)
    with pytest.raises(InvalidAnswer, match=r"\.\."):
        parse_answer(json.dumps(outside))
    assert any("'..'" in rule for rule in CONTENT_RULES)


# --------------------------------------------------------------------------
# The forms a request carries, and an endpoint that refuses one (a real HTTP server)


def test_what_each_setting_and_role_sends(jobs):
    from logist.store.roles import RoleManifest

    job = create_job(jobs, "w", "Write hello.py")
    manifest, config = job.manifest(), job.jobs_dir.config()
    worker = builtin_roles()["Worker"]
    assert answer_formats(worker, config, manifest, "m", "tags") == [None], "the tags protocol sends none"
    own = {"type": "json_object"}
    assert answer_formats(worker.model_copy(update={"response_format": own}), config, manifest, "m", "json") == [own]
    off = worker.model_copy(update={"structured_output": "off"})
    assert answer_formats(off, config, manifest, "m", "json") == [None]
    per_model = type(config).model_validate({"model_settings": {"m": {"structured_output": "json_object"}}})
    forms = answer_formats(worker, per_model, manifest, "m", "json")
    assert [f["type"] for f in forms] == ["json_object"] and "schema" in forms[0]
    with pytest.raises(ValueError, match="response_format or structured_output"):
        RoleManifest(name="X", description="x", llm_model="m", response_format=own, structured_output="auto")


@pytest.mark.wire  # a response_format refused by the endpoint: the wire
def test_a_refused_form_is_asked_again_in_the_next_and_remembered_for_the_command(jobs, llm):
    from logist.model.client import Endpoints
    from logist.engine.step import step_once
    from logist.replay.scripted import Reply

    job = create_job(jobs, "w", "Write hello.py")
    refusal = Reply(status=400, error_message="response_format 'json_schema' is not supported by this server")
    llm.add(refusal, '{"action": "MESSAGE", "message": "one"}', '{"action": "MESSAGE", "message": "two"}')
    endpoints = Endpoints()  # what a command's steps share (logist.api.Jobs, a logist command's run)
    step_once(job, base_url=llm.base_url, endpoints=endpoints)
    step_once(job, base_url=llm.base_url, endpoints=endpoints)
    assert [r["response_format"]["type"] for r in llm.requests] == ["json_schema", "json_object", "json_object"]
    assert "schema" in llm.requests[1]["response_format"]
    calls = [e for e in JobFiles(job.dir).load_history().interactions if e.kind == "llm_call"]
    assert [e.request.metadata.response_format["type"] for e in calls] == ["json_object", "json_object"]
    assert all(e.response.status == "SUCCESS" for e in calls) and job.manifest().calls == 2, "a refusal is no call"


@pytest.mark.wire  # a response_format refused by the endpoint: the wire
def test_a_form_set_explicitly_and_refused_is_a_setup_error_and_the_job_stays_as_it_was(jobs, llm):
    from logist.engine.step import step_once
    from logist.errors import EndpointError
    from logist.replay.scripted import Reply

    (jobs.path / "config.json").write_text(json.dumps({"model_settings": {"gpt-4o-mini": {"structured_output": "json_schema"}}}))
    job = create_job(jobs, "w", "Write hello.py")
    before = job.history_path.read_bytes(), job.manifest_path.read_bytes()
    llm.add(Reply(status=400, error_message="Invalid schema for response_format 'logist_answer'"))
    with pytest.raises(EndpointError, match="refused the response_format json_schema"):
        step_once(job, base_url=llm.base_url)
    assert (job.history_path.read_bytes(), job.manifest_path.read_bytes()) == before
