"""Which of a model's commands run (``CMD``): the job's command policy.

Per job, default from config.json: ``deny`` refuses every command and tells
the model; ``ask`` holds each one until a person approves or skips it;
``allow`` runs commands matching one of ``allowed_commands`` (shell-style
globs over the whole command line, such as ``python -m pytest*``) and holds
the rest. A command using shell control characters (``; & | ` $ < >`` or a
newline) is only run without asking when a pattern names it exactly, so
``ls*`` cannot let ``ls; rm -rf ~`` through.

The rule is apart from running a command (:mod:`.commands`) because a
reader shows it: ``logist job status`` says why a held command waits
(:func:`held_because`) and loads nothing that runs one.
"""

from __future__ import annotations

import fnmatch
import re
from typing import Optional

from ..store.manifest import JobManifest

SHELL_CONTROL = re.compile(r"[;&|`$<>\n]")


#: Why a command the policy asks about is held: the started command of an interrupted step.
STARTED_BEFORE = ("it had been started when Logist was stopped, and a command that was started is not run again "
                  "on its own")


def judge(policy: str, allowed: list[str], command: str) -> tuple[str, str]:
    """'run', 'ask' or 'deny' for ``command`` under the job's policy, and the
    rule that decided it, in words a person is shown (why a command was
    held: ``job step``'s output, ``job status``, ``--json``).

    A pattern is a shell-style glob over the whole command line, except for
    a command holding a shell operator (:data:`SHELL_CONTROL`: ``; & | ` $
    < >`` or a newline, so ``2>&1`` and ``| tail`` too): only a pattern equal
    to it lets such a command run, so ``pytest*`` cannot let ``pytest; curl
    x | sh`` through, and a person who means ``pytest -q 2>&1 | tail``
    allows exactly that line (``--allow 'pytest -q 2>&1 | tail'``)."""
    if policy == "deny":
        return "deny", "the job's command policy is deny: every command is refused"
    if policy == "ask":
        return "ask", "the job's command policy is ask: every command waits for a person"
    line = command.strip()
    patterns = [pattern.strip() for pattern in allowed]
    if not patterns:
        return "ask", "the job's command policy is allow, but it has no --allow pattern"
    operator = SHELL_CONTROL.search(line)
    for pattern in patterns:
        if line == pattern:
            return "run", f"--allow pattern {pattern!r} is the command itself"
        if not operator and fnmatch.fnmatchcase(line, pattern):
            return "run", f"--allow pattern {pattern!r} matches it"
    listed = ", ".join(repr(pattern) for pattern in patterns)
    near = [pattern for pattern in patterns if operator and fnmatch.fnmatchcase(line, pattern)]
    if operator:
        used = ", ".join(repr(char) for char in dict.fromkeys(SHELL_CONTROL.findall(line)))
        if near:
            return "ask", (f"it holds shell operators ({used}): a command with a shell operator runs without asking "
                           "only when an --allow pattern is that exact command "
                           f"({', '.join(repr(pattern) for pattern in near)} would match it otherwise)")
        return "ask", (f"no --allow pattern matches it (--allow {listed}; it holds shell operators ({used}), "
                       "so only a pattern that is that exact command would)")
    return "ask", f"no --allow pattern matches it (--allow {listed})"


def decide(policy: str, allowed: list[str], command: str) -> str:
    """'run', 'ask' or 'deny' for ``command`` under the job's policy (:func:`judge`)."""
    return judge(policy, allowed, command)[0]


def held_because(manifest: JobManifest) -> Optional[str]:
    """Why the job's held command waits for a person (:func:`judge`'s rule
    under the job's settings), or None when it holds no command. A command
    the settings would run was held because its step was interrupted after
    it had been started (:func:`logist.engine.commands.run_or_hold`)."""
    command = manifest.pending_command
    if command is None:
        return None
    decision, rule = judge(manifest.settings.command_policy, manifest.settings.allowed_commands, command)
    return STARTED_BEFORE if decision == "run" else rule
