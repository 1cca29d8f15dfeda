"""``python -m logist`` and the ``logist`` program.

Everything, ``--help`` and ``--version`` included, is click's
(:func:`logist.cli.main`), once the secrets have left the process's
environment (:func:`logist.secrecy.withdraw_secrets`).
"""

from __future__ import annotations

from .cli import main as cli_main
from .secrecy import withdraw_secrets


def main(argv: list[str] | None = None) -> None:
    # First, before any thread or process of Logist's starts: the secrets leave its environment.
    withdraw_secrets()
    cli_main(argv)


if __name__ == "__main__":
    main()
