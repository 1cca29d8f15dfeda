"""One non-interactive run of a coding agent in a job's workspace, contained.

:func:`run_agent` is the whole of it, and shares everything a model's
command has (:mod:`logist.workspace.sandbox`: one way to start and stop a
process that Logist does not trust):

* the prompt goes into a file **outside the workspace** (the agent is given
  its path, or reads it on standard input), and every file of the run (a
  fresh **home** with its XDG folders, ``CODEX_HOME``, ``CLAUDE_CONFIG_DIR``,
  the agent's histories, ``TMPDIR``) lives in a temporary folder of the run,
  removed when it ends: the user's own agent configuration and credentials
  never reach it, and two runs of one role start alike;
* its **environment** is the commands' allowlist
  (:func:`logist.workspace.sandbox.command_env`: never the API key) with
  that home, the gateway's URL and the run's token
  (``OPENAI_BASE_URL``/``OPENAI_API_KEY``, ``ANTHROPIC_BASE_URL``/
  ``ANTHROPIC_API_KEY``), ``LOGIST_EXIT_FILE``, ``LOGIST_PROMPT_FILE`` and
  ``LOGIST_WORKSPACE``, and the provider's own switches;
* it starts in the workspace through the sandbox's launcher, in its own
  process group (recorded through ``recorded`` before it runs), in a PID
  namespace where the system allows it; with ``protect_git`` its ``.git``
  and the folders ``read_only`` are read-only to it where mounts work (it
  then cannot commit: Logist commits its work as any step's); without, it
  may commit, and :class:`AgentRun` reports the range;
* a **timeout**, or Ctrl-C (``KeyboardInterrupt`` goes on up once it is
  done), ends its whole process group (:func:`logist.workspace.sandbox.finish`);
* what it printed goes to temporary files; the run keeps the last ``limit``
  characters of each stream, redacted, and reads its final message from
  the whole standard output (up to :data:`READ_LIMIT` bytes of its end).

What it changed is found with git (the paths that differ from the commit
it started from, untracked files included, and those that were already
changed before it and changed again), and its exit command
by :mod:`logist.agents.exits`.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional, Sequence, Union

from ..errors import LogistError
from ..secrets.redact import redact
from ..workspace import sandbox
from ..workspace.git import run_git
from . import exits
from .exits import ExitCommand
from .providers import AgentProvider, Invocation, find_program, home_variables, provider

#: The most bytes of an agent's standard output read to find its final message (its end).
READ_LIMIT = 8 * 1024 * 1024
#: The most bytes of the exit file read.
EXIT_FILE_LIMIT = 256 * 1024
#: What stands for the run's token where the command line is recorded.
TOKEN_SHOWN = "[run token]"
#: The commit of an empty tree: what a repository without commits is compared with.
_EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"


@dataclass
class AgentRun:
    """What one run of an agent did."""

    agent: str
    #: The command line run (the run's token shown as :data:`TOKEN_SHOWN`), program first.
    argv: list[str]
    #: None when it was stopped (timeout).
    exit_code: Optional[int]
    timed_out: bool
    duration: float
    #: The last ``limit`` characters of each stream, redacted.
    stdout_tail: str
    stderr_tail: str
    #: Its final message, as its provider reads it from its output (redacted); None when it gave none.
    final_message: Optional[str]
    exit: ExitCommand
    #: Workspace paths it changed (added, modified, deleted), sorted.
    changed_files: list[str] = field(default_factory=list)
    head_before: Optional[str] = None
    head_after: Optional[str] = None
    #: The commits it made itself (``git rev-list --count``) when HEAD moved.
    commit_count: int = 0

    @property
    def commits(self) -> Optional[str]:
        """``BEFORE..AFTER`` when the agent moved HEAD (made commits itself), else None."""
        if self.head_after and self.head_after != self.head_before:
            return f"{self.head_before or _EMPTY_TREE}..{self.head_after}"
        return None


def run_agent(agent: Union[str, AgentProvider], workspace: Path, prompt_text: str, gateway_url: str, token: str,
              model: str, timeout: float = 600.0, limit: int = 20_000, *, extra_args: Sequence[str] = (),
              command: Sequence[str] = (), sandbox_mode: str = "auto", env_names: Sequence[str] = (),
              read_only: Sequence[Path] = (), protect_git: bool = True,
              recorded: Optional[Callable[[int, Optional[str]], None]] = None) -> AgentRun:
    """Run ``agent`` once in ``workspace`` (a git repository) on
    ``prompt_text``, against the gateway at ``gateway_url`` (ending in
    ``/v1``) with the run's ``token``, asking for ``model`` (see the module's
    doc). ``command``: the ``command`` agent's argv; ``sandbox_mode``: the
    job's ``command_sandbox``; ``env_names``: variables of Logist's
    environment the job passes to its commands; ``recorded(pgid,
    start_time)``: called before the agent starts (the step's journal)."""
    chosen = provider(agent) if isinstance(agent, str) else agent
    workspace = Path(workspace).absolute()
    base = sandbox.command_env(env_names)
    scratch = Path(tempfile.mkdtemp(prefix=f"logist-agent-{chosen.name}-"))
    try:
        home, state, tmp = scratch / "home", scratch / "state", scratch / "tmp"
        for folder in (home, state, tmp):
            folder.mkdir(mode=0o700)
        prompt_file, exit_file = scratch / "prompt.md", scratch / "exit.json"
        prompt_file.write_text(prompt_text, encoding="utf-8")
        invocation = Invocation(prompt_file=prompt_file, workspace=workspace, base_url=gateway_url, token=token,
                                model=model, home=home, state=state, extra_args=tuple(extra_args),
                                command=tuple(command), git_writable=not protect_git)
        program = find_program(chosen.executable(invocation), base)
        if program is None:
            raise LogistError(f"cannot run the agent '{chosen.name}': no program '{chosen.executable(invocation)}' "
                              f"on PATH ({base.get('PATH', '')})")
        _write_config(home, chosen.config_files(invocation))
        _write_config(home, {".gitconfig": f"[user]\n\tname = {chosen.name} (run by Logist)\n"
                                           "\temail = agent@logist.invalid\n"})
        env = {**base, **_run_env(invocation, tmp, exit_file), **chosen.env(invocation)}
        argv = [program, *chosen.argv(invocation)[1:]]
        line = shlex.join(argv) + (f" <{shlex.quote(str(prompt_file))}" if chosen.prompt_on_stdin else "")
        git = _GitState.read(workspace)
        ran = sandbox.run_contained(line, workspace, env, timeout, lambda handle: sandbox.read_end(handle, READ_LIMIT),
                                    sandbox=sandbox_mode, workspace=workspace if protect_git else None,
                                    read_only=read_only, recorded=recorded)
        exit_code, timed_out, stdout, stderr = ran.exit_code, ran.timed_out, ran.stdout, ran.stderr
        exit_text = _read_exit_file(exit_file)
        exit_text = redact(exit_text) if exit_text is not None else None
        final = chosen.final_message(stdout, stderr)
        final = redact(final) if final is not None else None
        stdout_tail, stderr_tail = redact(_last(stdout, limit)), redact(_last(stderr, limit))
        changed, existing = git.changes(workspace)
        head_after = _head(workspace)
        decided = exits.exit_command(exit_file_text=exit_text, final_message=final, exit_code=exit_code,
                                     timed_out=timed_out, timeout=timeout, changed=changed, existing=existing,
                                     output_tail="\n".join(part for part in (stdout_tail, stderr_tail) if part.strip()))
        return AgentRun(
            agent=chosen.name, argv=[part.replace(token, TOKEN_SHOWN) if token else part for part in argv],
            exit_code=exit_code, timed_out=timed_out, duration=ran.duration, stdout_tail=stdout_tail,
            stderr_tail=stderr_tail, final_message=final, exit=decided, changed_files=changed,
            head_before=git.head, head_after=head_after, commit_count=_count(workspace, git.head, head_after),
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _run_env(invocation: Invocation, tmp: Path, exit_file: Path) -> dict[str, str]:
    """What every agent gets beyond the allowlist: its home, the gateway, the run's files."""
    return {
        **home_variables(invocation.home), "TMPDIR": str(tmp),
        "OPENAI_BASE_URL": invocation.base_url, "OPENAI_API_BASE": invocation.base_url,
        "OPENAI_API_KEY": invocation.token,
        "ANTHROPIC_BASE_URL": invocation.origin, "ANTHROPIC_API_KEY": invocation.token,
        "LOGIST_EXIT_FILE": str(exit_file), "LOGIST_PROMPT_FILE": str(invocation.prompt_file),
        "LOGIST_WORKSPACE": str(invocation.workspace),
    }


def _write_config(home: Path, files: dict[str, str]) -> None:
    for relative, text in files.items():
        target = (home / relative).resolve()
        if not target.is_relative_to(home.resolve()):
            raise LogistError(f"an agent's config file must be inside its home: {relative}")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")


def _last(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[-limit:]


def _read_exit_file(path: Path) -> Optional[str]:
    """The exit file's text (None when the agent wrote none); a file that is
    not a plain file or is too long is read as what it is not: an exit command."""
    try:
        if path.is_symlink() or not path.is_file():
            return None if not path.exists() and not path.is_symlink() else "(not a plain file)"
        with open(path, "rb") as handle:
            data = handle.read(EXIT_FILE_LIMIT + 1)
    except OSError as exc:
        return f"(unreadable: {exc.strerror or exc})"
    if len(data) > EXIT_FILE_LIMIT:
        return f"(longer than {EXIT_FILE_LIMIT} bytes)"
    return data.decode("utf-8", errors="replace")


# --------------------------------------------------------------------------
# What the run changed


def _git(workspace: Path, *args: str) -> Optional[bytes]:
    if not (workspace / ".git").exists():
        return None
    done = run_git(workspace, args, workspace / ".git")
    return done.stdout if done.returncode == 0 else None


def _head(workspace: Path) -> Optional[str]:
    out = _git(workspace, "rev-parse", "--verify", "-q", "HEAD")
    return (out.decode().strip() or None) if out else None


def _count(workspace: Path, before: Optional[str], after: Optional[str]) -> int:
    if not after or after == before:
        return 0
    out = _git(workspace, "rev-list", "--count", after if before is None else f"{before}..{after}")
    return int(out) if out and out.strip().isdigit() else 0


def _paths(out: Optional[bytes]) -> list[str]:
    return [p.decode("utf-8", errors="surrogateescape") for p in (out or b"").split(b"\0") if p]


def _fingerprint(path: Path) -> Optional[str]:
    """What ``path`` holds (a link's target, a file's bytes), as a digest; None when it is not there."""
    try:
        if path.is_symlink():
            return "link:" + os.readlink(path)
        if path.is_dir():
            return "dir"
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


@dataclass
class _GitState:
    """The workspace as the run found it: HEAD, and what was changed already (with its content)."""

    head: Optional[str]
    dirty: dict[str, Optional[str]]

    @classmethod
    def read(cls, workspace: Path) -> "_GitState":
        status = _git(workspace, "--no-optional-locks", "status", "--porcelain", "-z", "--untracked-files=all",
                      "--no-renames", "--ignore-submodules=all")
        dirty = {}
        for entry in _paths(status):
            path = entry[3:]
            dirty[path] = _fingerprint(workspace / path)
        return cls(_head(workspace), dirty)

    def changes(self, workspace: Path) -> tuple[list[str], list[str]]:
        """(every path the run changed, those still there), sorted."""
        base = self.head or _EMPTY_TREE
        tracked = _paths(_git(workspace, "diff", "--name-only", "-z", "--no-renames", "--no-ext-diff",
                              "--ignore-submodules=all", base))
        untracked = _paths(_git(workspace, "ls-files", "--others", "--exclude-standard", "-z"))
        changed = set(tracked) | set(untracked)
        for path, before in self.dirty.items():
            now = _fingerprint(workspace / path)
            if now == before:
                changed.discard(path)
            else:
                changed.add(path)
        ordered = sorted(changed)
        return ordered, [p for p in ordered if (workspace / p).exists() or (workspace / p).is_symlink()]
