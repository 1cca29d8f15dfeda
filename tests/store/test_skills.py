"""SKILL.md skills (logist.store.skills) and jobs made from them."""

from __future__ import annotations

import pytest

from logist.engine.create import create_job
from logist.errors import ConfigError, NotFoundError
from logist.store.skills import list_skills, load_skill


def write_skill(jobs, name, text):
    folder = jobs.path / "skills" / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(text)


GREET = """---
name: greet
description: Write a greeting for {{who}}.
params:
  - name: who
    description: Who to greet
    required: true
  - name: lang
    default: English
max_steps: 7
---
Write greeting.txt greeting {{who}} in {{lang}}.
"""


def test_builtin_skills_parse():
    names = {s.name for s in list_skills()}
    assert {"fix-tests", "review-change", "write-docs"} <= names
    docs = load_skill("write-docs")
    assert docs.resolve_params({"module": "calc"}) == {"module": "calc", "output": "docs/calc.md"}


def test_job_from_skill_has_params_and_max_steps(jobs):
    write_skill(jobs, "greet", GREET)
    job = create_job(jobs, "g", skill="greet", params={"who": "Ada"})
    m = job.manifest()
    assert m.objective == "Write a greeting for Ada."
    assert m.skill.instructions == "Write greeting.txt greeting Ada in English."
    assert m.skill.params == {"who": "Ada", "lang": "English"}
    assert m.settings.max_steps == 7


def test_jobs_dir_skill_overrides_builtin(jobs):
    write_skill(jobs, "fix-tests", "---\nname: fix-tests\ndescription: Mine.\n---\nMy own way.\n")
    assert load_skill("fix-tests", jobs.path).description == "Mine."


@pytest.mark.parametrize(
    "text, message",
    [
        ("no frontmatter here\n", "no YAML frontmatter"),
        ("---\nname: [unclosed\n---\nbody\n", "frontmatter is not valid YAML"),
        ("---\nname: greet\n---\nbody\n", "description: Field required"),
        ("---\nname: greet\ndescription: d\nparams:\n  - descr: x\n---\nbody\n", "params.0.name: Field required"),
        ("---\nname: greet\ndescription: d\n---\n\n", "the body (the skill's instructions) is empty"),
        ("---\nname: other\ndescription: d\n---\nbody\n", "differs from its folder"),
    ],
)
def test_broken_skill_is_a_clear_error(jobs, text, message):
    write_skill(jobs, "greet", text)
    with pytest.raises(ConfigError, match="skills/greet/SKILL.md") as err:
        load_skill("greet", jobs.path)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_param_errors(jobs):
    write_skill(jobs, "greet", GREET)
    with pytest.raises(ConfigError, match=r"skill 'greet' needs --param who=\.\.\."):
        create_job(jobs, "g1", skill="greet")
    with pytest.raises(ConfigError, match=r"skill 'greet' has no param 'colour' \(its params: who, lang\)"):
        create_job(jobs, "g2", skill="greet", params={"who": "x", "colour": "red"})
    with pytest.raises(NotFoundError, match="no skill named 'nope'"):
        create_job(jobs, "g3", skill="nope")
    assert not (jobs.path / "g1").exists() and not (jobs.path / "g2").exists()
