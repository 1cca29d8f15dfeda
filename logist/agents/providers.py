"""The coding agents Logist can run as a role's step: one class each, in one table.

An agent provider says everything about one agent that differs from the
next, and nothing else:

* its **program** (found on ``PATH``) and how it tells its version
  (:func:`version`; ``logist doctor`` lists :func:`installed_agents`);
* the **argv of its one-shot mode** (:meth:`AgentProvider.argv`) for one
  :class:`Invocation`: the prompt file, the workspace, the gateway's base URL
  (ending in ``/v1``), the run's token, the model's name and the role's
  extra arguments; and whether it reads the prompt on its standard input;
* the **variables** it needs beyond those every agent gets (the runner sets
  ``OPENAI_BASE_URL``/``OPENAI_API_KEY`` and ``ANTHROPIC_BASE_URL``/
  ``ANTHROPIC_API_KEY`` to the gateway and the run's token for all of
  them), above all each agent's own switches that keep it off every host
  but the gateway: no update check, telemetry, analytics, error report,
  model list or plugin download;
* the **configuration files** to write into its fresh home
  (:meth:`AgentProvider.config_files`);
* which **API** it speaks (:data:`CHAT`, :data:`RESPONSES`,
  :data:`MESSAGES`): the gateway's mode for it;
* how its **final message** is read from what it printed
  (:meth:`AgentProvider.final_message`).

What each line is for was found by running each agent headless against a
local server in a network namespace with loopback only (the
versions are :data:`PINNED`): with these settings none of them looked up any
other host, and without them each tried at least one.

Each is run by the tests (tests/agents/; ``.ci/agents.sh`` installs aider,
Codex and Claude Code, and with ``--more`` Qwen Code and opencode). Qwen
Code and opencode take the prompt as an argument, so a prompt must stay
under the system's limit for one argument (128 KiB on Linux); the others
read it from a file or standard input.

Adding an agent is adding one class here with ``@register``: its
attributes are the data above (argv, variables, files as templates with
placeholders such as ``{base_url}`` and ``{model}``, :func:`fill`), and a
method only where it differs in kind. An agent
program is taken from ``PATH`` as the user installed it (unlike git, which
Logist runs itself: :mod:`logist.programs`): it runs inside the sandbox,
never beside Logist.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Optional, Sequence

from ..errors import LogistError
from ..workspace.sandbox import command_env

#: The APIs an agent speaks, as the gateway names its modes.
CHAT = "chat"            # OpenAI Chat Completions
RESPONSES = "responses"  # OpenAI Responses
MESSAGES = "messages"    # Anthropic Messages
APIS = (CHAT, RESPONSES, MESSAGES)

#: The versions the agent tests install (.ci/agents.sh) and that this table was written against.
PINNED = {"aider": "0.86.2", "codex": "0.171.0", "claude-code": "2.1.197", "qwen-code": "0.15.10",
          "opencode": "1.18.33"}


@dataclass(frozen=True)
class Invocation:
    """What one run gives its agent. Every path is absolute; ``home`` and
    ``state`` are fresh folders of this run, outside the workspace."""

    prompt_file: Path
    workspace: Path
    #: The gateway's base URL, ending in ``/v1``.
    base_url: str
    #: Valid for this run only; the only key the agent ever holds.
    token: str
    model: str
    home: Path
    #: The run's own files the agent is pointed at (histories, model metadata), never in the workspace.
    state: Path
    extra_args: tuple[str, ...] = ()
    #: The ``command`` provider's argv, ``{prompt_file}`` and ``{workspace}`` to fill in.
    command: tuple[str, ...] = ()
    #: Whether the agent may write the workspace's ``.git`` (commit); else it is read-only to it.
    git_writable: bool = False

    @property
    def origin(self) -> str:
        """The base URL without its ``/v1`` (what Anthropic's clients append ``/v1/messages`` to)."""
        return self.base_url[:-3] if self.base_url.endswith("/v1") else self.base_url


#: The placeholders of a provider's data (:func:`fill`): what one :class:`Invocation` gives.
PLACEHOLDERS = ("prompt_file", "prompt", "workspace", "base_url", "origin", "token", "model", "home", "state")


def fill(value, invocation: Invocation, names: Sequence[str] = PLACEHOLDERS):
    """``value`` (a string, or lists and objects of them, keys too) with each
    ``{NAME}`` of ``names`` replaced by what ``invocation`` gives (``prompt``:
    the prompt's text); no other brace is touched, and what is filled in is
    never read again for placeholders."""
    if isinstance(value, dict):
        return {fill(key, invocation, names): fill(item, invocation, names) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [fill(item, invocation, names) for item in value]
    if not isinstance(value, str):
        return value
    pattern = re.compile(r"\{(" + "|".join(names) + r")\}")
    return pattern.sub(lambda match: _given(invocation, match.group(1)), value)


def _given(invocation: Invocation, name: str) -> str:
    if name == "prompt":
        return invocation.prompt_file.read_text(encoding="utf-8")
    return str(getattr(invocation, name))


def home_variables(home: Path) -> dict[str, str]:
    """A fresh home and its XDG folders: every run of an agent, and every probe of its version, is given one."""
    return {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), "XDG_DATA_HOME": str(home / ".local/share"),
            "XDG_CACHE_HOME": str(home / ".cache"), "XDG_STATE_HOME": str(home / ".local/state")}


class AgentProvider:
    """One agent, as data: a subclass fills in the class attributes (the
    strings hold placeholders, :data:`PLACEHOLDERS`, filled by :func:`fill`
    for each run); only what differs in kind, not in data, is a method it
    overrides (Codex's final message, the ``command`` agent's argv)."""

    #: Its name in a role file (``"agent": NAME``).
    name: ClassVar[str]
    #: The program, looked up on ``PATH``.
    program: ClassVar[str]
    #: The API it calls: :data:`CHAT`, :data:`RESPONSES` or :data:`MESSAGES`.
    api: ClassVar[str] = CHAT
    #: What it is, in a line (``logist agents``).
    description: ClassVar[str] = ""
    #: The argv tail that prints its version.
    version_args: ClassVar[tuple[str, ...]] = ("--version",)
    #: Its standard input is the prompt file (else ``/dev/null``).
    prompt_on_stdin: ClassVar[bool] = False
    #: Its one-shot mode's arguments, after the program and before the role's ``agent_args``.
    arguments: ClassVar[tuple[str, ...]] = ()
    #: Added to :attr:`arguments` where the workspace's ``.git`` is read-only to it.
    arguments_without_git: ClassVar[tuple[str, ...]] = ()
    #: The arguments after the role's ``agent_args`` (``{prompt}``: the prompt as an argument).
    last_arguments: ClassVar[tuple[str, ...]] = ()
    #: Variables beyond those every agent gets (see the module's doc).
    variables: ClassVar[dict[str, str]] = {}
    #: Files to write before it starts: path relative to its home -> text, or a JSON value written as JSON.
    files: ClassVar[dict[str, object]] = {}
    #: The keys of its JSON output's last event that hold its final message (none: its output is the message).
    result_keys: ClassVar[tuple[str, ...]] = ()

    def executable(self, invocation: Optional[Invocation] = None) -> str:
        """The program to look up on ``PATH``."""
        return self.program

    def argv(self, invocation: Invocation) -> list[str]:
        """The command line of one non-interactive run, program first."""
        middle = (*self.arguments, *(() if invocation.git_writable else self.arguments_without_git))
        return [self.executable(invocation), *fill(middle, invocation), *invocation.extra_args,
                *fill(self.last_arguments, invocation)]

    def env(self, invocation: Invocation) -> dict[str, str]:
        """Variables beyond those every agent gets (see the module's doc)."""
        return fill(self.variables, invocation)

    def config_files(self, invocation: Invocation) -> dict[str, str]:
        """Files to write before it starts: path relative to its home -> text."""
        return {fill(path, invocation): text if isinstance(text, str) else json.dumps(text, indent=1)
                for path, text in fill(self.files, invocation).items()}

    def final_message(self, stdout: str, stderr: str) -> Optional[str]:
        """Its last message, from what it printed; None when there is none:
        with :attr:`result_keys`, the first of them that holds a string in
        the last JSON event that has one (its output one JSON value, an
        object or a list of events, or JSON objects among other lines); else
        all it printed."""
        if not self.result_keys:
            return stdout.strip() or None
        try:
            data = json.loads(stdout)
        except ValueError:
            data = json_objects(stdout)
        for event in reversed(data if isinstance(data, list) else [data]):
            if isinstance(event, dict):
                for key in self.result_keys:
                    if isinstance(event.get(key), str):
                        return event[key]
        return None


PROVIDERS: dict[str, AgentProvider] = {}


def register(cls: type[AgentProvider]) -> type[AgentProvider]:
    """Add a provider to :data:`PROVIDERS` under its name."""
    if cls.api not in APIS:
        raise ValueError(f"{cls.__name__}.api must be one of {', '.join(APIS)}")
    PROVIDERS[cls.name] = cls()
    return cls


def provider(name: str) -> AgentProvider:
    """The provider called ``name``, or :class:`LogistError` naming those there are."""
    try:
        return PROVIDERS[name]
    except KeyError:
        raise LogistError(f"no agent '{name}' (known: {', '.join(PROVIDERS)})") from None


def json_objects(text: str) -> list:
    """Every top-level JSON object in ``text``, in order (prose, log lines
    and fences around them are skipped)."""
    decoder = json.JSONDecoder()
    found, position = [], 0
    while (start := text.find("{", position)) != -1:
        try:
            value, end = decoder.raw_decode(text, start)
        except ValueError:
            position = start + 1
            continue
        if isinstance(value, dict):
            found.append(value)
        position = end
    return found


def last_json_object(text: str) -> Optional[dict]:
    """The last top-level JSON object in ``text``, or None."""
    objects = json_objects(text)
    return objects[-1] if objects else None


@register
class Aider(AgentProvider):
    name = "aider"
    program = "aider"
    api = CHAT
    description = "aider (PyPI aider-chat): edits parsed from the model's text, no tools"
    arguments = (
        "--message-file", "{prompt_file}", "--yes-always", "--no-auto-commits", "--no-dirty-commits",
        "--no-gitignore", "--openai-api-base", "{base_url}", "--openai-api-key", "{token}",
        "--model", "openai/{model}", "--model-metadata-file", "{home}/.aider.model.metadata.json",
        "--no-show-model-warnings", "--no-check-update", "--no-show-release-notes", "--analytics-disable",
        # No repository map (its tags cache would be written into the workspace), no scraping of a URL
        # the prompt names, no .env of the workspace read for keys.
        "--map-tokens", "0", "--no-detect-urls", "--env-file", "{state}/aider.env", "--no-pretty", "--no-fancy-input",
        "--chat-history-file", "{state}/aider.chat.history.md", "--input-history-file", "{state}/aider.input.history",
    )
    # Where .git is read-only to it, aider's "git add" of a new file fails, and it then leaves the file
    # empty: it must not use git at all.
    arguments_without_git = ("--no-git",)
    # litellm's cost map from the package, not fetched from its repository at import.
    variables = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "AIDER_ANALYTICS": "false", "AIDER_CHECK_UPDATE": "false"}
    # Without metadata aider warns of an unknown model and assumes a small window.
    files = {".aider.model.metadata.json": {"openai/{model}": {
        "max_tokens": 8192, "max_input_tokens": 32768, "max_output_tokens": 8192,
        "input_cost_per_token": 0.0, "output_cost_per_token": 0.0, "litellm_provider": "openai", "mode": "chat",
    }}}


@register
class Codex(AgentProvider):
    name = "codex"
    program = "codex"
    api = RESPONSES
    description = "OpenAI Codex CLI (npm @openai/codex): codex exec, Responses API only"
    prompt_on_stdin = True
    arguments = (
        "exec", "-c", "model_provider=logist",
        "-c", 'model_providers.logist={name="logist",base_url="{base_url}",env_key="OPENAI_API_KEY",wire_api="responses"}',
        "--model", "{model}", "-c", "analytics.enabled=false", "-c", "features.plugins=false",
        # Logist's sandbox holds it; its own (bubblewrap) would nest inside that.
        "--dangerously-bypass-approvals-and-sandbox", "--ephemeral", "--skip-git-repo-check", "--json",
    )
    last_arguments = ("-",)  # the prompt on standard input
    variables = {"CODEX_HOME": "{home}/.codex"}
    files = {".codex/config.toml": "# Written by Logist for one run: everything is on the command line.\n"}

    def final_message(self, stdout: str, stderr: str) -> Optional[str]:
        """The last agent message of its ``--json`` events (one JSON object a line)."""
        last = None
        for line in stdout.splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if not isinstance(event, dict):
                continue
            item = event.get("item") if isinstance(event.get("item"), dict) else {}
            msg = event.get("msg") if isinstance(event.get("msg"), dict) else {}
            if event.get("type") == "item.completed" and item.get("type") in ("agent_message", "assistant_message"):
                last = item.get("text", last)
            elif msg.get("type") == "agent_message":
                last = msg.get("message", last)
        return last


@register
class ClaudeCode(AgentProvider):
    name = "claude-code"
    program = "claude"
    api = MESSAGES
    description = "Claude Code (npm @anthropic-ai/claude-code): claude -p, Anthropic Messages API"
    prompt_on_stdin = True
    # acceptEdits: in the default mode its file writes are denied and it still exits 0.
    arguments = ("-p", "--output-format", "json", "--permission-mode", "acceptEdits", "--model", "{model}")
    variables = {
        "ANTHROPIC_MODEL": "{model}", "ANTHROPIC_SMALL_FAST_MODEL": "{model}",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1", "DISABLE_AUTOUPDATER": "1", "CLAUDE_CONFIG_DIR": "{home}/.claude",
    }
    result_keys = ("result",)  # of its --output-format json object


@register
class QwenCode(AgentProvider):
    name = "qwen-code"
    program = "qwen"
    api = CHAT
    description = "Qwen Code (npm @qwen-code/qwen-code): qwen --yolo, Chat Completions"
    # Without --yolo its headless mode drops the write and shell tools and exits 0 having done nothing.
    arguments = ("--yolo", "--auth-type", "openai", "--output-format", "json")
    last_arguments = ("{prompt}",)
    variables = {"OPENAI_MODEL": "{model}"}
    files = {".qwen/settings.json": {"privacy": {"usageStatisticsEnabled": False}, "telemetry": {"enabled": False}}}
    result_keys = ("result", "response")  # of its JSON output: one object, or a list of events


@register
class Opencode(AgentProvider):
    name = "opencode"
    program = "opencode"
    api = CHAT
    description = "opencode (npm opencode-ai): opencode run, Chat Completions through @ai-sdk/openai-compatible"
    arguments = ("run", "--model", "logist/{model}")
    last_arguments = ("{prompt}",)
    # It still installs @opencode-ai/plugin into its config folder in the background, from the npm
    # registry, and no setting stops that (a node_modules/ made beforehand, with a package-lock.json
    # listing it, does; not done here).
    variables = {name: "1" for name in ("OPENCODE_DISABLE_MODELS_FETCH", "OPENCODE_DISABLE_AUTOUPDATE",
                                        "OPENCODE_DISABLE_DEFAULT_PLUGINS", "OPENCODE_DISABLE_LSP_DOWNLOAD",
                                        "OPENCODE_DISABLE_SHARE")}
    files = {".config/opencode/opencode.json": {
        "provider": {"logist": {"npm": "@ai-sdk/openai-compatible", "name": "Logist's gateway",
                                "options": {"baseURL": "{base_url}", "apiKey": "{token}"},
                                "models": {"{model}": {}}}},
        "model": "logist/{model}", "autoupdate": False, "share": "disabled", "snapshot": False,
    }}


@register
class Command(AgentProvider):
    """Any program: ``agent_command`` is its argv, ``{prompt_file}`` and
    ``{workspace}`` filled in; its final message is the last JSON object it
    printed (else all it printed)."""

    name = "command"
    program = ""
    api = CHAT
    description = "any program: agent_command's argv, {prompt_file} and {workspace} filled in"
    version_args = ()

    def executable(self, invocation: Optional[Invocation] = None) -> str:
        if invocation is None or not invocation.command:
            raise LogistError("the agent 'command' needs agent_command: the argv to run, "
                              "e.g. [\"my-agent\", \"--prompt-file\", \"{prompt_file}\"]")
        return invocation.command[0]

    def argv(self, invocation: Invocation) -> list[str]:
        self.executable(invocation)
        return fill(invocation.command, invocation, ("prompt_file", "workspace")) + list(invocation.extra_args)

    def final_message(self, stdout: str, stderr: str) -> Optional[str]:
        found = last_json_object(stdout)
        if found is not None:
            return json.dumps(found, ensure_ascii=False)
        return stdout.strip() or None


# --------------------------------------------------------------------------
# Which are installed


@dataclass(frozen=True)
class Installed:
    """An agent found on ``PATH``: its provider's name, the program's path, its version."""

    name: str
    path: str
    version: Optional[str]


#: A version probe's variables: no agent calls home while it answers ``--version``.
QUIET = {"DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1",
         "AIDER_CHECK_UPDATE": "false", "AIDER_ANALYTICS": "false", "OPENCODE_DISABLE_AUTOUPDATE": "1"}

_VERSION = re.compile(r"\d+\.\d+(?:\.\d+)?(?:[-.+][0-9A-Za-z.]+)?")


def find_program(name: str, env: Optional[dict] = None) -> Optional[str]:
    """The absolute path of program ``name`` on ``PATH`` (Logist's, or ``env``'s), or None."""
    path = (env if env is not None else command_env()).get("PATH", os.defpath)
    found = shutil.which(name, path=path)
    return os.path.abspath(found) if found else None


def version(agent: AgentProvider, path: Optional[str] = None, timeout: float = 30.0) -> Optional[str]:
    """The version agent's program reports (``aider 0.86.2`` -> ``0.86.2``), or
    None when it is not installed or says none. The program runs with the
    commands' allowlisted environment and a scratch home, so a probe
    neither sees a key nor writes into the user's home."""
    if not agent.version_args:
        return None
    path = path or find_program(agent.executable())
    if path is None:
        return None
    with tempfile.TemporaryDirectory(prefix="logist-agent-version-") as home:
        env = {**command_env(), **home_variables(Path(home)), "CODEX_HOME": f"{home}/.codex", **QUIET}
        try:
            done = subprocess.run([path, *agent.version_args], stdin=subprocess.DEVNULL, capture_output=True,
                                  env=env, cwd=home, timeout=timeout, start_new_session=True)
        except (OSError, subprocess.SubprocessError):
            return None
    text = (done.stdout or done.stderr).decode("utf-8", errors="replace")
    match = _VERSION.search(text)
    return match.group(0) if match else None


def installed_agents(names: Optional[Sequence[str]] = None) -> list[Installed]:
    """The agents of :data:`PROVIDERS` (or of ``names``) whose program is on
    ``PATH``, with their versions (``logist doctor``). ``command`` has no
    program of its own and is never listed."""
    found = []
    for name in names or PROVIDERS:
        agent = provider(name)
        if not agent.program:
            continue
        path = find_program(agent.program)
        if path is not None:
            found.append(Installed(name, path, version(agent, path)))
    return found
