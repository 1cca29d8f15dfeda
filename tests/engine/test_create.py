"""Creating a job: one JobSpec behind create_job, ``logist job create`` and a
fixture's job.json."""

from __future__ import annotations

import json
import subprocess

import click
import pytest

from logist.engine.create import create_job
from logist.cli import cli
from logist.cli.job.create import STYLE
from logist.engine.create import SETTINGS, JobSpec
from logist.errors import ConfigError
from logist.replay.fixtures import create_from_fixture, fixture_json, job_spec, load_fixture, record_fixture
from logist.store.config import JobDefaults
from logist.store.jobsdir import JobsDir

from conftest import REPO_ROOT, logist_cli, write_config

VOLATILE = {"created_at", "updated_at"}


def manifest_of(job) -> dict:
    return {k: v for k, v in json.loads(job.manifest_path.read_text()).items() if k not in VOLATILE}


def create_command() -> click.Command:
    """``job create`` as ``logist`` loads it (the group adds ``--jobs-dir`` then)."""
    ctx = click.Context(cli)
    return cli.get_command(ctx, "job").get_command(ctx, "create")


def spec_options() -> dict[str, click.Option]:
    """``job create``'s options by the JobSpec field they set."""
    return {option.name: option for option in create_command().spec_options()}


# The CLI is made from the model --------------------------------------------------------------------


def test_every_field_is_exactly_one_option_and_every_option_a_field():
    options = spec_options()
    assert list(options) == list(JobSpec.model_fields), "one option per field, in the model's order"
    # The command's own parameters are JOB, --json and --jobs-dir (which every
    # command takes after its name); everything else is the model's.
    assert [param.name for param in create_command().params] == ["job_id", "as_json", "jobs_dir"]
    flags = [flag for option in options.values() for flag in option.opts + option.secondary_opts]
    assert len(flags) == len(set(flags)), "no flag is used twice"
    for name, option in options.items():
        assert option.help == JobSpec.model_fields[name].description, name
        assert option.help, f"{name} has no description"
    assert set(STYLE) <= set(JobSpec.model_fields), "STYLE names only fields"


def test_set_and_resubmit_take_the_budget_options_of_create():
    from logist.cli.job.decide import resubmit, set_budgets
    from logist.engine.budget import SETTABLE

    made = spec_options()
    for command in (set_budgets, resubmit):
        options = {option.name: option for option in command.spec_options()}
        assert list(options) == list(SETTABLE)
        for name, option in options.items():
            assert option.opts == made[name].opts == [SETTABLE[name]]
            assert (option.help, option.type.to_info_dict()) == (made[name].help, made[name].type.to_info_dict())


def test_option_types_and_limits_come_from_the_fields():
    options = spec_options()
    assert list(options["workflow"].type.choices) == ["default", "planned", "solo"]
    assert list(options["command_policy"].type.choices) == ["deny", "ask", "allow"]
    assert options["acceptance"].multiple and options["params"].multiple and options["allowed_commands"].multiple
    assert options["make_current"].is_flag and options["make_current"].secondary_opts == ["--no-current"]
    # Settings' limits are JobDefaults' own, in the model and on the command line.
    for name in SETTINGS:
        limits = {type(rule).__name__: rule for rule in JobDefaults.model_fields[name].metadata}
        assert JobSpec.model_fields[name].metadata == JobDefaults.model_fields[name].metadata, name
        kind = options[name].type
        if "Ge" in limits:
            assert kind.min == limits["Ge"].ge and not kind.min_open, name
        if "Gt" in limits:
            assert kind.min == limits["Gt"].gt and kind.min_open, name


def test_every_setting_and_its_help_are_written_once_in_job_defaults():
    """JobSpec declares no setting of its own: one field per JobDefaults
    field, its help JobDefaults' description (job create --help shows it)."""
    options = spec_options()
    assert SETTINGS == tuple(JobDefaults.model_fields)
    for name, field in JobDefaults.model_fields.items():
        assert field.description, f"JobDefaults.{name} has no help"
        assert JobSpec.model_fields[name].description.startswith(field.description), name
        assert options[name].help == JobSpec.model_fields[name].description
    assert "Default 120, or config.json's defaults." in options["command_timeout"].help
    assert "implies the allow command policy" in options["allowed_commands"].help


@pytest.mark.parametrize(
    "args, needle",
    [(["--max-steps", "0"], "--max-steps"), (["--command-timeout", "0"], "--command-timeout"),
     (["--param", "novalue"], "NAME=VALUE"), (["--workflow", "chaotic"], "--workflow")],
    ids=["max-steps", "command-timeout", "param", "workflow"],
)
def test_bad_options_are_usage_errors(jobs, args, needle):
    result = logist_cli("job", "create", "bad", "-o", "x", *args)
    assert result.returncode == 2, result.stderr
    assert needle in result.stderr and "Traceback" not in result.stderr
    assert "bad" not in jobs.read_index().jobs


def test_the_cli_and_the_library_make_the_same_job(tmp_path):
    (tmp_path / "brief.txt").write_text("the brief\n")
    args = [
        "-o", "Plan the work", "-d", "Some details", "-a", "one", "-a", "two", "--file", "brief.txt",
        "--model", "m-1", "--workflow", "planned", "--role", "Worker", "--planner", "Planner",
        "--max-steps", "7", "--format-retries", "2", "--allow", "ls *", "--command-timeout", "9.5",
        "--max-cost", "1.5", "--max-tokens", "1000", "--max-wall-seconds", "60", "--max-retries-in-a-row", "4",
        "--no-current",
    ]
    result = logist_cli("--jobs-dir", str(tmp_path / "cli"), "job", "create", "same", *args)
    assert result.returncode == 0, result.stderr
    spec = JobSpec(
        objective="Plan the work", details="Some details", acceptance=["one", "two"], files=["brief.txt"],
        model="m-1", workflow="planned", extra_roles=["Worker"], planner="Planner", max_steps=7,
        format_retries=2, allowed_commands=["ls *"], command_timeout=9.5, max_cost_usd=1.5, max_tokens=1000,
        max_wall_seconds=60, max_retries_in_a_row=4, make_current=False,
    )
    library = create_job(JobsDir(tmp_path / "lib"), "same", spec)
    from_cli = JobsDir(tmp_path / "cli").job("same")
    assert manifest_of(from_cli) == manifest_of(library)
    manifest = library.manifest()
    assert manifest.settings.command_policy == "allow", "allowed commands imply allow"
    assert manifest.settings.max_steps == 7 and manifest.files == ["brief.txt"]
    for jobs in (JobsDir(tmp_path / "cli"), JobsDir(tmp_path / "lib")):
        assert jobs.read_index().current_job_id is None, "--no-current"
        assert jobs.read_index().queue == ["same"]


# create_job's arguments ------------------------------------------------------------------------------


def test_a_spec_keywords_or_both(jobs):
    by_spec = create_job(jobs, "by-spec", JobSpec(objective="Do it", max_steps=3))
    by_keywords = create_job(jobs, "by-keywords", "Do it", max_steps=3)
    by_objective_keyword = create_job(jobs, "by-objective", objective="Do it", max_steps=3)
    both = create_job(jobs, "both", JobSpec(objective="Do it", max_steps=9, details="kept"), max_steps=3)
    for job in (by_spec, by_keywords, by_objective_keyword, both):
        manifest = job.manifest()
        assert (manifest.objective, manifest.settings.max_steps) == ("Do it", 3), job.id
    assert both.manifest().details == "kept"
    assert jobs.read_index().current_job_id == "both"


def test_unset_settings_come_from_config_json(jobs):
    write_config(jobs, defaults={"max_steps": 42, "command_timeout": 5})
    manifest = create_job(jobs, "cfg", "Do it", command_timeout=6).manifest()
    assert (manifest.settings.max_steps, manifest.settings.command_timeout) == (42, 6)


@pytest.mark.parametrize(
    "options, needle",
    [({"max_steps": 0}, "max_steps: Input should be greater than or equal to 1"),
     ({"no_such_option": 1}, "no_such_option: Extra inputs are not permitted"),
     ({"acceptance": "not a list"}, "acceptance: Input should be a valid list")],
    ids=["limit", "unknown", "type"],
)
def test_a_bad_field_is_named(jobs, options, needle):
    with pytest.raises(ConfigError, match=needle):
        create_job(jobs, "bad", "Do it", **options)
    assert not (jobs.path / "bad").exists() and "bad" not in jobs.read_index().jobs


def test_a_skill_fills_the_objective_and_max_steps(jobs):
    manifest = create_job(jobs, "docs", skill="write-docs", params={"module": "calc.py"}).manifest()
    assert manifest.objective == "Write or update the documentation of one module from its code."
    assert manifest.settings.max_steps == 30
    assert manifest.skill.params == {"module": "calc.py", "output": "docs/calc.py.md"}


# job.json is a JobSpec -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["wordcount", "calc"])
def test_the_committed_job_json_reads_and_writes_back_through_the_model(name):
    path = REPO_ROOT / "fixtures" / name / "job.json"
    fixture = load_fixture(path.parent)
    assert isinstance(fixture.job_spec, JobSpec)
    dumped = {"$schema": "fixture-job.schema.json", "job_id": fixture.spec["job_id"],
              **fixture.job_spec.model_dump(mode="json", exclude_defaults=True)}
    assert json.dumps(dumped, indent=2, ensure_ascii=False) + "\n" == path.read_text(encoding="utf-8")


def test_a_job_round_trips_through_job_json(jobs, tmp_path):
    given = tmp_path / "notes.txt"
    given.write_text("notes\n")
    tester = {"name": "Tester", "description": "Tests.", "instructions": "Test it.", "llm_model": "m"}
    for where in (jobs, JobsDir(tmp_path / "elsewhere")):
        where.init()
        (where.path / "roles" / "tester.json").write_text(json.dumps(tester))
    original = create_job(
        jobs, "round", "Plan it", details="d", acceptance=["a"], files=[str(given)], workflow="planned",
        extra_roles=["Tester"], max_steps=12, allowed_commands=["ls"], command_policy="ask", max_tokens=500,
    )
    spec = job_spec(original)
    assert spec.model_dump(exclude_defaults=True) == {
        "objective": "Plan it", "details": "d", "acceptance": ["a"], "files": ["notes.txt"], "workflow": "planned",
        "extra_roles": ["Tester"], "max_steps": 12, "command_policy": "ask", "allowed_commands": ["ls"],
        "max_tokens": 500,
    }, "settings differing from the built-in ones, and the policy that allowed commands alone would change"
    record_fixture(original, tmp_path / "fixture")
    written = json.loads((tmp_path / "fixture" / "job.json").read_text())
    assert written == fixture_json(original) and written["job_id"] == "round"
    elsewhere = JobsDir(tmp_path / "elsewhere")
    write_config(elsewhere, defaults={"max_steps": 99, "command_timeout": 1})
    again = create_from_fixture(elsewhere, tmp_path / "fixture")
    assert manifest_of(again) == manifest_of(original), "config.json of another jobs dir does not leak in"


def test_a_bad_job_json_names_the_field(tmp_path):
    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "job.json").write_text(json.dumps({"job_id": "x", "objective": "o", "max_steps": "many"}))
    with pytest.raises(ConfigError, match=r"job.json: max_steps: Input should be a valid integer"):
        load_fixture(folder)
    (folder / "job.json").write_text(json.dumps({"job_id": "x", "details": "no objective"}))
    with pytest.raises(ConfigError, match="needs an objective"):
        load_fixture(folder)
