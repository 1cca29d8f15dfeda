"""The JSON protocol as the system prompt teaches it.

Generated, never hand-copied: the actions, their meanings and the fields
they need come from :data:`logist.protocol.answer.ACTION_RULES` and the field
descriptions of :class:`logist.protocol.answer.Answer`. ``job preview`` shows the
text a role gets, and :func:`protocol_text` is the way in. The tags protocol
is taught in kosmos-panel's own words, the ``protocol/tags`` prompt template (its
base prompt, word for word), not generated.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Optional

# The words around these rules (who the model is, what Logist does) are the
# ``protocol`` prompt template's (logist/prompts/protocol.md).
from .answer import (
    ACTION_RULES, ON_CHANGE, PATH_RULE, PLACEHOLDER_CONTENT, PLACEHOLDER_SUMMARY, PLANNER_OPTIONAL, PLANNER_REQUIRED, PROTOCOLS, Answer,
    _file_change_forms, answer_json, example_answer,
)


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


def _json_text(path: Optional[str]) -> str:
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
    return "\n\n".join([answer_format, file_changes, _shape(path)])


def _shape(path: Optional[str]) -> str:
    """The example of a COMPLETED answer. With ``path`` (a file the job
    names), it writes that file, and the content and summary are each an
    unquoted ``...``: no text a model could copy for its own. Without one,
    the placeholders in capitals, which an answer may not copy. (The file
    change forms keep the placeholder path: a copy of the deletion form
    with the job's own path would delete the file the job is about.)"""
    example = answer_json(example_answer(path))
    if path:
        for placeholder in (PLACEHOLDER_CONTENT, PLACEHOLDER_SUMMARY):
            example = example.replace(json.dumps(placeholder, ensure_ascii=False), "...")
        return (f"The shape of a COMPLETED answer that writes {path}; each ... stands for a text of your own (the "
                "file's whole new content; what you did and how you checked it):\n" + example)
    return ("The shape of a COMPLETED answer; the words in capitals stand for this job's own values (no real path "
            "or summary is shown, and an answer that copies them is refused):\n" + example)


def _planner_text() -> str:
    """The Planner's own fields, from :data:`~logist.protocol.answer.PLANNER_REQUIRED`
    and :data:`~logist.protocol.answer.PLANNER_OPTIONAL`: stated here whatever the
    Planner's instructions say, so that no prompt file can leave one out."""
    described: set[str] = set()
    return (
        f"As the Planner, every answer but a CMD also carries {_fields(PLANNER_REQUIRED, described)} "
        f'(in an ASK, its "question" is the message); it may carry {_fields(PLANNER_OPTIONAL, described)}. '
        "Without an \"action\", send_to says what the answer does: a role gets the message as its task; "
        "User gets it as a question, or as the end of the job with \"stop\": \"Completed\"."
    )


@lru_cache(maxsize=None)
def protocol_text(protocol: str = "json", planner: bool = False, path: Optional[str] = None) -> str:
    """The JSON protocol's part of the system prompt, generated from
    :data:`~logist.protocol.answer.ACTION_RULES` and the models (``planner``: with
    the Planner's own fields; ``path``: a file the job names, which the
    examples write, else a placeholder). The tags protocol has no generated text:
    kosmos-panel's base prompt (the ``protocol/tags`` prompt template) teaches it."""
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown protocol {protocol!r} (known: {', '.join(PROTOCOLS)})")
    if protocol != "json":
        raise ValueError("the tags protocol is taught by the protocol/tags prompt template, not generated")
    text = _json_text(path)
    return f"{text}\n\n{_planner_text()}" if planner else text


ON_CHANGE.append(protocol_text.cache_clear)
