"""How an agent's run ends in an exit command of Logist's protocol.

An agent that knows Logist ends its run with an exit command (COMPLETED,
STUCK or RETRY, with ``summary_for_supervisor`` and ``evidence_files``),
checked by the same answer check as a model's (:func:`logist.protocol.answer.parse_answer`):

1. written to the file named by ``LOGIST_EXIT_FILE``, if it wrote that file;
2. else as a JSON object with an ``action`` in its final message (the last
   such object: prose around it is fine);

An agent that gave one that the check refuses (another action, a file change,
a path outside the workspace...) is STUCK with the reason: a person looks,
instead of a rule guessing past what the agent meant. An agent that knows
nothing of Logist still works, by rule:

3. exit 0 having changed files: COMPLETED, the changed files as evidence (the
   job's checks then judge the work);
4. exit 0 having changed nothing: STUCK (it did nothing a step can show);
5. a non-zero exit, or a timeout: STUCK with the tail of its output.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Optional, Sequence

from ..errors import InvalidAnswer
from ..protocol.answer import SUMMARY_LIMIT, Answer, parse_answer
from ..protocol.paths import check_relative_path
from .providers import json_objects

#: Where the exit command came from.
EXIT_FILE = "exit_file"
FINAL_MESSAGE = "final_message"
RULE = "rule"


@dataclass
class ExitCommand:
    """The run's exit command: a checked :class:`Answer` (COMPLETED, STUCK or RETRY)."""

    answer: Answer
    #: :data:`EXIT_FILE`, :data:`FINAL_MESSAGE` or :data:`RULE`.
    source: str
    #: Why the exit command the agent gave was refused (the answer is then STUCK), else None.
    refused: Optional[str] = None


def check_exit_command(text: str) -> Answer:
    """``text`` as an agent's exit command, or :class:`InvalidAnswer` saying why not."""
    answer = parse_answer(text, "json")
    if not answer.is_exit:
        raise InvalidAnswer(f"action {answer.action} is not an exit command (an agent ends with COMPLETED, STUCK "
                            "or RETRY)")
    if answer.file_changes:
        raise InvalidAnswer("file_changes: an agent writes its files itself; its exit command carries none")
    return answer


def _cut(text: str, limit: int = SUMMARY_LIMIT) -> str:
    text = text.strip() or "(nothing)"
    return text if len(text) <= limit else text[:limit - 1] + "\u2026"


def _tail(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else "\u2026" + text[-(limit - 1):]


def _stuck(summary: str, source: str, refused: Optional[str] = None) -> ExitCommand:
    answer = Answer(action="STUCK", evidence_files=[], summary_for_supervisor=_cut(summary))
    return ExitCommand(answer, source, refused)


def _from_final_message(message: str) -> Optional[str]:
    """The last JSON object with an ``action`` in ``message``, as text; None when there is none."""
    found = [obj for obj in json_objects(message) if "action" in obj]
    return json.dumps(found[-1], ensure_ascii=False) if found else None


def evidence(paths: Sequence[str]) -> list[str]:
    """The workspace paths of ``paths`` that an answer may name (the path rules), in order."""
    kept = []
    for path in paths:
        try:
            kept.append(check_relative_path(path))
        except InvalidAnswer:
            continue
    return kept


def exit_command(*, exit_file_text: Optional[str], final_message: Optional[str], exit_code: Optional[int],
                 timed_out: bool, timeout: float, changed: Sequence[str], existing: Sequence[str],
                 output_tail: str) -> ExitCommand:
    """The exit command of one run (the module's doc gives the order).
    ``changed``: every path the run changed; ``existing``: those of them
    still there (the evidence); ``output_tail``: the end of what it printed."""
    if exit_file_text is not None:
        try:
            return ExitCommand(check_exit_command(exit_file_text), EXIT_FILE)
        except InvalidAnswer as exc:
            return _stuck(f"The agent's exit file is not an exit command of Logist's protocol: {exc}", EXIT_FILE,
                          str(exc))
    given = _from_final_message(final_message) if final_message else None
    if given is not None:
        try:
            return ExitCommand(check_exit_command(given), FINAL_MESSAGE)
        except InvalidAnswer as exc:
            return _stuck(f"The agent's final message holds no valid exit command of Logist's protocol: {exc}",
                          FINAL_MESSAGE, str(exc))
    said = f" Its final message: {final_message.strip()}" if final_message and final_message.strip() else ""
    if timed_out:
        return _stuck(f"The agent was stopped after {timeout:g} s (its timeout). The end of its output:\n"
                      + _tail(output_tail, SUMMARY_LIMIT // 2), RULE)
    if exit_code != 0:
        return _stuck(f"The agent exited with code {exit_code} and gave no exit command. The end of its output:\n"
                      + _tail(output_tail, SUMMARY_LIMIT // 2), RULE)
    if not changed:
        return _stuck("The agent exited 0 without changing any file and gave no exit command." + said, RULE)
    kept = evidence(existing)
    gone = len(changed) - len(existing)
    summary = (f"The agent exited 0 having changed {len(changed)} file{'s' if len(changed) != 1 else ''}"
               + (f" ({gone} of them deleted)" if gone else "") + ", and gave no exit command." + said)
    return ExitCommand(Answer(action="COMPLETED", evidence_files=kept, summary_for_supervisor=_cut(summary)), RULE)
