"""``python -m logist`` and the ``logist`` program.

``logist --version`` is answered here, before click (most of the start-up
of any other command) is imported; the text is the one click's version
option prints (tests/cli/test_app.py compares them). Everything else goes to
:func:`logist.cli.main`.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> None:
    if (sys.argv[1:] if argv is None else argv) == ["--version"]:
        from . import __version__

        sys.stdout.write(f"logist, version {__version__}\n")
        sys.exit(0)
    from .cli import main as cli_main

    cli_main(argv)


if __name__ == "__main__":
    main()
