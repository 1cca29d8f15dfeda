"""The forms answers really arrive in, brought to the protocol's one shape.

:mod:`logist.protocol.answer` defines one answer: a JSON object with an upper-case
``action`` and the fields its action requires. Real models send more than
that: a ``<think>`` block first, a sentence before the object and one after,
a fenced block, ``"action": "completed"``, keys nobody asked for, ``null``
for every field they do not use, TaskWeaver's ``{"response": {...}}``
wrapper, a Planner answer whose ``send_to`` says what it does, or, from a
role that speaks kosmos-panel's line protocol, ``[CMD] ls``. The readers
here turn each of those into the plain data of one answer, plus a note for
every liberty taken (recorded in the history, so a person sees how an
answer was read) and the fields the protocol does not know (kept in the
history, never acted on). What is refused is still refused: two objects,
no object, a file change with a key it does not have. So is what no answer
needs and the rest of Logist could choke on, with the reason: JSON nested
deeper than :data:`MAX_DEPTH`, a number longer than :data:`MAX_DIGITS`
digits or beyond a float's range, ``NaN`` and ``Infinity`` (not JSON), and a
string holding a lone surrogate (not text: it cannot be written as UTF-8).

Pure like the protocol: strings and dicts in, strings and dicts out.
"""

from __future__ import annotations

import json
import math
import re
from typing import Optional

from ..errors import json_problem

#: Reasoning some models put before the answer. A server that strips the
#: opening tag leaves the reasoning and a lone closing tag.
_THINK = re.compile(r"<(think|thinking|reasoning)>.*?</\1>", re.DOTALL | re.IGNORECASE)
_LONE_CLOSE = re.compile(r"\A.*?</(?:think|thinking|reasoning)>", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```[ \t]*(?P<lang>[A-Za-z0-9_+-]*)[ \t]*\r?\n(?P<body>.*?)(?:\r?\n)?[ \t]*```", re.DOTALL)
#: An answer that is one fenced block and nothing else (:func:`extract_json_text`).
_JSON_FENCE = re.compile(r"^```(?:json|JSON)?[ \t]*\r?\n(?P<body>.*?)\r?\n?```$", re.DOTALL)
#: Objects tried when looking for the answer in prose: enough for any real
#: answer, and a bound on the work a pathological one can cause.
_MAX_CANDIDATES = 200
#: A plan step as a model numbers it: "1.", "2)", "- ", "* ", "Step 3:".
_STEP_NUMBER = re.compile(r"^\s*(?:[-*]\s+)?(?:step\s+)?(?P<n>\d+)\s*[.):-]?\s*", re.IGNORECASE)


#: How deep an answer's JSON may nest (a real answer nests 4 levels).
MAX_DEPTH = 64
#: How many characters a number in an answer may have (a 5,000-digit integer
#: is past what Python converts; a real answer's numbers are short).
MAX_DIGITS = 100
_SURROGATE = re.compile("[\ud800-\udfff]")


class Unreadable(ValueError):
    """No answer could be read from the text; the message says why."""


class _Refused(Unreadable):
    """JSON that parses but that no answer may hold: never looked past for
    another object in the text."""


def _number(text: str) -> str:
    if len(text) > MAX_DIGITS:
        raise _Refused(f"the answer holds a number longer than {MAX_DIGITS} digits ({text[:12]}...)")
    return text


def _float(text: str) -> float:
    value = float(_number(text))
    if not math.isfinite(value):
        raise _Refused(f"the answer holds the number {text}, beyond the range of a number")
    return value


def _constant(name: str):
    raise _Refused(f"the answer holds {name}, which is not JSON (JSON has no NaN or Infinity)")


_DECODER = json.JSONDecoder(parse_int=lambda text: int(_number(text)), parse_float=_float, parse_constant=_constant)
#: The same, taking a raw control character (a newline, a tab) inside a string as
#: itself, as ``json.loads(strict=False)`` does: what a model writes in a long text.
_LENIENT = json.JSONDecoder(parse_int=lambda text: int(_number(text)), parse_float=_float, parse_constant=_constant,
                            strict=False)
#: The note of an answer read by :data:`_LENIENT`.
RAW_CONTROL_NOTE = "a raw newline or tab inside a JSON string was read as itself (JSON escapes it as \\n, \\t)"


def _decode(text: str, start: Optional[int] = None, strict: bool = True) -> tuple[object, int]:
    """One JSON value (from ``start``: the one there, and where it ends), its
    numbers and constants bounded; raises ValueError when it is not JSON
    (``strict``: nor when a string holds a raw control character)."""
    decoder = _DECODER if strict else _LENIENT
    try:
        if start is None:
            return decoder.decode(text), len(text)
        return decoder.raw_decode(text, start)
    except RecursionError:
        raise _Refused(f"the answer is nested deeper than {MAX_DEPTH} levels") from None


def surrogates_shown(text: str) -> str:
    """``text`` with each lone surrogate (a code unit no UTF-8 can hold,
    which a JSON escape in the endpoint's answer can produce) written as
    its escape, ``\\ud800``: the answer can be recorded as it came, and
    parsed, the escape is a lone surrogate again, and refused."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8") if _SURROGATE.search(text) else text


def loads(text: str, strict: bool = True) -> object:
    """``json.loads`` with an answer's bounds (see the module's docstring);
    ``strict=False`` takes raw control characters inside strings."""
    return _decode(text, strict=strict)[0]


def _loads_noted(text: str, notes: list[str]) -> object:
    """:func:`loads`, then leniently (:data:`RAW_CONTROL_NOTE` noted) when only raw control characters stood in the way."""
    try:
        return loads(text)
    except json.JSONDecodeError:
        value = loads(text, strict=False)
        notes.append(RAW_CONTROL_NOTE)
        return value


def check_value(value: object) -> None:
    """Refuse data no answer may hold, wherever it is: nesting deeper than
    :data:`MAX_DEPTH`, a string or key with a lone surrogate. Iterative, so
    the check itself cannot run out of stack. Raises :class:`Unreadable`."""
    stack: list[tuple[object, int, str]] = [(value, 0, "")]
    while stack:
        item, depth, where = stack.pop()
        if isinstance(item, str):
            found = _SURROGATE.search(item)
            if found:
                raise _Refused(f"{where or 'the answer'}: holds a lone surrogate ({ascii(found.group(0))[1:-1]}), "
                               "which is not text")
            continue
        if not isinstance(item, (dict, list)):
            continue
        if depth >= MAX_DEPTH:
            raise _Refused(f"the answer is nested deeper than {MAX_DEPTH} levels")
        pairs = item.items() if isinstance(item, dict) else enumerate(item)
        for key, inner in pairs:
            name = surrogates_shown(str(key))  # the reason is recorded: it must be text itself
            place = f"{where}/{name}" if where else name
            if isinstance(key, str):
                stack.append((key, depth + 1, f"{place} (the key)"))
            stack.append((inner, depth + 1, place))


def set_aside_thinking(text: str, notes: list[str]) -> str:
    """The text without the model's reasoning blocks."""
    cleaned = _THINK.sub("", text)
    if cleaned == text:
        cleaned = _LONE_CLOSE.sub("", text, count=1)
    if cleaned != text:
        notes.append("the reasoning block before the answer was set aside")
    return cleaned.strip()


def _objects_in(text: str) -> list[tuple[int, int, object]]:
    """Every top-level JSON object in ``text``: (start, end, value)."""
    found: list[tuple[int, int, object]] = []
    position, tried = 0, 0
    while tried < _MAX_CANDIDATES:
        start = text.find("{", position)
        if start < 0:
            break
        tried += 1
        try:
            value, end = _decode(text, start)
        except _Refused:
            raise
        except ValueError:
            position = start + 1
            continue
        found.append((start, end, value))
        position = end
    return found


def _json_error(text: str) -> str:
    try:
        loads(text)
    except json.JSONDecodeError as exc:
        return f"{json_problem(exc)} at line {exc.lineno} column {exc.colno}"
    return "no JSON object in it"


def read_json_text(raw: Optional[str], notes: list[str]) -> object:
    """The one JSON value of an answer: the whole text, a fenced block, or one
    object in prose. Raises :class:`Unreadable`."""
    if raw is None or not raw.strip():
        raise Unreadable("the answer is empty; expected one JSON object")
    text = set_aside_thinking(raw, notes)
    if not text:
        raise Unreadable("the answer holds only a reasoning block; expected one JSON object after it")
    try:
        return _loads_noted(text, notes)
    except json.JSONDecodeError:
        pass
    fences = list(_FENCE.finditer(text))
    if len(fences) == 1:
        body = fences[0].group("body").strip()
        try:
            value = _loads_noted(body, notes)
        except json.JSONDecodeError:
            value = None
        if isinstance(value, dict):
            if text[: fences[0].start()].strip() or text[fences[0].end():].strip():
                notes.append("the text around the fenced block was ignored")
            return value
    objects = [(s, e, v) for s, e, v in _objects_in(text) if isinstance(v, dict)]
    if len(objects) > 1:
        raise Unreadable(f"the answer holds {len(objects)} JSON objects; answer with exactly one")
    if not objects:
        raise Unreadable(
            f"the answer is not valid JSON ({_json_error(text)}); answer with exactly one JSON object"
        )
    start, end, value = objects[0]
    notes.append("the text around the JSON object was ignored")
    return value


# --------------------------------------------------------------------------
# The line protocol (kosmos-panel's)

_TAG_LINE = re.compile(r"^[ \t]*\[(?P<tag>[A-Za-z]+)(?::(?P<option>[A-Za-z]+))?\][ \t]*", re.MULTILINE)


def read_tag_text(raw: Optional[str], tags: dict[str, tuple[str, str]], notes: list[str],
                  options: Optional[dict[str, dict[str, dict]]] = None) -> dict:
    """An answer of the line protocol as the data of a JSON answer.

    ``tags``: tag (upper case) -> (action, the field its text fills);
    ``options``: action -> the options its tag takes (``[ASK:optional]``) -> the fields each sets. The
    first line that starts with a known tag gives the answer; with none, the
    first line is a command, as kosmos-panel reads an answer in no known format.
    """
    if raw is None or not raw.strip():
        raise Unreadable("the answer is empty; expected a line starting with a tag such as [CMD]")
    text = set_aside_thinking(raw, notes)
    fence = _FENCE.fullmatch(text)
    if fence:
        text = fence.group("body").strip()
    for match in _TAG_LINE.finditer(text):
        tag, option = match.group("tag").upper(), (match.group("option") or "").lower()
        if tag not in tags:
            continue
        if text[: match.start()].strip():
            notes.append(f"the text before [{match.group('tag')}] was ignored")
        action, field = tags[tag]
        body = text[match.end():].strip()
        data: dict = {"action": action, field: body}
        known = (options or {}).get(action, {})
        if option in known:
            data.update(known[option])
        elif option:
            notes.append(f"[{tag}:{option}]: the option '{option}' means nothing here and was ignored")
        if field == "summary_for_supervisor":
            data["evidence_files"] = []
        return data
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    notes.append("no known tag: the first line was read as a command ([CMD])")
    return {"action": "CMD", "command": first}


# --------------------------------------------------------------------------
# The data of one answer


def _plan_from_text(text: str) -> tuple[list[str], list[Optional[int]]]:
    """A plan written as numbered lines: its steps and the number each had."""
    steps, numbers = [], []
    for line in text.splitlines():
        if not line.strip():
            continue
        match = _STEP_NUMBER.match(line)
        numbers.append(int(match.group("n")) if match and match.group("n") else None)
        steps.append(line[match.end():].strip() if match else line.strip())
    return steps, numbers


def _step_index(value: str, plan: list, numbers: list[Optional[int]]) -> Optional[int]:
    """A plan step named by text ("2. write the tests") as an index from 0."""
    match = _STEP_NUMBER.match(value)
    if match and match.group("n"):
        number = int(match.group("n"))
        if number in numbers:
            return numbers.index(number)
        return number - 1 if plan and 1 <= number <= len(plan) else None
    text = value.strip()
    return next((i for i, step in enumerate(plan) if step == text), None)


def _planner_action(data: dict, stop: object, notes: list[str]) -> None:
    """A Planner answer with no ``action``: its ``send_to`` says what it does
    (and TaskWeaver's ``stop``, "Completed" or true, that the plan is done)."""
    send_to = data.get("send_to")
    if not isinstance(send_to, str) or not send_to.strip():
        return
    stop = str(stop if stop is not None else "").strip().lower()
    message = data.get("message") if isinstance(data.get("message"), str) else ""
    if send_to.strip().lower() != "user":  # the person, in any case (protocol.USER)
        data["action"] = "MESSAGE"
        notes.append(f"no action: send_to '{send_to}' read as MESSAGE (the role gets the message as its task)")
    elif stop in ("completed", "true", "done"):
        data["action"] = "COMPLETED"
        data.setdefault("summary_for_supervisor", message[:1000])
        data.setdefault("evidence_files", [])
        notes.append("no action: send_to 'User' with stop read as COMPLETED (the plan is done)")
    else:
        data["action"] = "ASK"
        data.setdefault("question", message)
        notes.append("no action: send_to 'User' read as ASK (the person answers the message)")


def normalise(data: dict, fields: dict, actions: dict[str, str], *, planner: bool, notes: list[str],
              plan: Optional[list] = None) -> tuple[dict, dict]:
    """``data`` in the protocol's shape, and the keys it does not know.

    ``fields``: the answer's field names (lower case); ``actions``: every
    accepted spelling (upper case) -> its action; ``plan``: a Planner's plan
    so far, in which a ``current_plan_step`` named by its text is found when
    the answer sends no plan.
    """
    if "action" not in data and set(data) - {"thought"} == {"response"} and isinstance(data["response"], dict):
        inner = dict(data["response"])
        if "thought" in data:
            inner.setdefault("thought", data["thought"])
        data = inner
        notes.append('the {"response": ...} wrapper was unwrapped')
    out: dict = {}
    extra: dict = {}
    for key, value in data.items():
        name = key.lower() if isinstance(key, str) and key.lower() in fields and key.lower() not in data else key
        if name in fields:
            if value is not None:  # a field a model sets to null is a field it does not use
                out[name] = value
        else:
            extra[key] = value
    action = out.get("action")
    if isinstance(action, str) and action.strip().upper() in actions and action != actions[action.strip().upper()]:
        out["action"] = actions[action.strip().upper()]
        notes.append(f"action '{action}' read as {out['action']}")
    if isinstance(out.get("plan"), str):
        out["plan"], numbers = _plan_from_text(out["plan"])
        notes.append("the plan, written as lines, was read as a list of steps")
    else:
        numbers = []
    step = out.get("current_plan_step")
    if isinstance(step, str):
        # The plan this answer sends, else the plan so far (a step named by its text in a later answer).
        sent = isinstance(out.get("plan"), list)
        index = _step_index(step, out["plan"] if sent else list(plan or []), numbers if sent else [])
        if index is not None:
            out["current_plan_step"] = index
            notes.append(f"current_plan_step '{step}' read as step {index} (counted from 0)")
    if planner and "action" not in out:
        _planner_action(out, extra.get("stop"), notes)
    return out, extra


def extract_json_text(raw: str) -> str:
    """The JSON text of an answer, with a surrounding ```json fence removed."""
    text = raw.strip()
    match = _JSON_FENCE.match(text)
    if match:
        text = match.group("body").strip()
    return text
