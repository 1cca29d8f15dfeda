"""Logist's distribution: the name it is installed by (``logist-jobs``: ``logist``
on PyPI is another project), its one version, and its extras.

Acceptance 1 of issue 32, second half: ``pip install 'logist-jobs[ray]'``
resolves to this project in a local package index built from its wheel.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
import zipfile
from email.parser import Parser
from importlib.metadata import version
from pathlib import Path

from packaging.requirements import Requirement

import logist
from logist.errors import DISTRIBUTION, install_hint

from conftest import REPO_ROOT

PYPROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
#: An install line naming the old distribution: ``logist[ray]``, ``pip install logist``.
_OLD_NAME = re.compile(r"(?<![\w./-])logist\[|pip install (-\S+ )*'?logist(?![\w.-])")


def _needed_by_the_ray_extra_alone(requires_dist: list[str]) -> list[str]:
    """The requirements that the ``ray`` extra adds to a plain install."""
    needed = []
    for line in requires_dist:
        requirement = Requirement(line)
        marker = requirement.marker
        if marker is not None and marker.evaluate({"extra": "ray"}) and not marker.evaluate({"extra": ""}):
            needed.append(f"{requirement.name}{requirement.specifier}")
    return needed


def _tracked_text_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=REPO_ROOT,
                            capture_output=True, text=True, check=True).stdout.splitlines()
    return [REPO_ROOT / name for name in listed
            if name.endswith((".md", ".py", ".toml", ".yml", ".yaml", ".txt")) or name == ".ci/run"]


def test_the_distribution_is_logist_jobs_and_the_command_logist():
    assert PYPROJECT["project"]["name"] == DISTRIBUTION == "logist-jobs"
    assert PYPROJECT["project"]["scripts"] == {"logist": "logist.__main__:main"}
    assert install_hint("ray") == "pip install 'logist-jobs[ray]'"


def test_the_version_has_one_source():
    # hatchling reads it from logist/__init__.py; the installed metadata, by the distribution's name, agrees.
    assert PYPROJECT["project"]["dynamic"] == ["version"]
    assert PYPROJECT["tool"]["hatch"]["version"] == {"path": "logist/__init__.py"}
    assert logist.__version__ == "0.2.0"
    assert version(DISTRIBUTION) == logist.__version__


def test_no_install_line_names_the_old_distribution():
    found = []
    for path in _tracked_text_files():
        if path == Path(__file__).resolve() or not path.exists():
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if _OLD_NAME.search(line):
                found.append(f"{path.relative_to(REPO_ROOT)}:{number}: {line.strip()}")
    assert not found, "install lines naming 'logist', another project on PyPI (say 'logist-jobs'):\n" + "\n".join(found)


def test_the_old_name_pattern_finds_what_it_should():
    for line in ("pip install 'logist[ray]'", "pip install logist", "pip install -U logist", "``logist[ray]``"):
        assert _OLD_NAME.search(line), line
    for line in ("pip install 'logist-jobs[ray]'", "pip install logist-jobs", "pip install -e '.[serve]'",
                 "python -m logist", "pip install -q ."):
        assert not _OLD_NAME.search(line), line


def test_pip_resolves_logist_jobs_ray_to_this_project_in_a_local_index(tmp_path):
    wheels = tmp_path / "wheels"
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(REPO_ROOT)],
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    (wheel,) = wheels.glob("*.whl")
    assert wheel.name == f"logist_jobs-{logist.__version__}-py3-none-any.whl"

    # The wheel's own metadata: its name, version, and the ray extra's requirement.
    with zipfile.ZipFile(wheel) as archive:
        metadata = Parser().parsestr(archive.read(f"logist_jobs-{logist.__version__}.dist-info/METADATA").decode())
        entry_points = archive.read(f"logist_jobs-{logist.__version__}.dist-info/entry_points.txt").decode()
    assert (metadata["Name"], metadata["Version"]) == ("logist-jobs", logist.__version__)
    assert {"ray", "serve", "live"} <= set(metadata.get_all("Provides-Extra"))
    assert _needed_by_the_ray_extra_alone(metadata.get_all("Requires-Dist")) == ["ray>=2.9"]
    assert "logist = logist.__main__:main" in entry_points

    # A PEP 503 simple index holding only this wheel, and pip told to use nothing else.
    project = tmp_path / "simple" / "logist-jobs"
    project.mkdir(parents=True)
    (project / wheel.name).write_bytes(wheel.read_bytes())
    (project / "index.html").write_text(f'<!DOCTYPE html><html><body><a href="{wheel.name}">{wheel.name}</a></body></html>\n')
    env = {name: value for name, value in os.environ.items() if not name.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1")
    resolved = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--no-deps", "--quiet",
         "--index-url", (tmp_path / "simple").as_uri(), "--report", "-", "logist-jobs[ray]"],
        capture_output=True, text=True, env=env, timeout=300)
    assert resolved.returncode == 0, resolved.stderr
    (item,) = json.loads(resolved.stdout)["install"]
    assert item["download_info"]["url"] == (project / wheel.name).as_uri()
    assert (item["metadata"]["name"], item["metadata"]["version"]) == ("logist-jobs", logist.__version__)
    assert item["requested_extras"] == ["ray"]
    assert _needed_by_the_ray_extra_alone(item["metadata"]["requires_dist"]) == ["ray>=2.9"]


def test_the_changelog_is_in_keep_a_changelog_form_and_names_this_version_last():
    text = (REPO_ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert "https://keepachangelog.com/en/1.1.0/" in text
    releases = re.findall(r"^## \[([^\]]+)\](.*)$", text, re.M)
    assert releases[0] == ("Unreleased", "")
    assert releases[1] == (logist.__version__, " - 2026-11-26"), "the newest release is the version logist/__init__.py says"
    for name, date in releases[1:]:
        assert re.fullmatch(r"\d+\.\d+\.\d+", name) and re.fullmatch(r" - \d{4}-\d\d-\d\d", date), (name, date)
    kinds = set(re.findall(r"^### (.+)$", text, re.M))
    assert kinds <= {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}, kinds
