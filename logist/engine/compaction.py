"""Context compaction (SPEC section 7): long conversations summarised.

A role with ``prompt_compression`` keeps its conversation within bounds:
once more than ``compaction_threshold`` rounds are not yet summarised, a
separate LLM call folds all but the last ``compaction_retain_recent`` of them
into a running summary (updating the previous one). The next call's system
message then ends with the turn's opening message and the summary, in place
of those rounds; the recent rounds follow whole, as they were. The summary
and how many rounds it covers live in the turn (manifest), and the call is
recorded in the history like any other, so a restart never redoes it and a
replay repeats it exactly.

Its words are the prompt templates ``compaction/system``,
``compaction/request``, ``compaction/round`` and ``compaction/summary``
(:mod:`logist.store.prompts`); the summary section also recalls, word for
word, what the person answered during the turn.

A summary call is a step of its own (``job step --oneshot`` still makes one
call). When it fails, the job keeps running on the full conversation and no
new attempt is made until the conversation has grown past that point.
"""

from __future__ import annotations

from typing import Optional

from ..store.manifest import Turn
from ..store.prompts import Prompts, builtin
from ..store.requests import rounds_of
from ..store.roles import RoleManifest


def due(turn: Turn, role: RoleManifest) -> Optional[int]:
    """The number of rounds the summary should cover now, or None."""
    if not role.prompt_compression:
        return None
    rounds = turn.rounds
    if turn.compaction_failed_at is not None and rounds <= turn.compaction_failed_at:
        return None
    if rounds - turn.summarised_rounds <= role.compaction_threshold:
        return None
    target = rounds - role.compaction_retain_recent
    return target if target > turn.summarised_rounds else None


def forced(turn: Turn, role: RoleManifest) -> Optional[int]:
    """The rounds a summary covers when the next call would not fit the
    model's context window: all but the last ``compaction_retain_recent``,
    whatever the threshold; None when the role does not compact or nothing
    more can be summarised."""
    if not role.prompt_compression:
        return None
    target = turn.rounds - role.compaction_retain_recent
    return target if target > turn.summarised_rounds else None


def request(
    turn: Turn, role: RoleManifest, upto: int, conversation: list[dict], prompts: Optional[Prompts] = None
) -> list[dict]:
    """The messages of the summary call that covers rounds 1..``upto``;
    ``conversation`` is the turn's conversation so far (as sent).

    Nothing in them names the job or where it lives, so a recorded summary
    call matches the same call of the same job under another name."""
    prompts = prompts or builtin()
    rounds = [
        prompts.render("compaction/round", number=str(number), message=user, role=role.name, answer=answer)
        for number, user, answer in rounds_of(conversation, turn)
        if turn.summarised_rounds < number <= upto
    ]
    text = prompts.render(
        "compaction/request",
        role=role.name,
        summarised_rounds=str(turn.summarised_rounds) if turn.summary else None,
        summary=turn.summary or None,
        first=str(turn.summarised_rounds + 1),
        last=str(upto),
        rounds="\n\n".join(rounds) or None,
    )
    return [{"role": "system", "content": prompts.render("compaction/system")}, {"role": "user", "content": text}]


def summary_section(opening: str, turn: Turn, prompts: Optional[Prompts] = None, memory: Optional[str] = None) -> str:
    """What the system message gains once rounds are summarised: the turn's
    opening message, the summary of the rounds it replaces, and ``memory``
    (what the person answered during the turn)."""
    return (prompts or builtin()).render(
        "compaction/summary", opening=opening, summarised_rounds=str(turn.summarised_rounds), summary=turn.summary,
        memory=memory,
    )


def kept_rounds(conversation: list[dict], turn: Turn) -> list[dict]:
    """The messages of the rounds the summary does not cover."""
    messages: list[dict] = []
    for number, user, answer in rounds_of(conversation, turn):
        if number > turn.summarised_rounds:
            messages += [{"role": "user", "content": user}, {"role": "assistant", "content": answer}]
    return messages
