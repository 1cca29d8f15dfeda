"""The ``logist`` command line: a thin layer of click over :mod:`logist`.

Commands parse options, call one core function and print. Expected failures
(:class:`logist.errors.LogistError`) become one line on stderr and exit 1
(2 for :class:`logist.errors.UsageError`, as for click's usage errors);
anything else is a bug, reported in one line unless ``LOGIST_DEBUG=1``.

Each command is imported when it runs (:class:`~logist.cli.lazy.LazyGroup`):
``logist --help`` and ``--version`` import click and nothing of Logist
beyond this package's light modules, and a command loads its own module
and what that needs, not every other command's.

The ``logist`` program, its commands, options, output and exit codes, is
the product; these modules are internal: they may change in any release;
from Python use :mod:`logist.api` (``logist.open``, and
what its ``Jobs`` and ``Job`` return) and the names in ``logist.__all__``.
"""

from __future__ import annotations

import errno
import logging
import os
import sys
from typing import NoReturn

import click

from .. import __version__
from ..errors import LogistError, UsageError
from ..secrets.redact import url_shown
from ..terminal import shown
from .lazy import LazyGroup
from .listing import EPILOG

#: Set by :func:`main` while it runs: the core's warnings go to stderr. Not
#: when the group is invoked otherwise (CliRunner, a program embedding it),
#: whose logging is its caller's.
_warnings_to_stderr = False
#: What :func:`_show_core_warnings` did to the "logist" logger (the logger,
#: the handler it added, the level it replaced), for :func:`main` to undo.
_shown: list = []


#: The program's commands: name -> ``module:attribute`` (imported when one runs).
COMMANDS = {
    "init": "logist.cli.init:init",
    "demo": "logist.cli.demo:demo",
    "job": "logist.cli.job:job",
    "role": "logist.cli.role:role",
    "skill": "logist.cli.skill:skill",
    "prompts": "logist.cli.prompts:prompts",
    "report": "logist.cli.report:report",
    "serve": "logist.cli.serve:serve",
    "replay-server": "logist.cli.replay_server:replay_server",
    "workflow": "logist.cli.workflow:workflow",
    "doctor": "logist.cli.doctor:doctor",
    "models": "logist.cli.doctor:models",
    "agents": "logist.cli.doctor:agents",
}
#: The commands that act on the jobs directory, which take ``--jobs-dir`` after their name too.
TAKE_JOBS_DIR = ("init", "demo", "job", "role", "skill", "prompts", "report", "serve")
JOBS_DIR_HELP = (
    "The jobs directory (env LOGIST_JOBS_DIR; default: found upward from here like git, "
    "the first folder with a jobs_index.json or a jobs/ that has one, else ./jobs)."
)


def _set_jobs_dir(ctx: click.Context, _param: click.Parameter, value):
    if value is not None:  # as if given before the command: the application is made from it (logist.cli.app.application)
        ctx.find_root().params["jobs_dir"] = value


def accept_jobs_dir(command: click.Command) -> None:
    """Let ``--jobs-dir`` come after the command's name too (``logist job
    --jobs-dir D list``, ``logist job list --jobs-dir D``): an option on the
    command and, for a group, on each of its commands (those a
    :class:`~logist.cli.lazy.LazyGroup` loads later too)."""
    if not any("--jobs-dir" in param.opts for param in command.params):
        command.params.append(click.Option(
            ["--jobs-dir"], type=click.Path(file_okay=False), expose_value=False, callback=_set_jobs_dir,
            help="The jobs directory (as before the command).",
        ))
    if isinstance(command, LazyGroup):
        command.prepare_each(accept_jobs_dir)
        return
    for sub in getattr(command, "commands", {}).values():
        accept_jobs_dir(sub)


def _prepare(command: click.Command) -> None:
    """A command as it is loaded: those of :data:`TAKE_JOBS_DIR` take ``--jobs-dir``."""
    if command.name in TAKE_JOBS_DIR:
        accept_jobs_dir(command)


class LogistGroup(LazyGroup):
    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            from .app import EXIT_INTERRUPTED, Application  # a command ran: its module imported them

            # Ctrl-C in a command that changes jobs: what was kept, and how to go on.
            app = ctx.find_object(Application)
            if app is None or not app.interrupted():
                raise
            ctx.exit(EXIT_INTERRUPTED)
        except LogistError as exc:
            if os.environ.get("LOGIST_DEBUG") == "1":
                raise
            if isinstance(exc, UsageError):  # exit 2, as the table says
                raise click.UsageError(str(exc)) from None
            raise click.ClickException(str(exc)) from None


@click.group(cls=LogistGroup, lazy=COMMANDS, listing="logist", prepare=_prepare,
             context_settings={"help_option_names": ["-h", "--help"]}, epilog=EPILOG)
@click.option(
    "--jobs-dir",
    type=click.Path(file_okay=False),
    envvar="LOGIST_JOBS_DIR",
    help=JOBS_DIR_HELP,
)
# The version from logist/__init__.py (the package's one definition of it):
# asking importlib.metadata would cost more than the rest of --version.
@click.version_option(version=__version__, prog_name="logist")
@click.pass_context
def cli(ctx: click.Context, jobs_dir: str | None) -> None:
    """Run LLM agent jobs as plain directories: every step one recorded,
    committed, resumable LLM call.

    \b
    Example:
      logist demo
      logist job create hello --objective "Write hello.py that prints a greeting"
      logist job run hello
    """
    # The command's Application is made when the command asks for it
    # (logist.cli.app.pass_app), from --jobs-dir, and closed with this context:
    # "logist job --help" runs this and needs none.
    if _warnings_to_stderr:
        _show_core_warnings()


def _show_core_warnings() -> None:
    """The core reports what it repaired through logging; show it on stderr
    (unless the "logist" logger has handlers of its own)."""
    class CurrentStderr(logging.StreamHandler):
        """Writes to ``sys.stderr`` as it is when a record comes (a plain
        StreamHandler keeps the stream it was made with, which a caller that
        replaced ``sys.stderr`` for one run, as CliRunner does, has closed)."""

        @property
        def stream(self):
            return sys.stderr

        @stream.setter
        def stream(self, value) -> None:
            pass

        def format(self, record) -> str:
            return shown(super().format(record))  # a warning may quote a model's text

    logger = logging.getLogger("logist")
    if not logger.handlers:
        handler = CurrentStderr()
        handler.setFormatter(logging.Formatter("logist: %(message)s"))
        _shown.append((logger, handler, logger.level))
        logger.addHandler(handler)
        logger.setLevel(logging.WARNING)


def _stop_showing_core_warnings() -> None:
    """Undo :func:`_show_core_warnings`: :func:`main` leaves the process's
    logging as it found it, so that a program (or a test) that calls it runs
    on with its own."""
    while _shown:
        logger, handler, level = _shown.pop()
        logger.removeHandler(handler)
        logger.setLevel(level)


def main(argv: list[str] | None = None) -> None:
    """Entry point: every failure is one line on stderr and a non-zero exit."""
    global _warnings_to_stderr
    _warnings_to_stderr = True  # for a command; --help and --version need no logging
    try:
        _main(argv)
    finally:
        _warnings_to_stderr = False
        _stop_showing_core_warnings()


def _main(argv: list[str] | None) -> None:
    try:
        code = cli.main(args=argv, prog_name="logist", standalone_mode=False)
    except click.UsageError as exc:
        hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx is not None else ""
        _error(f"{exc.format_message()}{hint}")
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        _error(exc.format_message())
        sys.exit(exc.exit_code)
    except (KeyboardInterrupt, click.Abort):
        from .app import EXIT_INTERRUPTED  # the one table of exit codes (loaded with any command)

        _error("interrupted")
        sys.exit(EXIT_INTERRUPTED)
    except OSError as exc:
        if os.environ.get("LOGIST_DEBUG") == "1" or exc.errno not in RESOURCE_ERRORS:
            _internal_error(exc)
        _error(resource_line(exc))
        sys.exit(1)
    except Exception as exc:  # the one catch-all
        _internal_error(exc)
    sys.exit(code if isinstance(code, int) else 0)


#: What a disk or a folder refuses (a full disk, a quota, a read-only or
#: unwritable jobs directory): told in one line naming the path, not as an
#: internal error. What was written before is whole (every write is atomic,
#: the history's append journalled), so the command can be run again.
RESOURCE_ERRORS = {errno.ENOSPC: "free some space there, then run the command again",
                   errno.EDQUOT: "free some space there, then run the command again",
                   errno.EROFS: "Logist writes its jobs directory: use one it can write (--jobs-dir)",
                   errno.EACCES: "Logist writes its jobs directory: use one it can write (--jobs-dir)",
                   errno.EPERM: "Logist writes its jobs directory: use one it can write (--jobs-dir)"}


def resource_line(exc: OSError) -> str:
    """The one line of a disk's or a folder's refusal: the path, why, what to do."""
    where = f"{exc.filename}: " if exc.filename else ""
    return f"{where}{exc.strerror or os.strerror(exc.errno)}; {RESOURCE_ERRORS[exc.errno]}"


def _internal_error(exc: Exception) -> NoReturn:
    """The catch-all's line (LOGIST_DEBUG=1: the traceback instead)."""
    if os.environ.get("LOGIST_DEBUG") == "1":
        raise exc
    _error(f"internal error: {type(exc).__name__}: {exc} (LOGIST_DEBUG=1 shows the traceback)")
    sys.exit(1)


def _error(message: str) -> None:
    """The one line of a failure on stderr: it may quote a model's text (made
    inert) or name an endpoint (its password hidden: :func:`logist.secrets.redact.url_shown`),
    printed as :func:`logist.cli.app.echo` prints (that module is not
    imported for a usage error of ``--help``'s cost)."""
    click.echo(shown(f"Error: {url_shown(message)}"), err=True)
