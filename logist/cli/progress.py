"""What a person sees while steps run: the line of a call in flight, one
line per call, and a command's output.

* :class:`ProgressLine` redraws one line on stderr while a call is in
  flight (role, step N of max, elapsed seconds, tokens streamed so far) and
  wipes it when the call ends. It is only made when stderr is a terminal
  and ``--quiet`` is not given (:func:`progress_for`), so logs and pipes
  never see it.
* :func:`call_line` is the line after each call: role, action, tokens in
  and out, cost (or that the price is unknown), duration.
* :func:`command_lines` is a command's cleaned output, cut to a few lines.

Every text here that a model, a command or a configuration supplied is made
inert (:func:`logist.terminal.inert`) before it is drawn: the progress line
itself, the command (on one line, as it ran) and, through
:func:`logist.cli.app.echo`, the lines of its output.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Optional, TextIO

from ..engine.apply import StepResult
from ..terminal import inert

#: Lines of a command's output shown in the terminal (the model sees it all).
COMMAND_HEAD, COMMAND_TAIL = 5, 10
COMMAND_WIDTH = 160


class ProgressLine:
    """Implements :class:`logist.engine.call.CallWatch` on a terminal."""

    def __init__(self, stream: TextIO, interval: float = 0.2):
        self.stream = stream
        self.interval = interval
        self._what = ""
        self._count = 0
        self._started = 0.0
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._lock = threading.Lock()

    def started(self, role: str, call: int, of: int, model: str) -> None:
        self._what, self._count, self._started = f"{role} ({model}), step {call} of {of}", 0, time.monotonic()
        self._stop.clear()
        self._draw()
        self._thread = threading.Thread(target=self._run, name="logist-progress", daemon=True)
        self._thread.start()

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
        return f"  {self._what}: waiting for the model, {elapsed:.0f} s{streamed}"

    def _draw(self) -> None:
        with self._lock:
            self.stream.write("\r\x1b[K" + inert(self.text(), one_line=True))
            self.stream.flush()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._draw()


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


def command_lines(result: "StepResult") -> list[str]:
    """A command's cleaned output as shown in the terminal: its first and
    last lines, each cut to :data:`COMMAND_WIDTH` characters."""
    if result.command_output is None:
        return []
    lines = result.command_output.rstrip("\n").splitlines()
    if len(lines) > COMMAND_HEAD + COMMAND_TAIL + 1:
        cut = len(lines) - COMMAND_HEAD - COMMAND_TAIL
        lines = lines[:COMMAND_HEAD] + [f"... {cut} more lines (logist job show, or the transcript) ..."] + lines[-COMMAND_TAIL:]
    code = result.command_exit_code
    head = f"   $ {inert(result.command, one_line=True)}" + (f"  (exit {code})" if code is not None else "  (no exit code: stopped)")
    return [head] + [f"   | {line[:COMMAND_WIDTH]}" + ("..." if len(line) > COMMAND_WIDTH else "") for line in lines]
