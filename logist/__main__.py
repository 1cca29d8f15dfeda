"""``python -m logist`` and the ``logist`` program.

Everything, ``--help`` and ``--version`` included, is click's
(:func:`logist.cli.main`), run with the secrets out of the process's
environment (:func:`logist.secrets.process.secrets_withdrawn`).
"""

from __future__ import annotations

from .cli import main as cli_main
from .secrets.process import secrets_withdrawn


def main(argv: list[str] | None = None) -> None:
    # First, before any thread or process of Logist's starts: the secrets leave its
    # environment, for as long as the command runs.
    with secrets_withdrawn():
        cli_main(argv)


if __name__ == "__main__":
    main()
