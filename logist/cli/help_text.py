"""The text of ``logist --help``, kept in ``logist/help.txt``.

``logist --help`` needs nothing but this text, and importing click alone
costs more than three times Python's own start-up; so the entry point
(:mod:`logist.__main__`) prints the file without importing click, as it
answers ``--version``. The file is click's own output at the width click
uses on any terminal of 80 columns or more (it wraps help at 78 there);
narrower terminals, and every other command's help, get click itself. It
is generated here from the command group, the one definition of the help,
and tests/cli/test_app.py fails when the committed file differs from it.

    python -m logist.cli.help_text            # rewrite logist/help.txt
    python -m logist.cli.help_text --check    # change nothing; exit 1 if it is stale
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Optional

import click

#: The file the entry point prints.
HELP_FILE = Path(__file__).resolve().parent.parent / "help.txt"
#: The narrowest terminal on which click prints that text: click wraps help
#: at min(columns, 80) - 2 characters.
COLUMNS = 80


def render() -> str:
    """``logist --help`` as click prints it on a terminal of 80 columns or more."""
    from . import cli

    settings = {**cli.context_settings, "terminal_width": COLUMNS - 2}  # as cli.make_context builds it
    with click.Context(cli, info_name="logist", **settings) as ctx:
        return ctx.get_help() + "\n"


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m logist.cli.help_text", description="Generate logist/help.txt.")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if the file is stale")
    args = parser.parse_args(argv)
    text = render()
    current = HELP_FILE.read_text(encoding="utf-8") if HELP_FILE.exists() else None
    if current == text:
        return 0
    if args.check:
        print(f"{HELP_FILE} is stale: python -m logist.cli.help_text rewrites it", file=sys.stderr)
        return 1
    HELP_FILE.write_text(text, encoding="utf-8")
    print(f"wrote {HELP_FILE}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
