"""Context compaction (SPEC section 7): long conversations summarised.

A role with ``prompt_compression`` keeps its conversation within bounds:
once more than ``compaction_threshold`` rounds are not yet summarised, a
separate LLM call folds all but the last ``compaction_retain_recent`` of them
into a running summary (updating the previous one). The prompt then shows the
turn's opening message and the summary in place of those rounds; the recent
rounds stay whole. The summary and how many rounds it covers live in the
turn (manifest), and the call is recorded in the history like any other, so
a restart never redoes it and a replay repeats it exactly.

A summary call is a step of its own (``job step --oneshot`` still makes one
call). When it fails, the job keeps running on the full conversation and no
new attempt is made until the conversation has grown past that point.
"""

from __future__ import annotations

from typing import Optional

from ..store.manifest import Turn
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


def request(turn: Turn, role: RoleManifest, upto: int) -> list[dict]:
    """The messages of the summary call that covers rounds 1..``upto``.

    Nothing in them names the job or where it lives, so a recorded summary
    call matches the same call of the same job under another name."""
    parts = [f"Conversation of the {role.name}."]
    if turn.summary:
        parts.append(f"Summary so far (rounds 1 to {turn.summarised_rounds}):\n{turn.summary}")
    parts.append(f"Rounds to fold in ({turn.summarised_rounds + 1} to {upto}):")
    for index in range(turn.summarised_rounds, upto):
        user, answer = turn.messages[2 * index], turn.messages[2 * index + 1]
        parts.append(f"### Round {index + 1}\n[Logist]\n{user.content}\n[{role.name}]\n{answer.content}")
    parts.append("Write the updated summary.")
    return [{"role": "system", "content": COMPACTION_PROMPT}, {"role": "user", "content": "\n\n".join(parts)}]


def conversation(turn: Turn, pending: dict) -> list[dict]:
    """The turn's messages as sent: summarised rounds replaced by the summary.

    ``pending`` is the next user message. The opening message (which states
    the job) and the summary are put in front of the first message kept
    whole, so user and assistant messages still alternate.
    """
    messages = [m.model_dump() for m in turn.messages] + [pending]
    k = turn.summarised_rounds
    if not turn.summary or k == 0:
        return messages
    opening = messages[0]["content"]
    kept = messages[2 * k :]
    first = kept[0]
    kept[0] = {
        "role": "user",
        "content": (
            f"{opening}\n\n--- Summary of rounds 1 to {k} of this conversation ---\n{turn.summary}\n\n"
            f"--- Round {k + 1} ---\n{first['content']}"
        ),
    }
    return kept
