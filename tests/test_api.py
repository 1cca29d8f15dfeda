"""The library's front door (logist/api.py): the example of
docs/python-api.md runs as written, ``logist.__all__`` is small and holds no
internals, verbs take typed keywords, and what calls learn of an endpoint
lives as long as the object that made them (no module-level cache)."""

from __future__ import annotations

import re
import textwrap

import pytest

import logist
from logist.model import client as llm_module
from logist.errors import ConfigError, TransitionError
from logist.replay.scripted import Reply, answer

from conftest import REPO_ROOT

PAGE = REPO_ROOT / "docs" / "python-api.md"


def _example() -> str:
    text = PAGE.read_text(encoding="utf-8")
    return text.split("<!-- tested by tests/test_api.py -->\n```python\n", 1)[1].split("```", 1)[0]


def test_the_docs_example_runs_to_success_and_prints_what_its_comments_say(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code = _example()
    said = [re.search(r"#\s*(.*)$", line).group(1).strip() for line in code.splitlines()
            if line.startswith("print(") or line.lstrip().startswith("print(")]
    printed: list[str] = []

    def capture(*args, end="\n"):
        printed.append((" ".join(map(str, args)) + end).rstrip("\n"))

    exec(compile(code, str(PAGE), "exec"), {"print": capture})
    assert printed == said
    job = logist.open(tmp_path / "jobs")["hello"]
    assert job.status == logist.Status.SUCCESS
    assert [e.user_input.action for e in job.history() if e.user_input] == ["create", "answer", "reject", "approve"]


def test_the_front_door_is_small_and_holds_no_internals():
    assert len(logist.__all__) <= 15
    assert all(hasattr(logist, name) for name in logist.__all__)
    for internal in ("create_job", "run_job", "step_once", "user_action", "post_answer", "JobsDir", "load_history"):
        assert not hasattr(logist, internal), f"logist.{internal} is an internal: reach it through its module"
    assert logist.open("jobs").__class__ is logist.Jobs


def test_verbs_take_typed_keywords_only(tmp_path):
    jobs = logist.open(tmp_path / "jobs")
    with pytest.raises(TypeError):
        jobs.create("x", objective="Write x", max_stepz=3)  # no **kwargs: a misspelt keyword is refused
    job = jobs.create("x", objective="Write x", acceptance=["it exists"], max_steps=5)
    manifest = job.manifest()
    assert manifest.acceptance_criteria == ["it exists"] and manifest.settings.max_steps == 5
    with pytest.raises(TypeError):
        job.reject()  # feedback is required
    with pytest.raises(TypeError):
        job.set_budgets(5)  # budgets by name only
    with pytest.raises(ConfigError, match="max_steps"):
        jobs.create("y", objective="Write y", max_steps=0)  # a bad value: one line naming the field
    assert jobs.ids() == ["x"]


def test_a_spec_gives_the_other_fields_and_the_keywords_win(tmp_path):
    jobs = logist.open(tmp_path / "jobs")
    spec = logist.JobSpec(objective="From the spec", details="Some background", max_steps=7)
    job = jobs.create("s", objective="From the keyword", spec=spec)
    manifest = job.manifest()
    assert (manifest.objective, manifest.details, manifest.settings.max_steps) == \
        ("From the keyword", "Some background", 7)


def test_a_verb_the_state_refuses_raises_and_records_nothing(tmp_path):
    job = logist.open(tmp_path / "jobs").create("r", objective="Write r")
    before = len(job.history())
    with pytest.raises(TransitionError, match="cannot approve job 'r': it is PENDING"):
        job.approve()
    assert len(job.history()) == before and job.status == "PENDING"
    job.suspend()
    assert job.status == "SUSPENDED"
    job.resume()
    assert job.status == "PENDING"


@pytest.mark.wire  # what calls learn of an endpoint
def test_what_calls_learn_of_an_endpoint_lives_with_the_jobs_that_made_them(tmp_path, llm):
    # A refused response_format is remembered by the Jobs whose call met it,
    # and by no other: a new logist.open starts from nothing.
    refusal = Reply(status=400, error_message="response_format 'json_schema' is not supported by this server")
    llm.add(refusal, answer("MESSAGE", message="one"), answer("MESSAGE", message="two"),
            refusal, answer("MESSAGE", message="three"))
    first = logist.open(tmp_path / "jobs", base_url=llm.base_url)
    job = first.create("e", objective="Write e")
    job.call()
    job.call()
    sent = [r["response_format"]["type"] for r in llm.requests]
    assert sent == ["json_schema", "json_object", "json_object"], "the Jobs remembers the refusal"
    logist.open(tmp_path / "jobs", base_url=llm.base_url)["e"].call()
    sent = [r["response_format"]["type"] for r in llm.requests]
    assert sent[3:] == ["json_schema", "json_object"], "another Jobs starts afresh"
    assert first.endpoints.refused == {llm.base_url: {"json_schema (strict)"}}


def test_the_endpoint_client_module_keeps_no_state_of_its_own():
    mutable = [name for name, value in vars(llm_module).items()
               if isinstance(value, (dict, set, list)) and not name.startswith("__")]
    assert mutable == []


def test_the_package_docstring_points_to_the_docs_page():
    assert "docs/python-api.md" in textwrap.dedent(logist.__doc__)
    assert "](docs/python-api.md)" in (REPO_ROOT / "README.md").read_text(encoding="utf-8")


def test_a_jobs_closes_its_endpoints_clients_with_or_without_with(tmp_path, llm_server):
    llm_server.add(answer("MESSAGE", message="one"), answer("MESSAGE", message="two"), answer("MESSAGE", message="three"))
    with logist.open(tmp_path / "jobs", base_url=llm_server.base_url) as jobs:
        job = jobs.create("c", objective="Write c")
        job.call()
        client = jobs.endpoints.client(llm_server.base_url, None)  # the one the call used (no key is set here)
        assert not client.is_closed()
    assert client.is_closed(), "the end of the with block closes the clients"

    jobs = logist.open(tmp_path / "jobs", base_url=llm_server.base_url)  # without with: close() releases them
    jobs["c"].call()
    client = jobs.endpoints.client(llm_server.base_url, None)
    jobs.close()
    assert client.is_closed()
    assert jobs["c"].call().action == "MESSAGE", "a closed Jobs opens a client again for a later call"
    assert not jobs.endpoints.client(llm_server.base_url, None).is_closed()
    jobs.close()


def test_step_is_turn_under_its_old_name_and_says_so(tmp_path, llm):
    llm.add(answer("MESSAGE", message="one"), answer("ASK", question="Which?"),
            answer("MESSAGE", message="two"), answer("ASK", question="Which now?"))
    with logist.open(tmp_path / "jobs", model=llm) as jobs:
        job = jobs.create("t", objective="Write t")
        turn = job.turn()
        assert [r.action for r in turn] == ["MESSAGE", "ASK"] and job.status == "INPUT_REQUIRED"
        job.answer("This one")
        with pytest.warns(DeprecationWarning, match=r"Job\.turn\(\)"):
            old = job.step()
        assert [r.action for r in old] == ["MESSAGE", "ASK"], "the same role turn"


def _files(folder) -> dict:
    return {str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _older_format_job(jobs_path, job_id: str):
    """A job in history format 3 (a running one: its Worker's turn goes on),
    as an earlier Logist left it: the first 3 entries of tests/data/v3-calc."""
    import json

    from logist.store.history import HISTORY_FORMAT
    from logist.store.recovery import manifest_at

    data = REPO_ROOT / "tests" / "data" / "v3-calc"
    job = logist.open(jobs_path).create_from_fixture(data, job_id)
    history = json.loads((data / "jobHistory.json").read_text(encoding="utf-8"))
    history["interactions"] = history["interactions"][:3]
    (job.dir / "jobHistory.json").write_text(json.dumps(history), encoding="utf-8")
    manifest = manifest_at(job.stored, job.stored.entry(3))
    (job.dir / "job_manifest.json").write_text(json.dumps(manifest.dump()), encoding="utf-8")
    assert job.stored.history_format() == 3 < HISTORY_FORMAT and manifest.status == "RUNNING"
    return job


def test_a_read_never_writes_an_older_job_is_read_as_it_is(tmp_path):
    from conftest import logist_cli

    jobs = logist.open(tmp_path / "jobs", base_url="http://127.0.0.1:9/v1")
    older = _older_format_job(tmp_path / "jobs", "older")
    current = jobs.create("current", objective="Write current")
    for job in (older, current):
        before = _files(job.dir)
        preview = jobs[job.id].preview()
        assert preview.role == "Worker" and preview.body["messages"]
        assert job.status in ("RUNNING", "PENDING") and job.manifest().last_sequence >= 1
        assert len(job.history()) == len(list(job.entries())) == job.manifest().last_sequence
        env = {"LOGIST_JOBS_DIR": str(jobs.path), "LOGIST_BASE_URL": "http://127.0.0.1:9/v1"}
        for command in (("job", "status", job.id), ("job", "preview", job.id), ("job", "show", job.id),
                        ("job", "history", job.id)):
            done = logist_cli(*command, env=env)
            assert done.returncode == 0, done.stderr
        assert _files(job.dir) == before, f"reading job '{job.id}' changed a file (bytes or mtime)"
    assert "logist job upgrade older" in older.preview().older_format and older.preview().upgraded is None
    assert current.preview().older_format is None
    shown = logist_cli("job", "preview", "older", env={"LOGIST_JOBS_DIR": str(jobs.path)})
    assert "is in format 3, read as it is; logist job upgrade older" in shown.stderr
    assert "upgraded the history from format 3" in older.upgrade(), "upgrade() is what rewrites it"
