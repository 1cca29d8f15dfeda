"""The documentation holds: the README's relative links resolve in a clone,
its generated tables are the code's, and the examples in the README and in
the package docstring run as they are written."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import logist
from logist.cli.app import exit_codes_markdown

from conftest import REPO_ROOT

README = REPO_ROOT / "README.md"
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _relative_links(path: Path) -> list[str]:
    links = _LINK.findall(path.read_text(encoding="utf-8"))
    return [link for link in links if not re.match(r"^[a-z]+:|^#", link)]


def test_readme_relative_links_resolve_in_the_repository():
    links = _relative_links(README)
    assert "docs/SPEC.md" in links, "the README links to the spec kept in the repository"
    for link in links:
        target = (README.parent / link.split("#")[0]).resolve()
        assert target.exists(), f"README.md links to {link}, which is not in the repository"
        assert target.is_relative_to(REPO_ROOT), f"README.md links outside the repository: {link}"


def test_the_spec_links_resolve_too():
    spec = REPO_ROOT / "docs" / "SPEC.md"
    assert spec.read_text(encoding="utf-8").startswith("# Logist")
    for link in _relative_links(spec):
        assert (spec.parent / link.split("#")[0]).exists(), f"docs/SPEC.md links to {link}"


def _between(text: str, start: str, end: str) -> str:
    return text.split(start + "\n", 1)[1].split(end, 1)[0]


def test_readme_exit_code_table_is_the_one_in_the_code():
    table = _between(README.read_text(encoding="utf-8"), "<!-- generated from EXIT_CODES in logist/cli/app.py -->",
                     "<!-- end of exit codes -->")
    assert table == exit_codes_markdown()


def test_readme_testing_example_runs_with_the_installed_fixtures(tmp_path):
    text = README.read_text(encoding="utf-8")
    code = _between(text, "<!-- tested by tests/test_docs.py -->", "## ").split("```python\n", 1)[1].split("```", 1)[0]
    example = tmp_path / "example" / "test_my_roles.py"
    example.parent.mkdir()
    example.write_text(code, encoding="utf-8")
    # The plugin as a user's pytest loads it, and nothing of this suite's conftest.
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "logist.replay.pytest_plugin", "-p", "no:cacheprovider",
         "--rootdir", str(example.parent), str(example)],
        cwd=example.parent, capture_output=True, text=True, env=env, timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 passed" in result.stdout


def test_package_docstring_example_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code = textwrap.dedent(logist.__doc__.split("::\n", 1)[1].split("\n\n\n", 1)[0].split("\ndocs/", 1)[0])
    assert "jobs.create(" in code and "job.run()" in code
    printed: list[str] = []
    exec(compile(code, "logist.__doc__", "exec"), {"print": lambda *args: printed.append(" ".join(map(str, args)))})
    assert printed == ["APPROVAL_REQUIRED"]
    job = logist.open(tmp_path / "jobs")["hello"]
    assert job.status == logist.Status.SUCCESS
    assert (job.workspace / "hello.py").read_text() == "print('Hello')\n"
