"""The README's first two commands are the two for a fresh machine, and CI
runs them as typed.

``.ci/run`` starts from a fresh clone: it runs the README's first command
(a venv, ``pip install .``, ``logist demo``) exactly as the README types
it, then the second (the test extra installed editable, then this suite),
so a README that no longer installs fails CI. They are run there and not
here: installing Logist and its test dependencies (Ray among them) into a
new venv took 4.5 minutes of the suite's time, and CI's fresh clone is the
fresh machine the commands are for. The tour's commands, as the README
types them, are run here (tests/docs/test_examples.py) with the suite's own
installed ``logist`` first on PATH.
"""

from __future__ import annotations

import re

from conftest import REPO_ROOT
from readme_commands import install_part, readme_first_commands

CI_RUN = REPO_ROOT / ".ci" / "run"


def test_the_readme_first_commands_are_the_two_for_a_fresh_machine():
    first, second = readme_first_commands()[:2]
    assert first.startswith("python3 -m venv .venv && ") and first.endswith(" && .venv/bin/logist demo"), first
    assert install_part(second).startswith("python3 -m venv .venv && .venv/bin/pip install "), second
    assert not install_part(second).endswith("pytest"), second
    assert second.endswith(" && .venv/bin/python -m pytest"), "the second command runs the whole suite"


def test_ci_runs_the_readme_commands_as_typed_first_the_demo_then_the_suite():
    """Each command is run by ``bash -c`` on what readme_commands.py prints,
    not a copy of it, and the demo's before the suite's."""
    script = CI_RUN.read_text(encoding="utf-8")
    runs = [int(n) for n in re.findall(r'bash -c "\$\(python3 tests/docs/readme_commands\.py ([12])\)"', script)]
    assert runs == [1, 2], f".ci/run runs the README's commands {runs}, not [1, 2]"
    assert not re.search(r"pip install[^\n]*-e '\.\[test", script), \
        ".ci/run installs the test extra only through the README's own command"
