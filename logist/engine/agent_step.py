"""A step a role's coding agent answers: what its run is given.

The engine makes such a step as any other (:func:`logist.engine.call.make_call`):
the request is prepared, journalled, answered by the call's model, and the
answer applied. :meth:`logist.model.client.Endpoints.model_for` names an
:class:`~logist.model.agent.AgentModel` for a role with an ``agent``; this
module gives it its :class:`~logist.model.agent.AgentTask`: the workspace
and the commit the run starts from, the job's command timeout, output limit,
sandbox and variables, where the gateway's records are kept (the session's
``agent_runs/`` folder, each call before its answer reaches the agent) and
the budget the gateway asks before each call. The budget is the job's own
(:func:`logist.engine.budget.spent_budget` over the totals so far plus the
run's), and the role's ``agent_max_calls``; the run that meets it is refused
its next call at the gateway, and its step stops the job at its budget.
"""

from __future__ import annotations

import time
from typing import Optional

from ..model.agent import AgentTask, call_of
from ..model.gateway import Totals
from ..store.entries import AgentRunRecord
from ..store.manifest import JobManifest
from ..store.session import JobFiles
from .budget import call_cost, spent_budget
from .outcome import Outcome
from .prepare import Prepared


def agent_task(job: JobFiles, manifest: JobManifest, prepared: Prepared, sequence: int) -> Optional[AgentTask]:
    """The run of the prepared step's agent, or None when its role names none
    (or the call is a summary call, which the role's model makes itself)."""
    role = prepared.role
    if role.agent is None or prepared.is_compaction:
        return None
    settings = manifest.settings
    return AgentTask(
        agent=role.agent, model=prepared.model, workspace=job.workspace, head=manifest.workspace_commit or "",
        timeout=settings.command_timeout, limit=settings.command_output_limit, sandbox=settings.command_sandbox,
        env_names=tuple(settings.command_env), command=tuple(role.agent_command), args=tuple(role.agent_args),
        keep_call=lambda number, data: job.session.keep_agent_call(sequence, number, data),
        budget=gateway_budget(manifest, prepared, role.agent_max_calls),
        started=job.session.journal.command_started,
    )


def gateway_budget(manifest: JobManifest, prepared: Prepared, max_calls: int):
    """What the gateway asks before each call of the run: why it must be
    refused (the job's budgets with the run's usage counted, the role's call
    cap), else None."""
    began = time.monotonic()

    def budget(totals: Totals) -> Optional[str]:
        if totals.calls >= max_calls:
            return f"the agent's call limit reached ({totals.calls} of {max_calls} calls: the role's agent_max_calls)"
        probe = manifest.model_copy(deep=True)
        used = Outcome(prompt_tokens=totals.input_tokens, completion_tokens=totals.output_tokens)
        probe.totals.prompt_tokens += totals.input_tokens
        probe.totals.completion_tokens += totals.output_tokens
        cost = call_cost(prepared.config, prepared.model, used)
        if cost is not None:
            probe.totals.cost_usd = round(probe.totals.cost_usd + cost, 8)
        probe.totals.wall_ms += round((time.monotonic() - began) * 1000)
        spent = spent_budget(probe)
        return spent[1] if spent else None

    return budget


def interrupted_run(job: JobFiles, sequence: int, agent: str) -> AgentRunRecord:
    """What is known of a run the process ended during: the calls the gateway kept."""
    return AgentRunRecord(agent=agent, calls=[call_of(data, name) for name, data in job.agent_calls(sequence)],
                          interrupted=True)
