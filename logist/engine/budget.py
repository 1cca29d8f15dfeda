"""Budgets and running totals: checked before every call, summed after it.

Cost needs a price for the model in config.json; tokens are counted either
way. Totals live in the manifest and in every history entry after it, so
they survive restarts and rewinds (the calls were paid for).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from ..store.config import LogistConfig
from ..store.manifest import JobManifest

if TYPE_CHECKING:
    from .step import Outcome


def call_cost(config: LogistConfig, model: str, outcome: Outcome) -> Optional[float]:
    price = config.prices.get(model)
    if price is None or outcome.prompt_tokens is None or outcome.completion_tokens is None:
        return None
    return round(
        (outcome.prompt_tokens * price.input_per_million + outcome.completion_tokens * price.output_per_million)
        / 1_000_000,
        8,
    )


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
        totals.llm_calls += 1
        totals.prompt_tokens += outcome.prompt_tokens or 0
        totals.completion_tokens += outcome.completion_tokens or 0
        if not priced:
            totals.unpriced_calls += 1
        elif cost is not None:
            totals.cost_usd = round(totals.cost_usd + cost, 8)
    totals.wall_ms += wall_ms


def limit_reason(manifest: JobManifest) -> Optional[str]:
    """Why the next call must not be sent, or None (budgets, SPEC section 5)."""
    settings, totals = manifest.settings, manifest.totals
    if manifest.calls >= settings.max_steps:
        return f"max steps reached ({manifest.calls} calls of {settings.max_steps})"
    if settings.max_cost_usd is not None and totals.cost_usd >= settings.max_cost_usd:
        return f"cost budget spent (${totals.cost_usd:.4f} of ${settings.max_cost_usd:.4f})"
    if settings.max_tokens is not None and totals.tokens >= settings.max_tokens:
        return f"token budget spent ({totals.tokens} of {settings.max_tokens} tokens)"
    if settings.max_wall_seconds is not None and totals.wall_ms >= settings.max_wall_seconds * 1000:
        return f"time budget spent ({totals.wall_ms / 1000:.1f} s of {settings.max_wall_seconds:g} s)"
    return None
