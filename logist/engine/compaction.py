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

A summary call is a step of its own (``job step --oneshot`` still makes one
call). When it fails, the job keeps running on the full conversation and no
new attempt is made until the conversation has grown past that point.
"""

from __future__ import annotations

from typing import Optional

from ..store.manifest import Turn
from ..store.requests import rounds_of
from ..store.roles import RoleManifest

COMPACTION_PROMPT = """\
You keep the working memory of one role in a Logist job. You are given the summary so far (if any) and the newest rounds of the role's conversation with Logist (each round: what Logist told the role, then the role's JSON answer).

Write the updated summary, replacing the old one. Keep everything the role needs to go on: the task and the plan, facts learned about the workspace, decisions and their reasons, files created or changed, commands run and what they showed (exit codes, key errors), questions asked and their answers, and what is still open. Drop chatter and repetition. Be concrete: names, paths, numbers.

Answer with the summary as plain text (no JSON), at most about 400 words."""


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


def request(turn: Turn, role: RoleManifest, upto: int, conversation: list[dict]) -> list[dict]:
    """The messages of the summary call that covers rounds 1..``upto``;
    ``conversation`` is the turn's conversation so far (as sent).

    Nothing in them names the job or where it lives, so a recorded summary
    call matches the same call of the same job under another name."""
    parts = [f"Conversation of the {role.name}."]
    if turn.summary:
        parts.append(f"Summary so far (rounds 1 to {turn.summarised_rounds}):\n{turn.summary}")
    parts.append(f"Rounds to fold in ({turn.summarised_rounds + 1} to {upto}):")
    for number, user, answer in rounds_of(conversation, turn):
        if turn.summarised_rounds < number <= upto:
            parts.append(f"### Round {number}\n[Logist]\n{user}\n[{role.name}]\n{answer}")
    parts.append("Write the updated summary.")
    return [{"role": "system", "content": COMPACTION_PROMPT}, {"role": "user", "content": "\n\n".join(parts)}]


def summary_section(opening: str, turn: Turn) -> str:
    """What the system message gains once rounds are summarised: the turn's
    opening message, then the summary of the rounds it replaces."""
    k = turn.summarised_rounds
    return (
        f"--- This turn so far ---\nThe turn opened with this message:\n{opening}\n\n"
        f"Summary of rounds 1 to {k} (the rounds after it follow as they were):\n{turn.summary}"
    )


def kept_rounds(conversation: list[dict], turn: Turn) -> list[dict]:
    """The messages of the rounds the summary does not cover."""
    messages: list[dict] = []
    for number, user, answer in rounds_of(conversation, turn):
        if number > turn.summarised_rounds:
            messages += [{"role": "user", "content": user}, {"role": "assistant", "content": answer}]
    return messages
