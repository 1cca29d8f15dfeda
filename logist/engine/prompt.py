"""Building the exact messages of the next call.

``messages`` = one system message, then the turn's conversation. The system
message is the protocol (how to answer), the optional context file, the
role's instructions, and the active skill when the job has one. The turn
opens with a message stating the job; each later user message reports what
happened since the model's last answer. Every user message ends with
``[Step N of MAX]`` (kosmos-panel's marker) so the model knows how many calls
the job has left.

A role answering in the tags protocol gets kosmos-panel's texts: its base
prompt (the ``protocol/tags`` template), ``--- System Context ---`` and
``--- Active Skill: NAME ---``; the role's instructions only where they are
its own (the shipped ``roles/*`` templates teach the JSON protocol's fields);
a first message ``Execute skill: NAME`` (or the person's own prompt) and its
``Parameters:`` (the ``job/tags`` template).

What goes where is decided here; every word of it is a prompt template
(:mod:`logist.store.prompts`, the files in ``logist/prompts/``), which a
jobs directory can override. A turn's first message also recalls what the
person answered and said earlier in the job (:func:`memory`), read from the
history's entries of the person's commands, so an answer given to one turn
is not lost when the work starts over.

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

from ..protocol.paths import named_path
from ..protocol.prompt_text import protocol_text
from ..workspace.repository import Workspace
from ..secrets.redact import redact
from ..store.entries import CheckRun
from ..store.manifest import JobManifest
from ..store.prompts import BUILTIN_DIR, ROLE_PREFIX, Prompts, builtin
from ..store.requests import HistoryReader
from ..store.roles import RoleManifest
from . import compaction
from .workflow import answer_protocol
from ..store.manifest import PLANNER, SUPERVISOR

FILE_LIMIT = 20_000
TOTAL_FILES_LIMIT = 100_000
#: What the Supervisor is shown of the workspace's changes: the files changed (at most
#: :data:`CHANGED_FILES_LIMIT` lines of git's stat), then the diff, cut at :data:`DIFF_LIMIT` characters.
DIFF_LIMIT = 12_000
CHANGED_FILES_LIMIT = 60


@dataclass
class Prompt:
    messages: list[dict]
    files_context: list[str] = field(default_factory=list)
    #: The entry whose request and answer these messages extend, or None
    #: when the messages are a prompt in full.
    continues: Optional[int] = None
    #: With ``continues``: the messages added after that entry's answer, as
    #: recorded (a command's output by reference: ``output_of``).
    added: list[dict] = field(default_factory=list)

    def record(self) -> dict:
        """The request's messages as the history records them."""
        if self.continues is None:
            return {"prompt": self.messages}
        return {"continues": self.continues, "added": self.added}


def system_prompt(
    role: RoleManifest,
    context: Optional[str],
    skill: Optional[tuple[str, str]] = None,
    addressable: Optional[list[RoleManifest]] = None,
    prompts: Optional[Prompts] = None,
    this_turn: Optional[str] = None,
    protocol: str = "json",
    example_path: Optional[str] = None,
) -> str:
    """The system message: ``protocol`` taught (its examples writing
    ``example_path``, a file the job names: :func:`example_path`), context,
    role, the Planner's roles, skill, and after a compaction the turn so far
    (``this_turn``)."""
    prompts = prompts or builtin()
    planner = None
    if addressable is not None:
        roles = "\n".join(f"- {r.name}: {r.description.strip()}" for r in addressable) or None
        planner = prompts.render("planner", roles=roles)
    skill_part = None
    if skill:
        name, body = skill
        skill_part = prompts.render("skill", skill=name, instructions=body.strip())
    instructions: Optional[str] = prompts.instructions(role)
    if role.agent is not None:
        # A coding agent does its work itself and ends with an exit command; the shipped roles'
        # instructions teach the JSON protocol's file_changes and commands, which it has no use for.
        taught = prompts.render("protocol/agent")
        if _shipped(prompts, role):
            instructions = None
    elif protocol == "tags":
        taught = prompts.render("protocol/tags")
        if _shipped(prompts, role):
            instructions = None
    else:
        taught = prompts.render("protocol", protocol_rules=protocol_text(protocol, planner=addressable is not None,
                                                                        path=example_path))
    return prompts.render(
        "system",
        protocol=taught,
        context=context or None,
        role=role.name if instructions is not None else None,
        instructions=instructions,
        planner=planner,
        skill=skill_part,
        this_turn=this_turn,
    )


def example_path(manifest: JobManifest) -> Optional[str]:
    """The path the protocol's examples write in this job's prompts: the
    first file its objective, details or acceptance criteria name, else the
    first of its files; None (the placeholder) when it names none. A small
    model copies the example: copying this, it writes a file the job asks
    for, never a placeholder or another job's file."""
    return named_path(manifest.objective, manifest.details, *manifest.acceptance_criteria) or \
        next(iter(manifest.files), None)


def _shipped(prompts: Prompts, role: RoleManifest) -> bool:
    """Whether the role's instructions are a template shipped with Logist
    (``logist/prompts/roles/``), which speaks of the JSON protocol's fields."""
    path = prompts.resolve(ROLE_PREFIX + role.name, role).path
    return path is not None and path.resolve().is_relative_to(BUILTIN_DIR)


def call_marker(manifest: JobManifest, text: str, prompts: Optional[Prompts] = None) -> str:
    """A user message as sent: ``text`` and the call it is."""
    return (prompts or builtin()).render(
        "call", message=text, call=str(manifest.calls + 1), max_calls=str(manifest.settings.max_steps)
    )


def _file_sections(
    workspace: Path, paths: list[str], budget: list[int], prompts: Prompts
) -> tuple[Optional[str], list[str]]:
    sections, used = [], []
    for rel in paths:
        if budget[0] <= 0:
            sections.append(prompts.render("file_over_budget", path=rel))
            continue
        text = Workspace(workspace).read_text_file(rel, min(FILE_LIMIT, budget[0]))
        if text is None:
            sections.append(prompts.render("file_missing", path=rel))
            continue
        budget[0] -= len(text)
        used.append(rel)
        sections.append(prompts.render("file", path=rel, content=text))
    return ("\n".join(sections) if sections else None), used


def render_checks(run: CheckRun, prompts: Prompts, only_failed: bool = False) -> str:
    """A run's checks as a prompt shows them (the ``check`` template): each
    command, how it ended and the end of its output."""
    shown = run.failed if only_failed else run.results
    return "\n\n".join(prompts.render("check", command=r.command, status=r.ending, output=r.output or "(no output)")
                       for r in shown)


def checks_section(manifest: JobManifest, history: Optional[HistoryReader], prompts: Prompts) -> Optional[str]:
    """The job's last run of its checks, for the Supervisor; None when it has none."""
    last = manifest.last_check
    if last is None or history is None:
        return None
    recorded = history.entry(last.sequence).get("checks")
    return render_checks(CheckRun.model_validate(recorded), prompts) if recorded else None


def changes_section(manifest: JobManifest, workspace: Path, prompts: Prompts) -> Optional[str]:
    """What changed in the workspace since the job began (baseline to the
    job's commit), whatever the role's evidence names: the files changed,
    then the diff, cut with a note. None when nothing changed."""
    old, new = manifest.baseline_commit, manifest.workspace_commit
    if not old or not new or old == new:
        return None
    repo = Workspace(workspace)
    stat = repo.diff(old, new, stat=True).rstrip().splitlines()
    if len(stat) > CHANGED_FILES_LIMIT:
        stat = stat[:CHANGED_FILES_LIMIT - 1] + [f"... {len(stat) - CHANGED_FILES_LIMIT} more lines", stat[-1]]
    (patch,) = repo.iter_diffs([(old, new)], limit=DIFF_LIMIT)
    if patch.error:
        return None
    cut = (f"[the diff is cut here: {patch.cut:,} more characters; run `git diff {old[:12]} {new[:12]}` with CMD "
           "to see the rest]") if patch.cut else None
    return prompts.render("changes", files="\n".join(stat), diff=redact(patch.text.rstrip()), cut=cut)


def _items(lines: list[str]) -> Optional[str]:
    return "\n".join(lines) if lines else None


def memory(history: HistoryReader, prompts: Prompts, sequences: list[int], repeated: Optional[str] = None) -> Optional[str]:
    """What the person answered and said in history entries ``sequences``
    (answers with their questions, the feedback of a reject or a resubmit),
    rendered with the ``memory`` template; None when there is nothing.
    Feedback that ``repeated`` (the turn's own feedback) already carries is
    not said twice."""
    items = []
    for said in history.person_inputs(sequences):
        if said.action == "answer":
            items.append(prompts.render("memory/answer", role=said.role, question=said.question, answer=said.text))
        elif repeated and said.text in repeated:
            continue
        else:
            template = "memory/rejected" if said.action == "reject" else "memory/resubmitted"
            items.append(prompts.render(template, feedback=said.text))
    return prompts.render("memory", items="\n\n".join(items)) if items else None


def opening_message(
    manifest: JobManifest, workspace: Path, prompts: Optional[Prompts] = None, history: Optional[HistoryReader] = None,
    protocol: str = "json", agent: bool = False,
) -> tuple[str, list[str]]:
    """The first user message of a turn: the job, feedback, work to review,
    and (with ``history``) what the person has said so far; in the tags
    protocol, kosmos-panel's: ``Execute skill: NAME`` (or the person's own
    prompt), its parameters, then whatever else the turn has."""
    prompts = prompts or builtin()
    turn = manifest.turn
    # The message does not name the job: a prompt depends on what the job
    # asks, not on what it is called, so a recording replays under any id.
    values: dict[str, Optional[str]] = {
        "objective": manifest.objective.strip(),
        "details": manifest.details.strip() or None,
        "acceptance_criteria": _items([f"- {c}" for c in manifest.acceptance_criteria]),
    }
    if manifest.skill and manifest.skill.params:
        values["parameters"] = _items([f"- {k}: {v}" for k, v in manifest.skill.params.items()])
    budget = [TOTAL_FILES_LIMIT]
    files_context: list[str] = []
    if turn.slot == SUPERVISOR and manifest.last_exit is not None:
        handoff = manifest.last_exit
        evidence = None
        if handoff.evidence_files:
            evidence, used = _file_sections(workspace, handoff.evidence_files, budget, prompts)
            files_context += used
        values["review"] = prompts.render(
            "review", role=handoff.role, action=handoff.action, summary=handoff.summary.strip(), evidence_files=evidence,
            checks=checks_section(manifest, history, prompts), changes=changes_section(manifest, workspace, prompts),
        )
    elif manifest.last_exit is not None and manifest.last_exit.evidence_files and turn.feedback:
        # A turn sent back with feedback sees the files as they are now.
        values["last_turn_files"], used = _file_sections(workspace, manifest.last_exit.evidence_files, budget, prompts)
        files_context += used
    if manifest.files:
        values["job_files"], used = _file_sections(
            workspace, [f for f in manifest.files if f not in files_context], budget, prompts
        )
        files_context += used
    if manifest.workflow == "planned" and turn.slot != PLANNER and manifest.plan:
        values["plan"] = _items([
            f"{i}. {step}" + ("   <- current" if i == manifest.current_plan_step else "") for i, step in enumerate(manifest.plan)
        ])
    if turn.task:
        values["task"] = turn.task.strip()
    if turn.feedback:
        values["feedback"] = turn.feedback.strip()
    if history is not None:
        values["memory"] = memory(history, prompts, manifest.person_inputs, repeated=turn.feedback)
    if protocol == "tags":
        skill = manifest.skill
        if skill is not None and not skill.prompted:
            values["skill"], values["objective"] = skill.name, None
        return prompts.render("job/tags", **values), files_context
    # A coding agent ends its run with an exit command (protocol/agent), not with an answer in the protocol.
    values["answer_reminder"] = prompts.render("answer_reminder/agent" if agent else f"answer_reminder/{protocol}")
    return prompts.render("job", **values), files_context


def build_prompt(
    manifest: JobManifest,
    role: RoleManifest,
    workspace: Path,
    jobs_dir: Path,
    history: HistoryReader,
    roles: Optional[dict[str, RoleManifest]] = None,
    prompts: Optional[Prompts] = None,
) -> Prompt:
    """The complete ``messages`` of the next call for the job's current turn.

    ``history`` reads the turn's conversation back; ``roles`` (all roles
    known to the jobs directory) lets the Planner of a planned job see the
    roles it may address; ``prompts`` are the templates in effect.
    """
    prompts = prompts or Prompts(jobs_dir, roles)
    turn = manifest.turn
    files_context: list[str] = []
    protocol = answer_protocol(role, manifest)
    if turn.pending is None:
        text, files_context = opening_message(manifest, workspace, prompts, history, protocol,
                                               agent=role.agent is not None)
    else:
        text = turn.pending
    pending = {"role": "user", "content": call_marker(manifest, text, prompts)}
    if turn.prompt_call is not None and turn.last_call is not None:
        conversation = history.conversation(turn)
        added = pending
        if turn.pending is not None and manifest.last_sequence:
            last = history.entry(manifest.last_sequence)
            if (last.get("command") or {}).get("output") == turn.pending:
                # Recorded once, in the entry that ran the command; the message names it.
                start = pending["content"].find(text)
                if start >= 0:
                    added = {"role": "user", "output_of": manifest.last_sequence}
                    added.update({k: v for k, v in (("prefix", pending["content"][:start]),
                                                     ("suffix", pending["content"][start + len(text):])) if v})
        return Prompt(conversation + [pending], files_context, continues=turn.last_call, added=[added])
    skill = (manifest.skill.name, manifest.skill.instructions) if manifest.skill else None
    addressable = None
    if manifest.workflow == "planned" and turn.slot == PLANNER:
        names = [name for slot, name in manifest.roles.items() if slot != PLANNER]
        addressable = [roles[n] for n in names if roles and n in roles]
    kept: list[dict] = []
    this_turn = None
    if turn.summary and turn.last_call is not None:
        # After a compaction: the summary stands in for the rounds it covers,
        # and what the person answered in them is recalled word for word.
        conversation = history.conversation(turn)
        said = memory(history, prompts, [s for s in manifest.person_inputs if s > (turn.first_call or 0)])
        this_turn = compaction.summary_section(history.opening(turn) or "", turn, prompts, said)
        kept = compaction.kept_rounds(conversation, turn)
    system = system_prompt(role, history.files.context_text(jobs_dir, manifest.baseline_commit), skill, addressable, prompts, this_turn, protocol,
                           example_path(manifest))
    return Prompt([{"role": "system", "content": system}, *kept, pending], files_context)
