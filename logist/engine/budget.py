"""Budgets and running totals: checked before every call, summed after it.

:data:`BUDGETS` names the settings that are budgets: ``job create``, ``job
set`` and ``job resubmit`` make their budget options from those fields of
:class:`logist.engine.create.JobSpec`, so the three cannot differ.

Cost needs a price for the model (shipped with Logist or in config.json); tokens are counted either
way. Totals live in the manifest and in every history entry after it, so
they survive restarts and rewinds (the calls were paid for).
"""

from __future__ import annotations

from typing import Optional

from ..store.config import LogistConfig
from ..store.manifest import JobManifest, Status
from ..store.session import JobFiles
from .outcome import Outcome



#: The settings that are budgets, with the option that sets each (``job
#: create``, ``job set``, ``job resubmit``), in the order they are checked.
BUDGETS = {
    "max_steps": "--max-steps",
    "max_cost_usd": "--max-cost",
    "max_tokens": "--max-tokens",
    "max_wall_seconds": "--max-wall-seconds",
}
#: The settings ``job set`` and ``job resubmit`` change: the budgets, and
#: the limit on an answer's size (a job an answer over it stopped is
#: resubmitted once it is raised).
SETTABLE = {**BUDGETS, "max_answer_bytes": "--max-answer-bytes"}


def call_cost(config: LogistConfig, model: str, outcome: Outcome) -> Optional[float]:
    price = config.price(model)
    if price is None or outcome.prompt_tokens is None or outcome.completion_tokens is None:
        return None
    return round(
        (outcome.prompt_tokens * price.input_per_million + outcome.completion_tokens * price.output_per_million)
        / 1_000_000,
        8,
    )


def count_call(after: JobManifest, config: LogistConfig, model: str, outcome: Outcome, kind: str) -> tuple[Optional[float], bool]:
    """Price one applied answer and count it in ``after``'s totals (see
    :func:`add_to_totals`); returns its cost and whether the model has a price."""
    cost, priced = call_cost(config, model, outcome), config.price(model) is not None
    add_to_totals(after, outcome, cost, outcome.wall_ms(), priced=priced, kind=kind)
    return cost, priced


def add_to_totals(
    after: JobManifest, outcome: Outcome, cost: Optional[float], wall_ms: int, priced: bool,
    kind: str = "llm_call",
) -> None:
    """Count one applied answer. Only a real call (``llm_call``, or a
    ``compaction`` that was not replayed) counts as a call with tokens and
    cost; a replayed or posted answer is counted apart. ``wall_ms``: the
    step's whole time (call, apply, commit, command), for the wall budget."""
    totals = after.totals
    if kind == "replay":
        totals.replayed += 1
    elif kind == "poststep":
        totals.posted += 1
    else:
        totals.llm_calls += outcome.calls
        totals.prompt_tokens += outcome.prompt_tokens or 0
        totals.completion_tokens += outcome.completion_tokens or 0
        if not priced:
            totals.unpriced_calls += 1
        elif cost is not None:
            totals.cost_usd = round(totals.cost_usd + cost, 8)
    totals.wall_ms += wall_ms


def spent_budget(manifest: JobManifest) -> Optional[tuple[str, str]]:
    """The first budget that is spent, as (its setting, why), or None."""
    settings, totals = manifest.settings, manifest.totals
    if manifest.calls >= settings.max_steps:
        return "max_steps", f"max steps reached ({manifest.calls} of {settings.max_steps} steps)"
    if settings.max_cost_usd is not None and totals.cost_usd >= settings.max_cost_usd:
        return "max_cost_usd", f"cost budget spent (${totals.cost_usd:.4f} of ${settings.max_cost_usd:.4f})"
    if settings.max_tokens is not None and totals.tokens >= settings.max_tokens:
        return "max_tokens", f"token budget spent ({totals.tokens} of {settings.max_tokens} tokens)"
    if settings.max_wall_seconds is not None and totals.wall_ms >= settings.max_wall_seconds * 1000:
        return "max_wall_seconds", f"time budget spent ({totals.wall_ms / 1000:.1f} s of {settings.max_wall_seconds:g} s)"
    return None


def limit_reason(manifest: JobManifest) -> Optional[str]:
    """Why the next call must not be sent, or None (budgets, SPEC section 5)."""
    spent = spent_budget(manifest)
    return spent[1] if spent else None


def raise_hint(job_id: str, manifest: JobManifest) -> Optional[str]:
    """How to raise the budget that is spent, or None when none is."""
    spent = spent_budget(manifest)
    if spent is None:
        return None
    return f"{spent[1]}; raise it: logist job set {job_id} {BUDGETS[spent[0]]} N"


#: A person's actions that leave a job where it waits (they are looked past
#: when asking why it waits).
_PASSING_ACTIONS = ("set", "suspend", "resume")


def stopped_by_budget(job: JobFiles, manifest: JobManifest) -> bool:
    """Whether the job waits for a person because a budget stopped it.

    It does when it is INTERVENTION_REQUIRED and the entry that stopped it is
    a ``limit`` entry, or a coding agent's run the gateway stopped at a budget. Reading back from the last entry, a person's ``set``,
    ``suspend`` and ``resume`` and a repair are looked past, and a rewind
    leads to the entry it returned to; only those few entries are read.
    """
    if manifest.status != Status.INTERVENTION_REQUIRED:
        return False
    sequence = manifest.last_sequence
    while sequence >= 1:
        entry = job.entry(sequence)
        if entry.kind == "limit" or (entry.agent is not None and entry.agent.budget_stop is not None):
            return True
        if entry.kind == "rewind" and entry.rewound_to is not None and entry.rewound_to < sequence:
            sequence = entry.rewound_to
        elif entry.kind == "repair" or (
            entry.kind == "user_action" and entry.user_input is not None
            and entry.user_input.action in _PASSING_ACTIONS
        ):
            sequence -= 1
        else:
            return False
    return False
