"""The protocol as the system prompt teaches it, for each protocol.

Generated, never hand-copied: the actions, their meanings and the fields
they need come from :data:`logist.protocol.ACTION_RULES` and the field
descriptions of :class:`logist.protocol.Answer`; the line protocol's tags
from the same table. ``job preview`` shows the text a role gets, and
:func:`logist.protocol.protocol_text` is the way in.
"""

from __future__ import annotations

from functools import lru_cache

# The words around these rules (who the model is, what Logist does) are the
# ``protocol`` prompt template's (logist/prompts/protocol.md).
from .protocol import (
    ACTION_RULES, EXAMPLE_ANSWER, PATH_RULE, PLANNER_OPTIONAL, PLANNER_REQUIRED, Answer, _file_change_forms,
    answer_json,
)

#: The line protocol's example: a command, the way most turns begin.
TAGS_EXAMPLE = "[CMD] python hello.py"


def _phrase(sentence: str) -> str:
    """A description as a phrase inside a sentence: no capital, no final period."""
    sentence = sentence.strip().rstrip(".")
    return sentence[:1].lower() + sentence[1:]


def _fields(names: tuple[str, ...], described: set[str]) -> str:
    out = []
    for name in names:
        if name in described:
            out.append(f'"{name}"')
        else:
            described.add(name)
            out.append(f'"{name}" ({Answer.model_fields[name].description})')
    return ", ".join(out)


def _json_text() -> str:
    described: set[str] = set()
    actions = []
    for name, rule in ACTION_RULES.items():
        line = f'- "{name}": {rule.meaning} Required: {_fields(rule.required, described)}.'
        if rule.optional:
            line += f" Optional: {_fields(rule.optional, described)}."
        actions.append(line)
    changes = [f"- {form} to {_phrase(doc)}" for form, doc in _file_change_forms()]
    file_changes = "\n".join([
        f'Any answer may also carry "file_changes" ({Answer.model_fields["file_changes"].description}), as a list of:',
        ";\n".join(changes) + ".",
        f"Paths are {PATH_RULE}. A refused or malformed answer changes nothing.",
    ])
    answer_format = (
        "Answer with exactly one JSON object and nothing else (a ```json fence around it is accepted). "
        'Its "action" is one of:\n' + "\n".join(actions)
    )
    return "\n\n".join([answer_format, file_changes, "Example:\n" + answer_json(EXAMPLE_ANSWER)])


#: What follows each tag, as the prompt names it.
PLACEHOLDERS = {"command": "command", "question": "question", "message": "note", "summary_for_supervisor": "summary"}


def _tag_forms() -> list[str]:
    """One entry per tag, the turn's own actions first: the tag, what follows it, what it does."""
    lines = []
    for rule in sorted(ACTION_RULES.values(), key=lambda r: r.exit):
        what = PLACEHOLDERS[rule.tag_field]
        lines.append(f"[{rule.tag}] {what}\n   {rule.meaning[:1].upper()}{rule.meaning[1:]}")
        if rule.tag == "ASK":
            lines[-1] += " You wait until the person answers."
            lines.append(f"[{rule.tag}:optional] {what}\n   The same, but the person may skip it.")
    return lines


def _tags_text() -> str:
    tags = [f"[{rule.tag}]" for rule in sorted(ACTION_RULES.values(), key=lambda r: r.exit)]
    exits = [f"[{rule.tag}]" for rule in ACTION_RULES.values() if rule.exit]
    summary = Answer.model_fields["summary_for_supervisor"].description
    rules = "\n".join([
        "Rules:",
        f"- Start your answer with one tag: {', '.join(tags)} (or [ASK:optional]). One tag per answer.",
        "- [CMD]: only the command, no explanation; it runs in the workspace directory.",
        f"- {', '.join(exits[:-1])} and {exits[-1]} end your turn; the text after the tag is your summary ({summary}).",
        "- Change files with commands (for example a here-document: cat > file <<'EOF').",
        "- An answer that starts with no tag is taken as a command: its first line is run.",
    ])
    answer_format = "Answer in exactly one of these forms:\n" + "\n".join(_tag_forms())
    return "\n\n".join([answer_format, rules, "Example:\n" + TAGS_EXAMPLE])


def _planner_text() -> str:
    """The Planner's own fields, from :data:`~logist.protocol.PLANNER_REQUIRED`
    and :data:`~logist.protocol.PLANNER_OPTIONAL`: stated here whatever the
    Planner's instructions say, so that no prompt file can leave one out."""
    described: set[str] = set()
    return (
        f"As the Planner, every answer but a CMD also carries {_fields(PLANNER_REQUIRED, described)} "
        f'(in an ASK, its "question" is the message); it may carry {_fields(PLANNER_OPTIONAL, described)}. '
        "Without an \"action\", send_to says what the answer does: a role gets the message as its task; "
        "User gets it as a question, or as the end of the job with \"stop\": \"Completed\"."
    )


@lru_cache(maxsize=None)
def protocol_text(protocol: str, planner: bool = False) -> str:
    text = _tags_text() if protocol == "tags" else _json_text()
    return f"{text}\n\n{_planner_text()}" if planner else text
