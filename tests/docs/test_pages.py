"""The documentation's generated parts are the code's (``python -m
logist.docs_pages --check``), made the same way on any machine, and the
site's pages are the ones its navigation lists; README.md stays short."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from logist import docs_pages
from logist.cli.app import EXIT_CODES

from conftest import REPO_ROOT

DOCS = REPO_ROOT / "docs"


def check(*args: str, cwd: Path = REPO_ROOT, env: dict | None = None) -> subprocess.CompletedProcess:
    """``python -m logist.docs_pages --check ARGS`` as typed, in a child process."""
    return subprocess.run([sys.executable, "-m", "logist.docs_pages", "--check", *args], cwd=cwd,
                          capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=120)


def check_here(capsys, *args: str) -> tuple[int, str]:
    """The same check by the module's ``main()`` in this process (what
    :func:`check` runs): its exit status and what it wrote on stderr. The
    tests of what the check finds use it; the command as typed, and the
    pages made alike in another directory and environment, are checked
    in a child above and below."""
    capsys.readouterr()
    status = docs_pages.main(["--check", *args])
    return status, capsys.readouterr().err


def test_every_generated_page_is_current():
    result = check()
    # Refresh: python -m logist.docs_pages (and commit the pages it names).
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""


def test_a_stale_page_fails_the_check_and_is_named(tmp_path, capsys):
    for page in docs_pages.PAGES:
        (tmp_path / page).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO_ROOT / page, tmp_path / page)
    assert check_here(capsys, "--root", str(tmp_path)) == (0, "")
    page = tmp_path / "docs" / "exit-codes.md"
    fresh = page.read_text(encoding="utf-8")
    meaning = EXIT_CODES[1][1]
    page.write_text(fresh.replace(meaning, meaning + " (an old text)"), encoding="utf-8")
    assert check_here(capsys, "--root", str(tmp_path)) == (
        1, "stale: docs/exit-codes.md (run python -m logist.docs_pages)\n")
    # Rewriting puts the generated part back and leaves the prose around it as it was.
    assert docs_pages.write_pages(tmp_path) == ["docs/exit-codes.md"]
    assert page.read_text(encoding="utf-8") == fresh


def test_a_page_that_lost_its_markers_is_stale(tmp_path, capsys):
    for page in docs_pages.PAGES:
        (tmp_path / page).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO_ROOT / page, tmp_path / page)
    (tmp_path / "docs" / "cli.md").write_text("# Command line\n", encoding="utf-8")
    assert check_here(capsys, "--root", str(tmp_path)) == (
        1, "stale: docs/cli.md (run python -m logist.docs_pages)\n"
           "missing: no page holds the generated part cli (put its markers back)\n")


def test_generation_depends_on_no_terminal_directory_or_environment(tmp_path):
    # Another width, another working directory, another home: the same pages.
    result = check(cwd=tmp_path, env={"COLUMNS": "20", "HOME": str(tmp_path), "TERM": "dumb", "LANG": "C"})
    assert result.returncode == 0, result.stderr
    for name, make in docs_pages.PARTS.items():
        text = make()
        assert text == make(), f"{name} differs from one run to the next"
        assert str(REPO_ROOT) not in text and str(Path.home()) not in text, f"{name} names a path of this machine"


def test_the_cli_reference_names_every_visible_command_and_option():
    page = (DOCS / "cli.md").read_text(encoding="utf-8")
    assert "## logist job create\n" in page and "`--max-steps`" in page and "## logist serve\n" in page
    assert "Sentinel" not in page and "--help" not in page.split("<!-- generated", 1)[1].replace("`--help`", "")


def test_readme_is_at_most_200_lines_and_starts_with_the_two_commands():
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200, "README.md is for a newcomer's five minutes: move detail into docs/"
    assert text.startswith(
        "# Logist\n\n```sh\n"
        "python3 -m venv .venv && .venv/bin/pip install -q . && .venv/bin/logist demo\n"
        "python3 -m venv .venv && .venv/bin/pip install -q -e '.[test]' && .venv/bin/python -m pytest\n```\n"
    )


def _nav_files(items) -> list[str]:
    found = []
    for item in items:
        for value in item.values():
            found += _nav_files(value) if isinstance(value, list) else [value]
    return found


def test_the_site_lists_every_page_and_only_pages_that_exist():
    config = yaml.safe_load((REPO_ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    assert config["docs_dir"] == "docs" and config["strict"] is True
    nav = _nav_files(config["nav"])
    pages = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md"))
    assert sorted(nav) == pages
    assert {"getting-started.md", "configuration.md", "cli.md", "exit-codes.md", "SPEC.md"} <= set(nav)
    # No plugin that fetches anything at build time: the search is Material's own, offline.
    assert [p if isinstance(p, str) else next(iter(p)) for p in config.get("plugins", [])] == ["search"]


_LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_relative_links_of_the_readme_and_the_docs_resolve():
    for page in [REPO_ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]:
        for link in _LINK.findall(page.read_text(encoding="utf-8")):
            if re.match(r"^[a-z]+:", link) or link.startswith("#"):
                continue
            target = (page.parent / link.split("#")[0]).resolve()
            assert target.exists(), f"{page.relative_to(REPO_ROOT)} links to {link}, which does not exist"
            if page.parent == DOCS:
                # The site holds docs/ only: a link out of it works on GitHub and breaks the site.
                assert target.is_relative_to(DOCS), f"{page.relative_to(REPO_ROOT)} links outside docs/: {link}"
