"""A coding agent as the model that answers a role's step.

A role that names an ``agent`` has each of its steps answered by one run of
that agent (:func:`logist.agents.run_agent`) instead of one call: the engine
prepares the request as for a model, and :class:`AgentModel` turns it into
the agent's prompt (:func:`prompt_text`), starts a recording
:class:`~logist.model.gateway.Gateway` on the role's endpoint (the real key
stays in it), runs the agent in the job's workspace against the gateway, and
answers with the run's exit command (COMPLETED, STUCK or RETRY, as the
agent gave it or as :mod:`logist.agents.exits` derives it). Everything
after that is the engine's one path for an answer: the answer check, the
workflow's row, the checks after a COMPLETED, the commit and the history
entry. So the model seam is the only place that knows an agent answered,
and adding an agent is adding its provider (:mod:`logist.agents.providers`).

The reply carries the run (:class:`~logist.store.entries.AgentRunRecord`):
each call the gateway forwarded (kept in the job's folder by ``keep_call``
before its answer reached the agent), and the run's work as a binary git
patch against the commit it started from, which is what ``job replay``
applies without the agent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional
from urllib.parse import urlparse

from ..agents import provider, run_agent
from ..agents.providers import CHAT, MESSAGES, RESPONSES, find_program
from ..errors import LLMCallError, LogistError
from ..protocol.answer import answer_json
from ..store.entries import AgentCall, AgentRunRecord
from ..workspace.repository import Workspace
from ..workspace.sandbox import command_env
from .base import Model, Request
from .completions import LLMReply
from .gateway import CHAT as CHAT_MODE, PASSTHROUGH, Exchange, Gateway, Totals

#: The hosts whose endpoints speak an API besides Chat Completions: there the gateway passes calls through.
NATIVE_HOSTS = {RESPONSES: ("api.openai.com",), MESSAGES: ("api.anthropic.com",)}


def gateway_mode(api: str, base_url: str) -> str:
    """How the gateway reaches the role's endpoint for an agent that speaks
    ``api``: as it is (``passthrough``) when the agent speaks Chat
    Completions or the endpoint is its API's own; else translated to Chat
    Completions (``chat``), which is what local servers (llama.cpp, Ollama,
    vLLM) and the OpenAI-compatible endpoints Logist calls speak."""
    if api == CHAT:
        return PASSTHROUGH
    host = (urlparse(base_url).hostname or "").lower()
    return PASSTHROUGH if host in NATIVE_HOSTS.get(api, ()) else CHAT_MODE


def prompt_text(messages: list[dict]) -> str:
    """The request's messages as one text for an agent: the system message
    (what the job is for, the role, how to end), then the turn's messages in
    order (an earlier run's exit command, what came back since)."""
    parts = []
    for number, message in enumerate(messages):
        content = message.get("content")
        if isinstance(content, list):  # parts: their text
            content = "\n".join(part.get("text", "") for part in content if isinstance(part, dict))
        content = (content or "").strip()
        if number == 0 and message.get("role") == "system":
            parts.append(content)
        elif message.get("role") == "assistant":
            parts.append(f"--- Your earlier run ended with ---\n{content}")
        else:
            parts.append(f"--- {message.get('role', 'user').capitalize()} ---\n{content}")
    return "\n\n".join(part for part in parts if part) + "\n"


def call_of(exchange: dict, file: str) -> AgentCall:
    """What a history entry says of one call the gateway recorded
    (:meth:`~logist.model.gateway.Exchange.to_dict`), kept in ``file``."""
    usage = exchange.get("usage") or {}
    return AgentCall(number=exchange.get("number", 0), file=file, api=exchange.get("api") or "",
                     status=exchange.get("status") or 0, input_tokens=usage.get("input_tokens"),
                     output_tokens=usage.get("output_tokens"),
                     duration_ms=round((exchange.get("duration") or 0) * 1000), error=exchange.get("error"))


@dataclass
class AgentTask:
    """One step's run of a role's agent: what the engine gives besides the request."""

    #: The provider's name (the role's ``agent``).
    agent: str
    #: The model the agent is told to use (the role's).
    model: str
    workspace: Path
    #: The commit the run starts from (the workspace is clean there): its work is the patch against it.
    head: str
    #: The job's command timeout and output limit, sandbox and the variables its commands get.
    timeout: float
    limit: int
    sandbox: str
    env_names: tuple[str, ...] = ()
    command: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    #: Keeps call ``number``'s record (before its answer reaches the agent); the file's name.
    keep_call: Callable[[int, dict], str] = lambda number, data: ""
    #: Asked before each call with the run's totals: why it must be refused (a budget), or None.
    budget: Optional[Callable[[Totals], Optional[str]]] = None
    #: Told the agent's process group before it starts (the step's journal).
    started: Optional[Callable[[int, Optional[str]], None]] = None
    calls: list[AgentCall] = field(default_factory=list)


class AgentModel(Model):
    """The model of a step a role's coding agent answers (see the module's doc)."""

    def __init__(self, task: AgentTask, base_url: str, api_key: Optional[str], timeout: float):
        self.task = task
        self.base_url = base_url
        self.api_key = api_key
        #: How long the gateway waits for the endpoint's answer to one call.
        self.timeout = timeout

    def ready(self) -> None:
        """The agent's program is on PATH, else :class:`LogistError` naming it:
        checked before the step changes anything."""
        chosen = provider(self.task.agent)
        name = self.task.command[0] if chosen.name == "command" and self.task.command else chosen.program
        if find_program(name, command_env(self.task.env_names)) is None:
            raise LogistError(f"cannot run the agent '{chosen.name}': no program '{name}' on PATH "
                              "(logist agents lists the agents and where each is found)")

    def complete(self, request: Request) -> LLMReply:
        task = self.task
        try:
            chosen = provider(task.agent)
        except LogistError as exc:
            raise LLMCallError(str(exc), kind="setup") from None

        estimated: list[int] = []

        def record(exchange: Exchange) -> None:
            data = exchange.to_dict()
            task.calls.append(call_of(data, task.keep_call(exchange.number, data)))
            if (exchange.usage or {}).get("estimated"):
                estimated.append(exchange.number)

        with Gateway(self.base_url, self.api_key, mode=gateway_mode(chosen.api, self.base_url), record=record,
                     budget=task.budget, timeout=self.timeout) as gateway:
            try:
                run = run_agent(chosen, task.workspace, prompt_text(request.body.get("messages", [])),
                                gateway.base_url, gateway.token, task.model, timeout=task.timeout, limit=task.limit,
                                extra_args=task.args, command=task.command, sandbox_mode=task.sandbox,
                                env_names=task.env_names, recorded=task.started)
            except LogistError as exc:  # no such program: nothing ran, nothing was asked of a model
                raise LLMCallError(str(exc), kind="setup") from None
            refusal, unrecorded, totals = gateway.refusal, list(gateway.unrecorded), gateway.totals
        patch = Workspace(task.workspace).work_patch(task.head)
        ran = AgentRunRecord(
            agent=chosen.name, argv=run.argv, exit_code=run.exit_code, timed_out=run.timed_out,
            exit_source=run.exit.source, refused=run.exit.refused, final_message=run.final_message,
            stdout_tail=run.stdout_tail, stderr_tail=run.stderr_tail, changed_files=run.changed_files,
            commits=run.commits, calls=sorted(task.calls, key=lambda call: call.number), budget_stop=refusal,
            unrecorded=unrecorded, patch=patch or None,
        )
        notes = [f"the endpoint reported no usage for the agent's call{'s' if len(estimated) > 1 else ''} "
                 f"{', '.join(map(str, sorted(estimated)))}: the tokens were estimated from the text "
                 "(4 characters a token)"] if estimated else []
        return LLMReply(content=answer_json(run.exit.answer), prompt_tokens=totals.input_tokens,
                        completion_tokens=totals.output_tokens, model=task.model, run=ran, notes=notes)
