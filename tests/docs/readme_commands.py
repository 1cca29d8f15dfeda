"""The README's two commands for a fresh machine, read from its first code
block: the one that installs Logist and runs the demo, and the one that
installs the test dependencies and runs the whole suite.

``.ci/run`` runs them as typed on its fresh clone (``python3
tests/docs/readme_commands.py 1`` prints the first, ``2`` the second), so
the README's commands are what CI proves; tests/docs/test_fresh_machine.py
checks their shape and that CI runs them. Standard library only: CI reads
them before anything is installed.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_first_commands(readme: Path = README) -> list[str]:
    """The command lines of the README's first code block, with a ``$ ``
    prompt taken off if the block shows one."""
    text = readme.read_text(encoding="utf-8")
    block = re.search(r"^```[a-z]*\n(.*?)^```", text, re.S | re.M)
    if block is None:
        raise ValueError(f"{readme} has no code block")
    lines = [line.removeprefix("$ ").strip() for line in block.group(1).splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def install_part(command: str) -> str:
    """``command`` up to and including its last ``pip install`` (what it runs
    after that, the test suite, left out)."""
    steps = command.split(" && ")
    last = max(n for n, step in enumerate(steps) if " pip install " in f" {step} " or "/pip install " in step)
    return " && ".join(steps[: last + 1])


if __name__ == "__main__":
    if sys.argv[1:] not in (["1"], ["2"]):
        sys.exit("usage: readme_commands.py 1|2 (the README's first or second command)")
    print(readme_first_commands()[int(sys.argv[1]) - 1])
