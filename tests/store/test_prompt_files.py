"""Prompt templates: the built-in files, their placeholders, overrides and where each comes from."""

from __future__ import annotations

import json

import pytest

from logist.errors import ConfigError
from logist.store.prompts import BUILTIN_DIR, ROLE_PREFIX, SUFFIX, TEMPLATES, Prompts, placeholders, render_text
from logist.store.roles import builtin_roles, load_roles


def builtin_names() -> set[str]:
    return {p.relative_to(BUILTIN_DIR).with_suffix("").as_posix() for p in BUILTIN_DIR.rglob("*" + SUFFIX)}


def test_every_template_has_a_builtin_file_and_every_file_is_a_template():
    roles = {ROLE_PREFIX + name for name in builtin_roles()}
    assert builtin_names() == set(TEMPLATES) | roles


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_each_builtin_uses_exactly_its_placeholders(name):
    text = Prompts(None).resolve(name).text
    assert set(placeholders(text)) == set(TEMPLATES[name].placeholders)


def test_the_builtin_roles_take_their_instructions_from_the_templates():
    prompts = Prompts(None, builtin_roles())
    for name, role in builtin_roles().items():
        # Seed 003's four attributes, the instructions named as the template the package ships.
        assert role.description and role.llm_model and role.instructions is None
        assert role.prompt_file == f"roles/{name}.md"
        resolved = prompts.resolve(ROLE_PREFIX + name)
        assert resolved.origin == "built-in" and resolved.path == BUILTIN_DIR / "roles" / f"{name}.md"
        assert prompts.instructions(role).startswith(f"You are the {name}")


def test_each_caller_of_the_builtin_roles_gets_its_own_roles():
    # The package's roles are read once a process; a caller that changes its roles changes no one else's.
    first = builtin_roles()
    first["Worker"].instructions = "changed by one caller"
    first["Worker"].aliases.append("changed")
    del first["Supervisor"]
    again = builtin_roles()
    assert again["Worker"].instructions != "changed by one caller"
    assert "changed" not in again["Worker"].aliases
    assert "Supervisor" in again
    assert again["Worker"].source == first["Worker"].source  # where it was read from, kept with the copy


def test_render_leaves_out_a_paragraph_or_line_whose_placeholders_have_no_value():
    text = "# Job\n{objective}\n\n## Details\n{details}\n\nDone: {a}\nEvidence: {b}\n\nEnd."
    assert render_text(text, {"objective": "O", "a": "x"}) == "# Job\nO\n\nDone: x\n\nEnd."
    # An empty value is a value: the line stays (an empty file is shown empty).
    assert render_text("### {path}\n```\n{content}\n```", {"path": "f", "content": ""}) == "### f\n```\n\n```"


def test_render_keeps_json_braces_and_writes_a_doubled_placeholder_literally():
    text = 'Answer {"action": "CMD"} or {{name}}; {name} here.'
    assert placeholders(text) == ["name"]
    assert render_text(text, {"name": "N"}) == 'Answer {"action": "CMD"} or {name}; N here.'


def test_a_value_is_not_read_as_a_template():
    assert render_text("{a}\n\n{b}", {"a": "{b}\n\n", "b": "x"}) == "{b}\n\n\n\nx"


def test_a_jobs_directory_file_overrides_the_builtin(jobs):
    override = jobs.path / "prompts" / "compaction" / "system.md"
    override.parent.mkdir(parents=True)
    override.write_text("Summarise tersely.\r\n\n")
    resolved = Prompts(jobs.path).resolve("compaction/system")
    assert (resolved.text, resolved.origin, resolved.path) == ("Summarise tersely.", "jobs directory", override)
    override.unlink()
    assert Prompts(jobs.path).resolve("compaction/system").origin == "built-in"


def test_an_unknown_placeholder_is_one_error_naming_the_file(jobs):
    override = jobs.path / "prompts" / "messages" / "answered.md"
    override.parent.mkdir(parents=True)
    override.write_text("The person said: {answer} ({who})\n")
    with pytest.raises(ConfigError) as error:
        Prompts(jobs.path).render("messages/answered", answer="yes")
    message = str(error.value)
    assert str(override) in message and "{who}" in message and "{answer}" in message
    assert "\n" not in message


def test_a_role_manifest_prompt_file_comes_before_the_jobs_directory(jobs):
    (jobs.path / "prompts" / "roles").mkdir(parents=True)
    (jobs.path / "prompts" / "roles" / "Tester.md").write_text("From the prompts folder.\n")
    (jobs.path / "roles" / "tester.md").write_text("You are the {role}: test everything.\n")
    manifest = {"name": "Tester", "description": "tests", "llm_model": "m", "prompt_file_path": "tester.md"}
    (jobs.path / "roles" / "tester.json").write_text(json.dumps(manifest))
    roles = load_roles(jobs.path)
    assert roles["Tester"].prompt_file == "tester.md", "seed 004's prompt_file_path is accepted"
    prompts = Prompts(jobs.path, roles)
    assert prompts.instructions(roles["Tester"]) == "You are the Tester: test everything."
    assert prompts.resolve("roles/Tester").origin == "prompt_file"

    del manifest["prompt_file_path"]
    (jobs.path / "roles" / "tester.json").write_text(json.dumps(manifest))
    roles = load_roles(jobs.path)
    assert Prompts(jobs.path, roles).instructions(roles["Tester"]) == "From the prompts folder."


def test_a_role_without_instructions_anywhere_is_refused_when_loaded(jobs):
    (jobs.path / "roles" / "bare.json").write_text(json.dumps({"name": "Bare", "description": "d", "llm_model": "m"}))
    roles = load_roles(jobs.path)
    assert roles.errors() == [
        f"role manifest {jobs.path / 'roles' / 'bare.json'}: role 'Bare' has no instructions: give its manifest "
        f"'instructions' or 'prompt_file', or write {jobs.path / 'prompts'}/roles/Bare.md"]
    with pytest.raises(ConfigError, match="role 'Bare' has no instructions"):
        roles["Bare"]
    # Any of the places instructions come from makes it a role.
    (jobs.path / "prompts" / "roles").mkdir(parents=True)
    (jobs.path / "prompts" / "roles" / "Bare.yaml").write_text("instructions: Be bare.\n")
    roles = load_roles(jobs.path)
    assert roles.errors() == [] and Prompts(jobs.path, roles).instructions(roles["Bare"]) == "Be bare."


def test_a_manifest_with_instructions_and_prompt_file_is_refused(jobs):
    manifest = {"name": "Two", "description": "d", "llm_model": "m", "instructions": "x", "prompt_file": "x.md"}
    (jobs.path / "roles" / "two.json").write_text(json.dumps(manifest))
    roles = load_roles(jobs.path)  # the other roles still load; this one is named with its error
    assert "Two" in roles and "two.json" in roles.errors()[0] and "not both" in roles.errors()[0]
    with pytest.raises(ConfigError, match="give instructions or prompt_file, not both"):
        roles["Two"]


def test_files_no_template_reads_are_reported(jobs):
    (jobs.path / "prompts").mkdir()
    (jobs.path / "prompts" / "compation.md").write_text("typo\n")
    (jobs.path / "prompts" / "job.txt").write_text("wrong suffix\n")
    (jobs.path / "prompts" / "job.md").write_text("{objective}\n")
    unused = Prompts(jobs.path, load_roles(jobs.path)).unused_files()
    assert [p.name for p in unused] == ["compation.md", "job.txt"]
