"""What reaches a terminal is inert: one function, :func:`inert`.

Text a model or a command supplied (a held command, a summary, a message,
a question, a command's output, a file name, an error quoting any of them)
is printed to a terminal only through :func:`inert`, which makes every
character a terminal would act on visible instead:

* C0 controls (U+0000-U+001F) become their Control Pictures, U+2400 plus
  the code: ``\\x1b`` (ESC) shows as ``␛``, ``\\r`` as ``␍``, ``\\b`` as
  ``␈``, ``\\x07`` as ``␇``; so no escape sequence (CSI, OSC such as OSC 52,
  which writes the clipboard), carriage return or backspace can move the
  cursor, erase a line or hide what was printed before it. ``\\n`` and
  ``\\t`` are kept in text laid out over several lines (a message, a
  command's output) and shown as ``␊`` and ``␉`` in a one-line field
  (``one_line=True``: a held command, a summary in a table), so a command
  cannot push its first part off the screen with blank lines.
* DEL (U+007F) shows as ``␡``.
* C1 controls (U+0080-U+009F: U+009B is a CSI some terminals obey), the
  bidirectional overrides, embeddings, isolates and marks (U+202A-U+202E,
  U+2066-U+2069, U+200E, U+200F, U+061C: they reorder what is displayed,
  so ``rm -rf ~`` could read as something else), the invisible U+200B,
  U+2060 and U+FEFF, the line and paragraph separators U+2028 and U+2029,
  and lone surrogates (text decoded with ``surrogateescape``) show as
  their code point in angle brackets: ``<U+202E>``.

Everything else, letters of any script included, is printed as it is. A
text that already holds ``␛`` or ``<U+202E>`` reads the same as one holding
the character itself; ``logist job approve-command --raw`` shows a held
command unambiguously (:func:`escaped`: Python string-literal escapes for
everything outside printable ASCII).

:func:`inert_json` makes a JSON document inert the same way without
changing what it means: ``json.dumps`` escapes C0 itself, and every other
character of the set is written as its ``\\uXXXX`` escape.

Nothing here changes what is recorded, sent to a model or run: only what a
terminal is given to display.
"""

from __future__ import annotations

import re
from typing import Optional

from .secrets.redact import redact

#: Beyond C0: DEL, C1, U+061C, U+200B, U+200E-U+200F, U+2028-U+202E, U+2060,
#: U+2066-U+2069, lone surrogates, U+FEFF. The classes below are kept as
#: text and compiled by :mod:`re` (and cached there) on first use: every
#: command imports this module, few print such a character.
_BEYOND_C0 = "\\x7f-\\x9f\\u061c\\u200b\\u200e\\u200f\\u2028-\\u202e\\u2060\\u2066-\\u2069\\ud800-\\udfff\\ufeff"
#: What :func:`inert` makes visible in text that spans lines (C0 but tab and newline) ...
_UNSAFE_MULTILINE = "[\\x00-\\x08\\x0b-\\x1f" + _BEYOND_C0 + "]"
#: ... and in a one-line field.
_UNSAFE_ONE_LINE = "[\\x00-\\x1f" + _BEYOND_C0 + "]"
#: What ``json.dumps(..., ensure_ascii=False)`` leaves as it is (it escapes C0 itself).
_UNSAFE_JSON = "[" + _BEYOND_C0 + "]"


def _visible(match: re.Match) -> str:
    """A C0 control's Control Picture (U+2400 + its code), DEL's (U+2421), or ``<U+XXXX>``."""
    code = ord(match.group(0))
    if code < 0x20:
        return chr(0x2400 + code)
    return "\u2421" if code == 0x7F else f"<U+{code:04X}>"


def inert(text: Optional[str], *, one_line: bool = False) -> Optional[str]:
    """``text`` with every character a terminal would act on made visible
    (see the module's doc); ``one_line``: newlines and tabs too."""
    if not text:
        return text
    pattern = _UNSAFE_ONE_LINE if one_line else _UNSAFE_MULTILINE
    if re.search(pattern, text) is None:
        return text
    return re.sub(pattern, _visible, text)


def shown(text: str, *, one_line: bool = False) -> str:
    """``text`` as Logist prints it for people (and writes it in a commit
    message): made :func:`inert` first, every known secret redacted last
    (:func:`logist.secrets.redact.redact`), so that nothing done to the text after
    the redaction can join a secret back together."""
    return redact(inert(text, one_line=one_line))


def inert_json(document: str) -> str:
    """A JSON document (from ``json.dumps(..., ensure_ascii=False)``) with
    each character :func:`inert` would change written as a ``\\uXXXX``
    escape: the same JSON value, nothing a terminal acts on."""
    if re.search(_UNSAFE_JSON, document) is None:
        return document
    return re.sub(_UNSAFE_JSON, lambda match: f"\\u{ord(match.group(0)):04x}", document)


_NAMED_ESCAPES = {"\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r"}


def escaped(text: str) -> str:
    """``text`` on one line with nothing left to interpretation: printable
    ASCII as it is, a backslash doubled, ``\\n``, ``\\t``, ``\\r``, and every
    other character as a Python string-literal escape (``\\x1b``, ``\\u202e``,
    ``\\U0001f600``), so ``escaped(s)`` read as a Python string literal is ``s``."""
    out = []
    for char in text:
        code = ord(char)
        if char in _NAMED_ESCAPES:
            out.append(_NAMED_ESCAPES[char])
        elif 0x20 <= code < 0x7F:
            out.append(char)
        elif code < 0x100:
            out.append(f"\\x{code:02x}")
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    return "".join(out)
