"""Coding agents (aider, Codex, Claude Code, Qwen Code, opencode, any CLI) run
one-shot, headless and contained, as one step of a role.

:mod:`.providers` is the table: what each agent is called, how it is started
in its one-shot mode, what it is given and what it answers with.
:mod:`.runner` runs one of them in a job's workspace under Logist's sandbox
and reads what it did; :mod:`.exits` turns that into an exit command of
Logist's protocol.
"""

from .providers import PROVIDERS, AgentProvider, Invocation, installed_agents, provider
from .runner import AgentRun, run_agent

__all__ = ["PROVIDERS", "AgentProvider", "AgentRun", "Invocation", "installed_agents", "provider", "run_agent"]
