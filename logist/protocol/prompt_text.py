"""The JSON protocol as the system prompt teaches it.

Generated, never hand-copied: the actions, their meanings and the fields
they need come from :data:`logist.protocol.answer.ACTION_RULES` and the field
descriptions of :class:`logist.protocol.answer.Answer`. ``job preview`` shows the
text a role gets, and :func:`protocol_text` is the way in. The tags protocol
is taught in kosmos-panel's own words, the ``protocol/tags`` prompt template (its
base prompt, word for word), not generated.
"""

from __future__ import annotations

from functools import lru_cache

# The words around these rules (who the model is, what Logist does) are the
# ``protocol`` prompt template's (logist/prompts/protocol.md).
from .answer import (
    ACTION_RULES, EXAMPLE_ANSWER, ON_CHANGE, PATH_RULE, PLANNER_OPTIONAL, PLANNER_REQUIRED, PROTOCOLS, Answer,
    _file_change_forms, answer_json,
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
def protocol_text(protocol: str = "json", planner: bool = False) -> str:
    """The JSON protocol's part of the system prompt, generated from
    :data:`~logist.protocol.answer.ACTION_RULES` and the models (``planner``: with
    the Planner's own fields). The tags protocol has no generated text:
    kosmos-panel's base prompt (the ``protocol/tags`` prompt template) teaches it."""
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown protocol {protocol!r} (known: {', '.join(PROTOCOLS)})")
    if protocol != "json":
        raise ValueError("the tags protocol is taught by the protocol/tags prompt template, not generated")
    return f"{_json_text()}\n\n{_planner_text()}" if planner else _json_text()


ON_CHANGE.append(protocol_text.cache_clear)
