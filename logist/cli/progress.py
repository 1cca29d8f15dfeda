"""What a person sees while steps run: the line of a call in flight, one
line per call, and a command's output.

* :class:`ProgressLine` redraws one line on stderr while a call is in
  flight (role, step N of max, elapsed seconds, tokens streamed so far), or
  while a model's command runs (the command, elapsed seconds), and wipes it
  when the call or the command ends. It is only made when stderr is a terminal
  and ``--quiet`` is not given (:func:`progress_for`), so logs and pipes
  never see it.
* :func:`call_line` is the line after each call: role, action, tokens in
  and out, cost (or that the price is unknown), duration.
* :func:`command_lines` is a command's cleaned output, cut to a few lines,
  under the command, its exit code and how long it ran: the one rendering
  of a command that ran, for ``job step`` and ``job run`` (:func:`step_command_lines`)
  and for ``job approve-command``.

Every text here that a model, a command or a configuration supplied is made
inert (:func:`logist.terminal.inert`) before it is drawn: the progress line
itself, the command (on one line, as it ran) and, through
:func:`logist.cli.app.echo`, the lines of its output.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import TYPE_CHECKING, Optional, TextIO

from ..terminal import inert

if TYPE_CHECKING:  # a step's result: logist.api loads it with the engine, when a command steps
    from ..api import StepResult

#: Lines of a command's output shown in the terminal (the model sees it all).
COMMAND_HEAD, COMMAND_TAIL = 5, 10
COMMAND_WIDTH = 160
#: Characters of a running command the progress line shows (it must fit one row to be redrawn).
RUNNING_WIDTH = 60


class ProgressLine:
    """Implements :class:`logist.api.CallWatch` on a terminal."""

    def __init__(self, stream: TextIO, interval: float = 0.2):
        self.stream = stream
        self.interval = interval
        self._what = ""
        self._doing = ""
        self._count = 0
        self._started = 0.0
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._lock = threading.Lock()

    def started(self, role: str, call: int, of: int, model: str) -> None:
        self._begin(f"{role} ({model}), step {call} of {of}", "waiting for the model")

    def command(self, command: str) -> None:
        line = command.strip()
        self._begin("$ " + (line if len(line) <= RUNNING_WIDTH else line[:RUNNING_WIDTH - 3] + "..."), "running")

    def _begin(self, what: str, doing: str) -> None:
        self._what, self._doing, self._count, self._started = what, doing, 0, time.monotonic()
        self._stop.clear()
        self._draw()
        # Kept only once started: a Ctrl-C landing in between leaves no thread
        # for finished() to join unstarted (which raises); one that started is
        # stopped by finished()'s event all the same.
        thread = threading.Thread(target=self._run, name="logist-progress", daemon=True)
        thread.start()
        self._thread = thread

    def tokens(self, count: int) -> None:
        self._count = count

    def finished(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        with self._lock:
            self.stream.write("\r\x1b[K")
            self.stream.flush()

    def text(self) -> str:
        elapsed = time.monotonic() - self._started
        streamed = f", {self._count} tokens so far" if self._count else ""
        return f"  {self._what}: {self._doing}, {elapsed:.0f} s{streamed}"

    def _draw(self) -> None:
        with self._lock:
            self.stream.write("\r\x1b[K" + inert(self.text(), one_line=True))
            self.stream.flush()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._draw()


def wipe(stream: Optional[TextIO] = None) -> None:
    """Erase a progress line Ctrl-C may have left half drawn (on a terminal only)."""
    stream = stream or sys.stderr
    if stream.isatty():
        stream.write("\r\x1b[K")
        stream.flush()


def progress_for(quiet: bool, stream: Optional[TextIO] = None) -> Optional[ProgressLine]:
    """A progress line on stderr when it is a terminal and not ``quiet``."""
    stream = stream or sys.stderr
    if quiet or not stream.isatty():
        return None
    return ProgressLine(stream)


def _tokens(count: Optional[int], estimated: bool) -> str:
    return "?" if count is None else ("~" if estimated else "") + f"{count:,}"


def call_line(result: "StepResult") -> Optional[str]:
    """``   Worker COMPLETED: 1,204 tokens in, 96 out, $0.0002, 2.3 s``; None
    for a step that made no call."""
    if not result.called:
        return None
    if result.prompt_tokens is None and result.completion_tokens is None:
        return f"   {result.role} {result.action}: no answer, {result.duration_ms / 1000:.1f} s"
    parts = [f"{_tokens(result.prompt_tokens, result.tokens_estimated)} tokens in, "
             f"{_tokens(result.completion_tokens, result.tokens_estimated)} out"
             + (" (estimated: the endpoint sent no usage)" if result.tokens_estimated else "")]
    if result.cost_usd is not None:
        parts.append(f"${result.cost_usd:.4f}")
    elif not result.priced:
        parts.append(f"price unknown: add {result.model} to \"prices\" in config.json")
    parts.append(f"{result.duration_ms / 1000:.1f} s")
    return f"   {result.role} {result.action}: " + ", ".join(parts)


def command_lines(command: str, output: Optional[str], exit_code: Optional[int],
                  duration_ms: Optional[int] = None) -> list[str]:
    """A command that ran, as shown in the terminal: ``$ command  (exit 0,
    1.2 s)``, then its cleaned output (as the model is shown it), its first
    and last lines, each cut to :data:`COMMAND_WIDTH` characters."""
    if output is None:
        return []
    lines = output.rstrip("\n").splitlines()
    if len(lines) > COMMAND_HEAD + COMMAND_TAIL + 1:
        cut = len(lines) - COMMAND_HEAD - COMMAND_TAIL
        lines = lines[:COMMAND_HEAD] + [f"... {cut} more lines (logist job show, or the transcript) ..."] + lines[-COMMAND_TAIL:]
    took = f", {duration_ms / 1000:.1f} s" if duration_ms is not None else ""
    ended = f"exit {exit_code}" if exit_code is not None else "no exit code: stopped"
    head = f"   $ {inert(command, one_line=True)}  ({ended}{took})"
    return [head] + [f"   | {line[:COMMAND_WIDTH]}" + ("..." if len(line) > COMMAND_WIDTH else "") for line in lines]


def step_command_lines(result: "StepResult") -> list[str]:
    """:func:`command_lines` for the command a step ran."""
    return command_lines(result.command or "", result.command_output, result.command_exit_code,
                         result.command_duration_ms)
