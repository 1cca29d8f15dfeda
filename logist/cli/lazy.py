"""Command groups whose commands are imported when one runs, not to list them.

A command's module imports what the command needs (the API, and through it
the engine, pydantic, the models of every file); ``logist --help``,
``logist --version`` and the listing of ``logist job --help`` need none of
it. :class:`LazyGroup` is click's documented pattern for lazily loaded
subcommands (a name mapped to ``"module:attribute"``, imported by
``get_command``), with one addition: the listing of ``--help`` reads each
command's summary from :data:`logist.cli.listing.LISTING`, which
``python -m logist.docs_pages`` generates from the commands themselves (and
``--check`` finds stale), so listing them loads none of them.
"""

from __future__ import annotations

import importlib
from typing import Callable, Optional

import click

from .listing import LISTING


class LazyGroup(click.Group):
    """A click group whose commands ``lazy`` names (``{"name":
    "module:attribute"}``) are imported on first use; ``listing`` is its key
    in :data:`~logist.cli.listing.LISTING`; ``prepare`` is applied to each
    command as it is loaded (an option every command of the group takes;
    :meth:`prepare_each` adds one)."""

    def __init__(self, *args, lazy: dict[str, str], listing: str,
                 prepare: Optional[Callable[[click.Command], None]] = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = dict(lazy)
        self.listing = listing
        self.preparing: list[Callable[[click.Command], None]] = [prepare] if prepare is not None else []

    def prepare_each(self, prepare: Callable[[click.Command], None]) -> None:
        """Apply ``prepare`` to each command of the group: those loaded now and those loaded later."""
        self.preparing.append(prepare)
        for command in list(self.commands.values()):
            prepare(command)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(self.lazy))

    def get_command(self, ctx: click.Context, cmd_name: str) -> Optional[click.Command]:
        if cmd_name in self.lazy and cmd_name not in self.commands:
            module, attribute = self.lazy[cmd_name].split(":")
            command = getattr(importlib.import_module(module), attribute)
            if not isinstance(command, click.Command):
                raise TypeError(f"{self.lazy[cmd_name]} is not a click command")
            for prepare in self.preparing:
                prepare(command)
            self.add_command(command, cmd_name)
        return super().get_command(ctx, cmd_name)

    def listed(self, cmd_name: str) -> Optional[click.Command]:
        """A stand-in for command ``cmd_name`` as the listing knows it: its
        help's first paragraph, short help and flags, no callback (None: the
        listing has none of that name)."""
        known = LISTING.get(self.listing, {}).get(cmd_name)
        if known is None:
            return None
        help_text, short_help, hidden, deprecated = known
        return click.Command(cmd_name, help=help_text, short_help=short_help, hidden=hidden, deprecated=deprecated)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """click's own listing (``click.Group.format_commands``), each
        command's summary shortened by click from the listing's stand-in."""
        commands = []
        for name in self.list_commands(ctx):
            command = self.listed(name) if name in self.lazy else self.get_command(ctx, name)
            if command is None or command.hidden:
                continue
            commands.append((name, command))
        if commands:
            limit = formatter.width - 6 - max(len(name) for name, _ in commands)
            rows = [(name, command.get_short_help_str(limit)) for name, command in commands]
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def summary(command: click.Command) -> tuple:
    """What the listing keeps of ``command`` (:meth:`LazyGroup.listed`): the
    first paragraph of its help (all click's shortening reads), its short
    help, whether it is hidden, and deprecated."""
    help_text = (command.help or "").split("\n\n")[0] or None
    return help_text, command.short_help, command.hidden, command.deprecated
