"""A syntax error in a role, skill or config file: one line naming the file
and the line, and only the jobs that use that file are affected."""

from __future__ import annotations

import json
import re

from logist.engine.create import create_job

from conftest import logist_cli, write_config

WORKER_SAYS = json.dumps({"action": "MESSAGE", "message": "working"})


def one_error(result, *needles: str) -> str:
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def test_a_broken_role_file_stops_only_the_jobs_that_use_it(jobs):
    reviewer = jobs.path / "roles" / "reviewer.yaml"
    reviewer.write_text("name: Reviewer\ndescription: Reviews\ninstructions: [unclosed\nllm_model: m\n")
    plain = create_job(jobs, "plain", "Write hello.py")

    line = one_error(logist_cli("job", "create", "reviewed", "-o", "Write hello.py", "--supervisor", "Reviewer",
                                "--workflow", "planned"), str(reviewer), "not valid YAML at line")
    assert re.search(r"at line \d+, column \d+: ", line)
    assert not (jobs.path / "reviewed").exists()

    # A job that does not use the file goes on, and the role list names the file.
    posted = logist_cli("job", "poststep", "plain", "--response-string", WORKER_SAYS)
    assert posted.returncode == 0, posted.stderr
    assert plain.manifest().calls == 1
    listing = logist_cli("role", "list")
    assert listing.returncode == 0 and "Worker" in listing.stdout and "Reviewer" not in listing.stdout
    assert listing.stderr.strip() == f"Not loaded: {line.removeprefix('Error: ')}"


def test_a_broken_role_file_never_hides_the_built_in_roles_and_is_reported_by_name(jobs):
    # Issue 29: seed 003's "Core Role Types" written by hand, with a comma missing.
    team = jobs.path / "roles" / "team.json"
    team.write_text('{\n  "Worker": {"name": "Worker", "description": "Works"\n "instructions": "i", "llm_model": "m"},'
                    '\n  "Supervisor": {"name": "Supervisor"}\n}')
    worker = jobs.path / "roles" / "worker.json"
    worker.write_text('{"name": "Worker",\n "description": "Works"\n "instructions": "i", "llm_model": "m"}')
    made = logist_cli("job", "create", "j", "-o", "Write hello.py")
    assert made.returncode == 0, made.stderr
    for path in (team, worker):
        assert f"Not loaded: role manifest {path}: not valid JSON at line" in made.stderr
    posted = logist_cli("job", "poststep", "j", "--response-string", WORKER_SAYS)
    assert posted.returncode == 0, posted.stderr
    listing = logist_cli("role", "list")
    assert listing.returncode == 0 and "Worker" in listing.stdout and "Supervisor" in listing.stdout
    assert [line.split(": not valid")[0] for line in listing.stderr.strip().splitlines()] == [
        f"Not loaded: role manifest {team}", f"Not loaded: role manifest {worker}"]


def test_a_broken_skill_stops_only_jobs_made_from_it(jobs):
    broken = jobs.path / "skills" / "broken" / "SKILL.md"
    broken.parent.mkdir()
    broken.write_text("---\nname: broken\ndescription: [unclosed\n---\nDo it.\n")
    line = one_error(logist_cli("job", "create", "b", "--skill", "broken"), str(broken), "not valid YAML at line")
    listing = logist_cli("skill", "list")
    assert listing.returncode == 0 and "fix-tests" in listing.stdout and "broken" not in listing.stdout
    assert listing.stderr.strip() == f"Not loaded: {line.removeprefix('Error: ')}"
    made = logist_cli("job", "create", "t", "--skill", "fix-tests")
    assert made.returncode == 0, made.stderr


def test_a_broken_config_json_is_one_line_and_looking_still_works(jobs):
    create_job(jobs, "j", "Write hello.py")
    write_config(jobs, max_retries=0)
    (jobs.path / "config.json").write_text('{\n  "max_retries": 0\n  "request_timeout": 5\n}\n')
    one_error(logist_cli("job", "create", "k", "-o", "x"), str(jobs.path / "config.json"),
              "not valid JSON at line 3, column 3: Expecting ',' delimiter")
    one_error(logist_cli("job", "preview", "j"), "config.json", "line 3")
    for argv in (["job", "status", "j"], ["job", "list"], ["job", "history", "j"]):
        assert logist_cli(*argv).returncode == 0, argv
