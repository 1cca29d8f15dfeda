"""Building the exact messages of the next call.

``messages`` = one system message, then the turn's conversation. The system
message is the protocol (how to answer), the optional context file, the
role's instructions, and the active skill when the job has one. The turn
opens with a message stating the job; each later user message reports what
happened since the model's last answer. Every user message ends with
``[Call N of MAX]`` so the model knows how many calls the job has left.

The first call of a turn (and the first after a compaction) is built whole
from the manifest and the files it names; a later call is the turn's
conversation so far, read back from the history, plus the new user message
(:attr:`Prompt.continues`, :attr:`Prompt.added`), which is also how the
history records it. So ``job preview`` shows exactly what a step would send,
and a poststep records the same prompt a live step would have sent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from ..protocol import answer_reminder, protocol_text
from ..store.manifest import JobManifest
from ..store.requests import HistoryReader
from ..store.roles import RoleManifest, answer_protocol
from . import compaction
from ..store.manifest import PLANNER, SUPERVISOR

FILE_LIMIT = 20_000
TOTAL_FILES_LIMIT = 100_000

# The protocol part is generated from logist/protocol.py, its one definition.
PROTOCOL_PROMPT = protocol_text()


@dataclass
class Prompt:
    messages: list[dict]
    files_context: list[str] = field(default_factory=list)
    #: The entry whose request and answer these messages extend, or None
    #: when the messages are a prompt in full.
    continues: Optional[int] = None
    #: With ``continues``: the messages added after that entry's answer.
    added: list[dict] = field(default_factory=list)

    def record(self) -> dict:
        """The request's messages as the history records them."""
        if self.continues is None:
            return {"prompt": self.messages}
        return {"continues": self.continues, "added": self.added}


def context_text(workspace: Path, jobs_dir: Path) -> Optional[str]:
    """``<workspace>/.logist/context.md``, else ``<jobs-dir>/context.md``."""
    for candidate in (workspace / ".logist" / "context.md", jobs_dir / "context.md"):
        if candidate.is_file():
            return candidate.read_text(encoding="utf-8", errors="replace").strip()
    return None


def system_prompt(
    role: RoleManifest,
    context: Optional[str],
    skill: Optional[tuple[str, str]] = None,
    addressable: Optional[list[RoleManifest]] = None,
    protocol: str = "json",
) -> str:
    parts = [protocol_text(protocol)]
    if context:
        parts.append("--- System Context ---\n" + context)
    parts.append(f"--- Role: {role.name} ---\n" + role.instructions.strip())
    if addressable is not None:
        lines = [f"- {r.name}: {r.description.strip()}" for r in addressable]
        lines.append("- User: the person who owns the job; approves the result and answers questions.")
        parts.append("--- Roles you can address (send_to) ---\n" + "\n".join(lines))
    if skill:
        name, body = skill
        parts.append(f"--- Active Skill: {name} ---\n" + body.strip())
    return "\n\n".join(parts)


def call_marker(manifest: JobManifest) -> str:
    return f"[Call {manifest.calls + 1} of {manifest.settings.max_steps}]"


def _file_sections(workspace: Path, paths: list[str], budget: list[int]) -> tuple[list[str], list[str]]:
    from ..workspace import Workspace

    sections, used = [], []
    for rel in paths:
        if budget[0] <= 0:
            sections.append(f"### {rel}\n[not shown: the prompt's file budget is spent]")
            continue
        text = Workspace(workspace).read_text_file(rel, min(FILE_LIMIT, budget[0]))
        if text is None:
            sections.append(f"### {rel}\n[no such file in the workspace]")
            continue
        budget[0] -= len(text)
        used.append(rel)
        sections.append(f"### {rel}\n```\n{text}\n```")
    return sections, used


def opening_message(manifest: JobManifest, workspace: Path, protocol: str = "json") -> tuple[str, list[str]]:
    """The first user message of a turn: the job, feedback, work to review."""
    turn = manifest.turn
    # The heading does not name the job: a prompt depends on what the job
    # asks, not on what it is called, so a recording replays under any id.
    lines = ["# Job", "", "## Objective", manifest.objective.strip()]
    if manifest.details.strip():
        lines += ["", "## Details", manifest.details.strip()]
    if manifest.skill and manifest.skill.params:
        lines += ["", "## Parameters"] + [f"- {k}: {v}" for k, v in manifest.skill.params.items()]
    if manifest.acceptance_criteria:
        lines += ["", "## Acceptance criteria"] + [f"- {c}" for c in manifest.acceptance_criteria]
    budget = [TOTAL_FILES_LIMIT]
    files_context: list[str] = []
    if turn.slot == SUPERVISOR and manifest.last_exit is not None:
        handoff = manifest.last_exit
        lines += [
            "",
            "## Work to review",
            f"The {handoff.role} finished its turn with {handoff.action}:",
            handoff.summary.strip(),
        ]
        if handoff.evidence_files:
            sections, used = _file_sections(workspace, handoff.evidence_files, budget)
            files_context += used
            lines += ["", "## Evidence files"] + sections
    elif manifest.last_exit is not None and manifest.last_exit.evidence_files and turn.feedback:
        # A turn sent back with feedback sees the files as they are now.
        sections, used = _file_sections(workspace, manifest.last_exit.evidence_files, budget)
        files_context += used
        lines += ["", "## Files from the last turn (as they are now)"] + sections
    if manifest.files:
        sections, used = _file_sections(workspace, [f for f in manifest.files if f not in files_context], budget)
        files_context += used
        if sections:
            lines += ["", "## Job files"] + sections
    if manifest.workflow == "planned" and turn.slot != PLANNER and manifest.plan:
        lines += ["", "## Plan (from the Planner)"] + [
            f"{i}. {step}" + ("   <- current" if i == manifest.current_plan_step else "") for i, step in enumerate(manifest.plan)
        ]
    if turn.task:
        lines += ["", "## Your task (from the Planner)", turn.task.strip()]
    if turn.feedback:
        lines += ["", "## Feedback", turn.feedback.strip()]
    lines += ["", answer_reminder(protocol)]
    return "\n".join(lines), files_context


def build_prompt(
    manifest: JobManifest,
    role: RoleManifest,
    workspace: Path,
    jobs_dir: Path,
    history: HistoryReader,
    roles: Optional[dict[str, RoleManifest]] = None,
) -> Prompt:
    """The complete ``messages`` of the next call for the job's current turn.

    ``history`` reads the turn's conversation back; ``roles`` (all roles
    known to the jobs directory) lets the Planner of a planned job see the
    roles it may address.
    """
    turn = manifest.turn
    files_context: list[str] = []
    protocol = answer_protocol(role, manifest)
    if turn.pending is None:
        text, files_context = opening_message(manifest, workspace, protocol)
    else:
        text = turn.pending
    pending = {"role": "user", "content": f"{text}\n\n{call_marker(manifest)}"}
    if turn.prompt_call is not None and turn.last_call is not None:
        conversation = history.conversation(turn)
        return Prompt(conversation + [pending], files_context, continues=turn.last_call, added=[pending])
    skill = (manifest.skill.name, manifest.skill.instructions) if manifest.skill else None
    addressable = None
    if manifest.workflow == "planned" and turn.slot == PLANNER:
        names = [name for slot, name in manifest.roles.items() if slot != PLANNER]
        addressable = [roles[n] for n in names if roles and n in roles]
    system = system_prompt(role, context_text(workspace, jobs_dir), skill, addressable, protocol)
    kept: list[dict] = []
    if turn.summary and turn.last_call is not None:
        # After a compaction: the summary stands in for the rounds it covers.
        conversation = history.conversation(turn)
        system += "\n\n" + compaction.summary_section(history.opening(turn) or "", turn)
        kept = compaction.kept_rounds(conversation, turn)
    return Prompt([{"role": "system", "content": system}, *kept, pending], files_context)
