"""Commands the model asks to run (``CMD``): policy, execution, clean output.

A command runs with the workspace as its directory, no standard input, a
timeout (its whole process group is killed when it expires) and an
environment without secrets. Its output goes to temporary files, not into
memory, so a command that prints gigabytes costs only the part the model is
shown: the output is cleaned (terminal escapes, carriage-return redraws and
echoed prompts removed; long runs of one repeated line collapsed with a
count) and cut in the middle with a marker when it is longer than the job's
limit.

Policy (per job, default from config.json): ``deny`` refuses every command
and tells the model; ``ask`` holds each one until a person approves or skips
it; ``allow`` runs commands matching one of ``allowed_commands`` (shell-style
globs over the whole command line, such as ``python -m pytest*``) and holds
the rest. A command using shell control characters (``; & | ` $ < >`` or a
newline) is only run without asking when a pattern names it exactly, so
``ls*`` cannot let ``ls; rm -rf ~`` through.
"""

from __future__ import annotations

import fnmatch
import os
import re
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ..store.entries import CommandRecord
from ..store.jobsdir import Job
from ..store.manifest import JobManifest
from ..store.prompts import Prompts, builtin

SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|CREDENTIAL|AUTH|COOKIE|SESSION)", re.I)
ALWAYS_REMOVED = {"LOGIST_API_KEY", "OPENAI_API_KEY"}
SHELL_CONTROL = re.compile(r"[;&|`$<>\n]")

_CSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")
_OSC = re.compile(r"\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")
_ESC = re.compile(r"\x1b[@-Z\\-_]")
_CTRL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_PROMPT = re.compile(r"^\s*(?:[\w.@~:/-]*\s*)?[$#%>]\s*$|^\s*(?:>>>|\.\.\.)\s*$")

REPEAT_COLLAPSE = 5


@dataclass
class CommandResult:
    command: str
    exit_code: Optional[int]
    timed_out: bool
    stdout: str
    stderr: str
    duration: float

    def report(self, timeout: float, prompts: Optional[Prompts] = None) -> str:
        """The next user message: what the model is told about the run (the ``command/*`` prompt templates)."""
        prompts = prompts or builtin()
        parts = [prompts.render(f"command/{name}", text=text) for name, text in (("stdout", self.stdout),
                 ("stderr", self.stderr)) if text] or [prompts.render("command/no_output")]
        if self.timed_out:
            ending = prompts.render("command/timed_out", seconds=f"{timeout:g}")
        else:
            ending = prompts.render("command/exit_code", exit_code=str(self.exit_code))
        return prompts.render("command/output", command=self.command, output="\n".join(parts), ending=ending)


def command_env(base: Optional[dict] = None) -> dict:
    """The environment for a command: everything but secrets."""
    env = dict(os.environ if base is None else base)
    for name in list(env):
        if name in ALWAYS_REMOVED or SECRET_NAME.search(name):
            del env[name]
    env.setdefault("TERM", "dumb")
    env["NO_COLOR"] = "1"
    # Python writes no bytecode into the workspace (it would be committed), and
    # never runs a stale one: a file the model changed within the second, at the
    # same size, would otherwise pass the cache's mtime-and-size check.
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.pop("PYTHONPYCACHEPREFIX", None)
    return env


def decide(policy: str, allowed: list[str], command: str) -> str:
    """'run', 'ask' or 'deny' for ``command`` under the job's policy."""
    if policy == "deny":
        return "deny"
    if policy == "ask":
        return "ask"
    line = command.strip()
    for pattern in allowed:
        if line == pattern.strip():
            return "run"
        if not SHELL_CONTROL.search(line) and fnmatch.fnmatchcase(line, pattern.strip()):
            return "run"
    return "ask"


def _apply_redraws(line: str) -> str:
    """What a terminal would show for a line with \\r redraws and backspaces."""
    if "\r" in line:
        shown = ""
        for part in line.split("\r"):
            shown = part + shown[len(part):]
        line = shown
    if "\b" in line:
        kept: list[str] = []
        for ch in line:
            if ch != "\b":
                kept.append(ch)
            elif kept:
                kept.pop()
        line = "".join(kept)
    return line


def clean_output(text: str, command: str = "", limit: int = 20_000) -> str:
    """Clean terminal output for the model and cut it to ``limit`` characters."""
    text = _OSC.sub("", text)
    text = _CSI.sub("", text)
    text = _ESC.sub("", text)
    text = text.replace("\r\n", "\n")
    lines = [_CTRL.sub("", _apply_redraws(line)).rstrip() for line in text.split("\n")]
    # An echoed command line at the top, bare prompts at the ends.
    stripped_cmd = command.strip()
    while lines and (not lines[0] or (stripped_cmd and lines[0].lstrip("$#> ").strip() == stripped_cmd)):
        lines.pop(0)
    while lines and (not lines[-1] or _PROMPT.match(lines[-1])):
        lines.pop()
    collapsed: list[str] = []
    i = 0
    while i < len(lines):
        j = i
        while j + 1 < len(lines) and lines[j + 1] == lines[i]:
            j += 1
        run = j - i + 1
        if run >= REPEAT_COLLAPSE:
            collapsed += [lines[i], f"[... the line above repeated {run - 1} more times]"]
        else:
            collapsed += lines[i : j + 1]
        i = j + 1
    out = "\n".join(collapsed)
    return cut_middle(out, limit)


def cut_middle(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head = limit // 2
    tail = limit - head
    cut = len(text) - head - tail
    return f"{text[:head]}\n[... {cut} characters cut from the middle ...]\n{text[-tail:]}"


def _read_capped(handle, limit: int) -> str:
    """Head and tail of a (possibly huge) output file, ``limit`` bytes each side."""
    size = handle.seek(0, os.SEEK_END)
    handle.seek(0)
    if size <= 4 * limit:
        return handle.read().decode("utf-8", errors="replace")
    head = handle.read(2 * limit)
    handle.seek(size - 2 * limit)
    tail = handle.read()
    marker = f"\n[... {size - 4 * limit} bytes of output not read ...]\n".encode()
    return (head + marker + tail).decode("utf-8", errors="replace")


def run_command(command: str, cwd: Path, timeout: float = 120.0, limit: int = 20_000) -> CommandResult:
    """Run ``command`` with a shell in ``cwd`` under the rules above."""
    started = time.monotonic()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            command, shell=True, cwd=str(cwd), env=command_env(), stdin=subprocess.DEVNULL,
            stdout=out, stderr=err, start_new_session=True,
        )
        timed_out = False
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
        stdout = clean_output(_read_capped(out, limit), command, limit)
        stderr = clean_output(_read_capped(err, limit), command, limit)
    return CommandResult(
        command=command,
        exit_code=None if timed_out else proc.returncode,
        timed_out=timed_out,
        stdout=stdout,
        stderr=stderr,
        duration=time.monotonic() - started,
    )


def execute(job: Job, manifest: JobManifest, command: str) -> CommandRecord:
    """Run a command in the job's workspace with the job's limits."""
    settings = manifest.settings
    result = run_command(command, job.workspace, settings.command_timeout, settings.command_output_limit)
    return CommandRecord(
        command=command,
        decision="run",
        exit_code=result.exit_code,
        timed_out=result.timed_out,
        duration_ms=round(result.duration * 1000),
        output=result.report(settings.command_timeout, Prompts(job.jobs_dir.path)),
    )


def run_or_hold(job: Job, manifest: JobManifest, command: str) -> CommandRecord:
    """Apply the job's command policy: run now, hold for a person, or refuse."""
    decision = decide(manifest.settings.command_policy, manifest.settings.allowed_commands, command)
    if decision == "run":
        return execute(job, manifest, command)
    return CommandRecord(command=command, decision=decision)
