"""``python -m logist`` and the ``logist`` program.

Everything, ``--help`` and ``--version`` included, is click's
(:func:`logist.cli.main`), run with the secrets out of the process's
environment (:func:`logist.secrets.process.secrets_withdrawn`).

The order is the point: the secrets leave the environment (and the block
``/proc/<pid>/environ`` shows) before the command line, click, pydantic or
any other part of Logist is imported. ``logist`` itself imports nothing
until a public name is used, so what runs before the withdrawal is the
interpreter's start-up and :mod:`logist.secrets` (a few standard modules).
"""

from __future__ import annotations

from .secrets.process import secrets_withdrawn


def cli_main(argv: list[str] | None) -> None:
    """The command line, imported only now: after the secrets left."""
    from .cli import main as run

    run(argv)


def main(argv: list[str] | None = None) -> None:
    # First, before any thread or process of Logist's starts and before the rest of
    # Logist is imported: the secrets leave its environment, for as long as the command runs.
    with secrets_withdrawn():
        cli_main(argv)


if __name__ == "__main__":
    main()
