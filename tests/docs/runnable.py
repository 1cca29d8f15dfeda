"""The runnable examples of README.md and docs/**/*.md: how they are found and run.

The contract, shared by the pages and tests/docs/test_examples.py:

A shell example is *runnable* when the line right before its opening fence is
``<!-- example: NAME -->`` (NAME a lowercase word, ``-`` allowed:
``tour``, ``exit-codes``) and the fence is ```` ```console ````. In it, a line
starting with ``$ `` is a command, run by bash (a line ending in ``\\``
continues it on the next one); the lines after a command, up to the next
``$ `` line or the fence, are its expected output as the page shows it: none,
not checked; a line ``...`` stands for any number of lines; trailing spaces,
and blank lines at the end, are not compared. All blocks of one NAME in one
file run in order in one fresh temporary directory (the working directory of
every command; ``./jobs`` is their jobs directory), with ``logist`` on PATH,
HOME a fresh folder and ``LOGIST_BASE_URL`` pointing at the scripted or
replaying OpenAI-compatible server the test declares for NAME.

Two things this module decides where the contract is silent: a command fails
when bash exits with anything but 0, 3 or 4 (3 and 4 are the states a job a
command ran stopped in, as the exit-code table says: ``logist job run``
exits 3 when the job waits for an approval; 1 and 2 are errors); and each
command runs in a bash of its own (a ``cd`` or ``export`` lasts for that
command only), stdout and stderr read together as a terminal shows them
(``PYTHONUNBUFFERED=1`` keeps their order).

``<!-- example: config -->`` and ``<!-- example: role -->`` right before a
```` ```json ```` fence mark a config.json or a role manifest; the block is
validated against its schema in ``schemas/``.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Optional, Union

import jsonschema

from logist.replay.scripted import ScriptedLLMServer
from logist.replay.server import ReplayLLMServer
from logist.replay.fixtures import fixture_path

MARKER = re.compile(r"^<!-- example: ([a-z][a-z0-9-]*) -->$")
FENCE = re.compile(r"^`{3,}")
#: The JSON examples: NAME -> the schema a block is validated against.
SCHEMAS = {"config": "config.schema.json", "role": "role-manifest.schema.json"}
#: bash exit statuses that are not a failure: 3 and 4 are where a job a command
#: ran stopped (a person is needed, a budget is spent), per the exit-code table.
PASSING_STATUSES = (0, 3, 4)
ELLIPSIS = "..."


@dataclass
class Command:
    text: str                       # as bash gets it (continuation lines joined by newlines)
    expected: Optional[list[str]]   # None: the page shows no output
    path: Path
    line: int                       # of the command's "$ " line in the page

    @property
    def where(self) -> str:
        return f"{_shown(self.path)}:{self.line}"


@dataclass
class Example:
    name: str
    path: Path
    line: int                       # of the first block's marker
    commands: list[Command] = field(default_factory=list)
    json_blocks: list[tuple[int, str]] = field(default_factory=list)  # (line, text)

    @property
    def id(self) -> str:
        return f"{_shown(self.path)}::{self.name}"


def _shown(path: Path) -> str:
    """A page's path as a failure names it: relative to the checkout when inside it."""
    root = Path(__file__).resolve().parents[2]
    try:
        return str(path.resolve().relative_to(root))
    except ValueError:
        return str(path)


def parse(path: Path) -> tuple[list[Example], list[str]]:
    """The examples of one page, each NAME's blocks together in page order, and
    the page's mistakes (a marker not right before a ```console or ```json
    fence, a JSON NAME on a console block), each with its file:line. A marker
    inside another fenced block (a page showing how to mark one) is text."""
    lines = path.read_text(encoding="utf-8").splitlines()
    examples: dict[str, Example] = {}
    problems: list[str] = []
    i = 0
    while i < len(lines):
        fence = FENCE.match(lines[i].strip())
        if fence:  # a block no marker precedes: skipped whole
            i = _closing(lines, i, fence.group(0)) + 1
            continue
        marker = MARKER.match(lines[i].strip())
        if not marker:
            i += 1
            continue
        name, marker_line = marker.group(1), i + 1
        following = lines[i + 1] if i + 1 < len(lines) else ""
        opening = FENCE.match(following.strip())
        kind = following.strip()[len(opening.group(0)):].strip() if opening else None
        wanted = "json" if name in SCHEMAS else "console"
        if kind != wanted:
            problems.append(f"{_shown(path)}:{marker_line}: <!-- example: {name} --> must be the line right before "
                            f"a ```{wanted} fence; the next line is {following!r}")
            i += 1
            continue
        end = _closing(lines, i + 1, opening.group(0))
        if end == len(lines):
            problems.append(f"{_shown(path)}:{marker_line + 1}: the ```{kind} fence of example {name!r} is never closed")
            break
        example = examples.setdefault(name, Example(name, path, marker_line))
        body = lines[i + 2:end]
        if kind == "json":
            example.json_blocks.append((i + 3, "\n".join(body)))
        else:
            example.commands.extend(_commands(body, path, first_line=i + 3))
        i = end + 1
    return list(examples.values()), problems


def _closing(lines: list[str], opening: int, backticks: str) -> int:
    """The index of the line closing the fence opened at ``opening`` (as many
    backticks or more, nothing after them), or ``len(lines)``."""
    for n in range(opening + 1, len(lines)):
        stripped = lines[n].strip()
        if stripped.startswith(backticks) and not stripped.strip("`"):
            return n
    return len(lines)


def _commands(body: list[str], path: Path, first_line: int) -> list[Command]:
    commands: list[Command] = []
    n = 0
    while n < len(body):
        if not body[n].startswith("$ "):
            n += 1  # text before the first command: not compared
            continue
        line = first_line + n
        parts = [body[n][2:]]
        while parts[-1].endswith("\\") and n + 1 < len(body):
            n += 1
            parts.append(body[n])
        n += 1
        output: list[str] = []
        while n < len(body) and not body[n].startswith("$ "):
            output.append(body[n].rstrip())
            n += 1
        output = _without_trailing_blanks(output)
        commands.append(Command("\n".join(parts), output or None, path, line))
    return commands


def _without_trailing_blanks(lines: list[str]) -> list[str]:
    while lines and not lines[-1]:
        lines = lines[:-1]
    return lines


def matches(expected: list[str], got: list[str]) -> bool:
    """``got`` is ``expected`` line for line, each ``...`` line standing for any
    number of lines (none included)."""
    # can[i][j]: expected[i:] matches got[j:]
    can = [[False] * (len(got) + 1) for _ in range(len(expected) + 1)]
    can[len(expected)][len(got)] = True
    for i in range(len(expected) - 1, -1, -1):
        for j in range(len(got), -1, -1):
            if expected[i] == ELLIPSIS:
                can[i][j] = can[i + 1][j] or (j < len(got) and can[i][j + 1])
            else:
                can[i][j] = j < len(got) and expected[i] == got[j] and can[i + 1][j + 1]
    return can[0][0]


def _aligned(expected: list[str], got: list[str]) -> list[str]:
    """``expected`` with each ``...`` line replaced by the lines of ``got`` it
    stands for, so that a diff shows only the lines that differ: a ``...``
    takes the lines up to the next line of the page it finds (all the rest
    when none follows), and a line that differs is taken as replacing one."""
    shown: list[str] = []
    j = 0
    for i, line in enumerate(expected):
        if line != ELLIPSIS:
            shown.append(line)
            j = min(j + 1, len(got))
            continue
        following = next((later for later in expected[i + 1:] if later != ELLIPSIS), None)
        k = j
        while k < len(got) and got[k] != following:
            k += 1
        shown += got[j:k]
        j = k
    return shown


# -- the models an example talks to -------------------------------------------

@dataclass(frozen=True)
class Scripted:
    """The model answers these, in order, one per call (logist.replay.scripted.answer
    builds them); every one must be asked for."""
    answers: tuple[str, ...] = ()


@dataclass(frozen=True)
class Replayed:
    """A replay server of this recorded fixture (a bundled fixture's name)."""
    fixture: str


Model = Union[Scripted, Replayed]


@contextlib.contextmanager
def serving(model: Model) -> Iterator[Union[ScriptedLLMServer, ReplayLLMServer]]:
    server = (ScriptedLLMServer(model.answers) if isinstance(model, Scripted)
              else ReplayLLMServer(fixture_path(model.fixture)))
    with server:
        yield server


# -- running -------------------------------------------------------------------

def environment(tmp: Path, bin_dir: Path, base_url: str) -> dict[str, str]:
    """What every command of an example runs with: this process's environment
    (the suite's: no real keys, fixed git identity and dates, NO_COLOR,
    COLUMNS=100), ``bin_dir`` first on PATH, a fresh HOME, the model's URL."""
    home = tmp / "home"
    home.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LOGIST_", "OPENAI_"))}
    env.update(HOME=str(home), PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
               LOGIST_BASE_URL=base_url, PYTHONUNBUFFERED="1")
    return env


def run_command(command: Command, cwd: Path, env: dict[str, str], timeout: float = 120) -> list[str]:
    """Run one command; the problems found, each a paragraph naming the page's
    file:line, the command, and what differed."""
    try:
        result = subprocess.run(["bash", "-c", command.text], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
        status, raw = result.returncode, result.stdout
    except subprocess.TimeoutExpired as exc:
        status, raw = None, exc.stdout or b""
    got = _without_trailing_blanks([line.rstrip() for line in raw.decode("utf-8", "replace").splitlines()])
    shown = "\n".join(f"    | {line}" for line in got) or "    (no output)"
    problems = []
    if status is None:
        problems.append(f"{command.where}: `{command.text}` did not finish within {timeout:.0f} s; it printed:\n{shown}")
    elif status not in PASSING_STATUSES:
        problems.append(f"{command.where}: `{command.text}` failed (exit {status}); it printed:\n{shown}")
    if command.expected is not None and not matches(command.expected, got):
        diff = "\n".join(difflib.unified_diff(_aligned(command.expected, got), got, f"{command.where} (the page)",
                                              "what it printed", lineterm="", n=2))
        problems.append(f"{command.where}: `{command.text}` printed other output than the page shows "
                        f"(the page's '...' lines shown as the lines they stood for):\n{diff}")
    return problems


def run_example(example: Example, model: Model, tmp: Path, bin_dir: Path) -> list[str]:
    """Run every command of ``example`` in order in a fresh directory under
    ``tmp``, against a server of ``model``; the problems found (none: it
    passed). Every scripted answer must have been asked for."""
    cwd = tmp / "cwd"
    cwd.mkdir()
    problems: list[str] = []
    with serving(model) as server:
        env = environment(tmp, bin_dir, server.base_url)
        for command in example.commands:
            problems += run_command(command, cwd, env)
        if isinstance(server, ScriptedLLMServer) and server.remaining:
            asked = len(model.answers) - server.remaining
            problems.append(f"{_shown(example.path)}:{example.line}: example {example.name!r}: the test scripts "
                            f"{len(model.answers)} model answers for it, and its commands asked for {asked} "
                            "(the page's commands and the test's script disagree)")
    return problems


def validate_json(example: Example, schemas_dir: Path) -> list[str]:
    """Each ```json block of a config or role example, against its schema."""
    schema = json.loads((schemas_dir / SCHEMAS[example.name]).read_text(encoding="utf-8"))
    validator = jsonschema.Draft202012Validator(schema)
    problems = []
    for line, text in example.json_blocks:
        where = f"{_shown(example.path)}:{line}"
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            problems.append(f"{where}: the {example.name} example is not JSON: {exc.msg} "
                            f"(line {line + exc.lineno - 1}, column {exc.colno})")
            continue
        for error in sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path)):
            at = "/".join(map(str, error.absolute_path)) or "(the top level)"
            problems.append(f"{where}: the {example.name} example does not match "
                            f"schemas/{SCHEMAS[example.name]} at {at}: {error.message}")
    return problems
