"""Commands the model asks to run (``CMD``): policy, execution, clean output.

A command runs with the workspace as its directory, no standard input, a
timeout (its whole process group is killed when it expires), an allowlisted
environment and, where the system allows it, in a PID namespace of its own
that cannot see Logist (:mod:`logist.workspace.sandbox` starts and stops it; its
process group is recorded in the step's journal before it runs, and every
process it leaves behind is killed when it ends). Its output goes to temporary files, not into
memory, so a command that prints gigabytes costs only the part the model is
shown: the output is cleaned as kosmos-panel lists it and no further
(:func:`clean_output`: what a terminal shows, escapes and redraws applied;
terminal prompts, echoed commands and Microsoft Windows banners removed;
empty lines removed; a line repeated on the lines that follow it kept once),
cut in the middle, with a note saying how much was cut, when it is
longer than the job's limit, and every known secret value in it redacted
after the cleaning (:mod:`logist.secrets.redact`: cleaning joins a secret that
escapes, redraws or control bytes split). The history keeps the cleaned text
(what the model was shown) and, when cleaning changed it, the raw text as it
was read (a huge output: its first and last bytes, the rest counted),
redacted where it shows a secret on a terminal as well as where it holds one
(:func:`shown_lines` says what each character shows as).

Which commands run, are held or are refused is the job's command policy
(:mod:`.command_policy`: ``deny``, ``ask``, or ``allow`` with its patterns).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Protocol, Sequence

from ..workspace import sandbox as processes
from ..secrets.redact import redact, redact_shown
from ..store.entries import CommandRecord
from ..store.session import JobFiles
from ..store.manifest import JobManifest
from ..store.prompts import Prompts, builtin
from .command_policy import SHELL_CONTROL, STARTED_BEFORE, decide, held_because, judge  # noqa: F401 (the policy's names, here too)

class CommandWatch(Protocol):
    """Told while a model's command runs (the CLI's progress line: its elapsed time)."""

    def command(self, command: str) -> None: ...

    def finished(self) -> None: ...

_CSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")
_OSC = re.compile(r"\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")
_ESC = re.compile(r"\x1b[@-Z\\-_]")
_CTRL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
#: Terminal prompts, with whatever was typed after them: Windows' ``C:\\dir>``,
#: PowerShell's ``PS C:\\dir>`` (or ``PS /dir>``), and a Unix shell's
#: ``user@host:path$`` (``#`` for root). A line of output such as ``100%``,
#: ``#``, ``>`` or ``---`` is none of them, nor a Windows path in a message
#: (``C:\\src\\a.py:3: 1 > 2``: a prompt's path has no ``:`` past its drive).
_PROMPT = re.compile(
    r'^\s*(?:PS (?:[A-Za-z]:\\|/)[^:<>|"*?]*>|[A-Za-z]:\\[^:<>|"*?]*>|[\w.-]+@[\w.-]+:[^\s$#]*[$#](?=\s|$)).*$'
)
#: A ``$ ``/``# `` prompt with a command after it: removed when the command is the one run (its echo).
_ECHO = re.compile(r"^\s*[$#] +(.*)$")

#: Banner lines a shell prints before any output (kosmos-panel drops Windows' two).
_BANNER = re.compile(
    r"^\s*(?:Microsoft Windows \[Version [^\]]*\]|\(c\) (?:\d{4} )?Microsoft Corporation\.? All rights reserved\.?)\s*$",
    re.I,
)
#: The marker :func:`logist.workspace.sandbox.read_head_and_tail` puts where it skipped the middle of a huge output.
_UNREAD = re.compile(r"\[\.\.\. (\d+) bytes of output not read \.\.\.\]")


@dataclass
class CommandResult:
    command: str
    exit_code: Optional[int]
    timed_out: bool
    stdout: str
    stderr: str
    duration: float
    #: The output as read, before cleaning; None where cleaning changed nothing but line ends.
    raw_stdout: Optional[str] = None
    raw_stderr: Optional[str] = None
    #: Whether it ran on a throwaway view of the workspace (asked with ``throwaway``): what it wrote is gone.
    thrown_away: bool = False

    def report(self, timeout: float, prompts: Optional[Prompts] = None, protocol: str = "json") -> str:
        """The next user message: what the model is told about the run (the ``command/*`` prompt templates).
        In the tags protocol, kosmos-panel's: ``Command output:`` and the cleaned output (a timeout said after it)."""
        prompts = prompts or builtin()
        if protocol == "tags":
            output = "\n".join(text for text in (self.stdout, self.stderr) if text) or prompts.render("command/no_output")
            ending = prompts.render("command/timed_out", seconds=f"{timeout:g}") if self.timed_out else None
            return prompts.render("command/tags", output=output, ending=ending)
        parts = [prompts.render(f"command/{name}", text=text) for name, text in (("stdout", self.stdout),
                 ("stderr", self.stderr)) if text] or [prompts.render("command/no_output")]
        if self.timed_out:
            ending = prompts.render("command/timed_out", seconds=f"{timeout:g}")
        else:
            ending = prompts.render("command/exit_code", exit_code=str(self.exit_code))
        return prompts.render("command/output", command=self.command, output="\n".join(parts), ending=ending)


#: A ``\\r`` that ends a line (``\\r\\n``): a line end, not a redraw.
_CRLF = re.compile(r"\r(?=\n)")

#: Text with, for each character, the index in the output it came from
#: (None: not tracked). See :func:`shown_lines`.
Tracked = tuple[str, Optional[list[int]]]


def _remove(pattern: re.Pattern, text: str, origins: Optional[list[int]]) -> Tracked:
    """``text`` without the matches of ``pattern`` (and their origins)."""
    if origins is None:
        return pattern.sub("", text), None
    kept, kept_origins, start = [], [], 0
    for match in pattern.finditer(text):
        kept.append(text[start:match.start()])
        kept_origins += origins[start:match.start()]
        start = match.end()
    kept.append(text[start:])
    kept_origins += origins[start:]
    return "".join(kept), kept_origins


def _apply_redraws(line: str, origins: Optional[list[int]]) -> Tracked:
    """What a terminal would show for a line with \\r redraws and backspaces."""
    if "\r" not in line and "\b" not in line:
        return line, origins
    chars, where = list(line), origins
    if "\r" in line:
        shown: list[str] = []
        shown_where: list[int] = []
        start = 0
        for part in line.split("\r"):
            shown[: len(part)] = part
            if origins is not None:
                shown_where[: len(part)] = origins[start:start + len(part)]
            start += len(part) + 1
        chars, where = shown, (shown_where if origins is not None else None)
    if "\b" in line:
        kept: list[str] = []
        kept_where: list[int] = []
        for i, ch in enumerate(chars):
            if ch != "\b":
                kept.append(ch)
                if where is not None:
                    kept_where.append(where[i])
            elif kept:
                kept.pop()
                if where is not None:
                    kept_where.pop()
        chars, where = kept, (kept_where if where is not None else None)
    return "".join(chars), where


def shown_lines(text: str, track: bool = False) -> tuple[list[str], Optional[list[list[int]]]]:
    """The lines a terminal would show for ``text``: escape sequences,
    carriage-return redraws, backspaces and control bytes applied or
    removed, trailing blanks cut. With ``track``, also, for each character
    of each line, the index in ``text`` of the character it shows (so that
    what a secret *shows as* can be found in the output as written:
    :func:`logist.secrets.redact.redact_shown`)."""
    origins = list(range(len(text))) if track else None
    for pattern in (_OSC, _CSI, _ESC, _CRLF):
        text, origins = _remove(pattern, text, origins)
    lines: list[str] = []
    line_origins: list[list[int]] = []
    start = 0
    for line in text.split("\n"):
        where = origins[start:start + len(line)] if origins is not None else None
        start += len(line) + 1
        line, where = _apply_redraws(line, where)
        line, where = _remove(_CTRL, line, where)
        stripped = line.rstrip()
        lines.append(stripped)
        if where is not None:
            line_origins.append(where[: len(stripped)])
    return lines, (line_origins if track else None)


def clean_output(text: str, command: str = "", limit: int = 20_000) -> str:
    """Terminal output as the model is shown it, cut to ``limit`` characters:
    kosmos-panel's cleaning, rule by rule, and nothing else. What a terminal
    shows (:func:`shown_lines`: escape sequences, redraws and control bytes
    applied or removed); terminal prompts (:data:`_PROMPT`) and a ``$ ``/``# ``
    prompt echoing ``command`` removed; Microsoft Windows' banner lines
    removed; empty lines removed; a line equal to the one before it removed."""
    lines, _ = shown_lines(text)
    echoed = command.strip()
    kept: list[str] = []
    for line in lines:
        echo = _ECHO.match(line)
        if (not line.strip() or _PROMPT.match(line) or _BANNER.match(line)
                or (echo is not None and echoed and echo.group(1).strip() == echoed)
                or (kept and kept[-1] == line)):
            continue
        kept.append(line)
    return cut_middle("\n".join(kept), limit)


def cut_middle(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head = limit // 2
    tail = limit - head
    middle = text[head:len(text) - tail]
    # Bytes never read (a huge output) count among the cut ones.
    cut = len(middle) + sum(int(m.group(1)) - len(m.group(0)) for m in _UNREAD.finditer(middle))
    return f"{text[:head]}\n[... {cut} characters cut from the middle ...]\n{text[-tail:]}"


def run_command(command: str, cwd: Path, timeout: float = 120.0, limit: int = 20_000, *,
                sandbox: str = "auto", env_names: Sequence[str] = (), read_only: Sequence[Path] = (),
                recorded: Optional[Callable[[int, Optional[str]], None]] = None,
                throwaway: bool = False) -> CommandResult:
    """Run ``command`` with a shell in ``cwd``, a git workspace, under the
    rules above (its ``.git`` and the folders ``read_only`` read-only where
    the sandbox can do it); ``recorded(pgid, start_time)`` is called before
    the command begins. ``throwaway``: on a throwaway view of the workspace
    where the sandbox can make one
    (:func:`logist.workspace.sandbox.throwaway_view`)."""
    ran = processes.run_contained(command, cwd, processes.command_env(env_names), timeout,
                                  lambda handle: processes.read_head_and_tail(handle, limit), sandbox=sandbox,
                                  workspace=cwd, read_only=read_only, recorded=recorded, throwaway=throwaway)
    # Cleaned first, redacted last: cleaning joins what escapes, redraws or
    # control bytes split (SEC\x1b[0mRET is SECRET once cleaned), so the
    # output as written is redacted where it shows a secret, and the
    # cleaned text again after the cleaning.
    raw_stdout = redact_shown(ran.stdout, shown_lines)
    raw_stderr = redact_shown(ran.stderr, shown_lines)
    stdout = redact(clean_output(raw_stdout, command, limit))
    stderr = redact(clean_output(raw_stderr, command, limit))
    return CommandResult(
        command=command,
        exit_code=ran.exit_code,
        timed_out=ran.timed_out,
        stdout=stdout,
        stderr=stderr,
        duration=ran.duration,
        raw_stdout=_changed(raw_stdout, stdout),
        raw_stderr=_changed(raw_stderr, stderr),
        thrown_away=ran.thrown_away,
    )


def _changed(raw: str, cleaned: str) -> Optional[str]:
    """``raw`` when cleaning changed more than its line ends, else None (nothing to keep twice)."""
    return None if raw.replace("\r\n", "\n").strip("\n") == cleaned else raw


def execute(job: JobFiles, manifest: JobManifest, command: str, protocol: str = "json",
            watch: Optional[CommandWatch] = None) -> CommandRecord:
    """Run a command in the job's workspace with the job's limits; its
    report is worded for ``protocol``, the one the role answers in;
    ``watch`` is told while it runs."""
    settings = manifest.settings
    try:
        if watch is not None:  # in the try: a Ctrl-C as it starts still ends it (finally)
            watch.command(command)
        result = run_command(command, job.workspace, settings.command_timeout, settings.command_output_limit,
                             sandbox=settings.command_sandbox, env_names=settings.command_env,
                             read_only=_logists_folders(job),
                             recorded=lambda pgid, start: job.session.journal.command_started(pgid, start))
    finally:
        if watch is not None:
            watch.finished()
    output = result.report(settings.command_timeout, Prompts(job.jobs_dir.path), protocol)
    # Where it ran (the workspace) is recorded when what it printed or the model is shown names it: a
    # replay recognises the path there. Otherwise it would only repeat the job's own folder.
    where = str(job.workspace.absolute())
    named = any(where in (text or "") for text in (output, result.raw_stdout, result.raw_stderr))
    return CommandRecord(
        command=command,
        decision="run",
        exit_code=result.exit_code,
        timed_out=result.timed_out,
        duration_ms=round(result.duration * 1000),
        output=output,
        cwd=where if named else None,
        raw_stdout=result.raw_stdout,
        raw_stderr=result.raw_stderr,
    )


def _logists_folders(job: JobFiles) -> list[Path]:
    """What a command may read but never write: the jobs directory (every
    job's files, the index, roles and prompts) and the job's own folder."""
    folders = [job.jobs_dir.path]
    if not job.dir.resolve().is_relative_to(job.jobs_dir.path.resolve()):
        folders.append(job.dir)
    return folders


def run_or_hold(job: JobFiles, manifest: JobManifest, command: str, interrupted: bool = False,
                protocol: str = "json", watch: Optional[CommandWatch] = None) -> CommandRecord:
    """Apply the job's command policy: run now, hold for a person, or refuse.

    ``interrupted``: the command had already been started when Logist was
    stopped (the step is being finished from its saved answer). It is never
    started again on its own: a person may have stopped Logist because of it;
    it is held like a command the policy asks about."""
    decision = decide(manifest.settings.command_policy, manifest.settings.allowed_commands, command)
    if interrupted and decision == "run":
        decision = "ask"
    if decision == "run":
        try:
            return execute(job, manifest, command, protocol, watch)
        except processes.SandboxUnavailable as exc:  # refused, not run unconfined: the reason is recorded
            return CommandRecord(command=command, decision="deny", output=str(exc))
    return CommandRecord(command=command, decision=decision)
