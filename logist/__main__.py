"""``python -m logist`` and the ``logist`` program.

Everything, ``--help`` and ``--version`` included, is click's
(:func:`logist.cli.main`), run with the secrets out of the process's
environment (:func:`logist.secrets.process.secrets_withdrawn`).

The order is the point: the secrets leave the environment (and the block
``/proc/<pid>/environ`` shows) before the command line, click, pydantic or
any other part of Logist is imported. ``logist`` itself imports nothing
until a public name is used, so what runs before the withdrawal is the
interpreter's start-up and :mod:`logist.secrets` (a few standard modules).

At its exit the program freezes what it made (:func:`gc.freeze`), so that
the interpreter's last collection, a pass over every object still alive
(the modules, click's commands, pydantic's schemas and validators: for
``logist job status`` about a sixth of its CPU time, measured), skips them:
that pass could only find what the exit frees anyway. It is registered
when this module is imported, once, and runs after every handler registered
later (logging's flush, a temporary directory's removal): the collector
works as usual for as long as a command runs.
"""

from __future__ import annotations

import atexit
import gc

from .secrets.process import secrets_withdrawn

atexit.register(gc.freeze)


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
