"""Secret values never reach a file, a request or the terminal: one function.

A *known secret* is a value Logist can see in its own environment that must
not travel: the API key (``LOGIST_API_KEY``, ``OPENAI_API_KEY``), the value
of every variable whose name looks secret (``*KEY*``, ``*TOKEN*``,
``*SECRET*``, ``*PASSWORD*``, ``*PASSWD*``, ``*PASSPHRASE*``,
``*CREDENTIAL*``, a ``PAT`` or ``AUTH`` word such as ``GH_PAT``) and the
password of any URL with credentials in any variable
(``DATABASE_URL=postgres://user:PASSWORD@host/db``). Values shorter than
:data:`MIN_LENGTH` characters are left alone: blanking ``1`` or ``yes``
everywhere would wreck the text and hide nothing.

:func:`redact` replaces each with ``[redacted]``. It is applied where text
from outside enters Logist, so what is recorded, sent and printed is the
same redacted text:

* a command's output, after it is cleaned and before the model is told about
  it, and its raw text wherever it *shows* a secret on a terminal
  (:func:`redact_shown`; engine/commands.py);
* the model's answer and a failed call's message, as they arrive (engine/step.py);
* text a person gives a job (objective, details, answers, feedback), and the
  prompt as a whole, workspace files included (engine/prepare.py), before it
  is sent, previewed or recorded;

and, as a last guard, by the writers themselves (:func:`redact_data` in the
store's JSON writer and the history's append, :func:`redact` in the
transcript and report writers, the report's before each value is
HTML-escaped) and by every printer of the command line, after any other
change to the text (:func:`logist.terminal.shown`), so a path nobody
thought of still writes or prints no secret. :func:`url_shown` hides the
password of a URL that is shown (an endpoint), secret or not. Commands never see these values in the first place (see
:mod:`logist.workspace.sandbox`): redaction is defence in depth, not the wall.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any, Callable, Iterable, Mapping, Optional

from . import environment

REDACTED = "[redacted]"
#: Shorter values are not redacted (see the module's doc).
MIN_LENGTH = 6
#: Where the API key is read from (store/config.py reads the same names).
KEY_VARIABLES = ("LOGIST_API_KEY", "OPENAI_API_KEY")
#: Variable names whose values are secret: these words anywhere in the name...
SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASSPHRASE", "CREDENTIAL")
#: ... or these as a whole part of it (``GH_PAT``, not ``PATH``).
SECRET_PARTS = frozenset({"PAT", "AUTH"})
#: The password of a URL with credentials: scheme://user:PASSWORD@host.
URL_PASSWORD = re.compile(r"[a-z][a-z0-9+.-]*://[^\s:/@]*:([^\s@/]+)@", re.I)

_CACHE: dict = {}


def secret_name(name: str) -> bool:
    """Whether an environment variable's name says its value is secret."""
    upper = name.upper()
    return any(word in upper for word in SECRET_WORDS) or not SECRET_PARTS.isdisjoint(upper.split("_"))


def known_secrets(environ: Optional[Mapping[str, str]] = None, extra: Iterable[str] = ()) -> list[str]:
    """The secret values in ``environ`` (the process's, by default) and
    ``extra``, longest first (so a secret that contains another is replaced whole)."""
    raw = getattr(os.environ, "_data", None) if environ is None and not extra else None
    # Keyed on both halves of the environment: what os.environ holds and what start-up took out of it.
    if raw is not None and _CACHE.get("environ") == raw and _CACHE.get("held") == environment.held():
        return _CACHE["secrets"]
    env = environment.full() if environ is None else environ  # what start-up took out of os.environ too
    found = set(extra)
    for name, value in env.items():
        if name in KEY_VARIABLES or secret_name(name):
            found.add(value)
        if "@" in value:
            found.update(match.group(1) for match in URL_PASSWORD.finditer(value))
    secrets = sorted((value for value in found if len(value.strip()) >= MIN_LENGTH), key=len, reverse=True)
    if raw is not None:
        _CACHE.update(environ=dict(raw), held=environment.held(), secrets=secrets)
    return secrets


def _forms(secret: str) -> list[str]:
    """The secret, and how it reads inside a JSON string when that differs."""
    escaped = json.dumps(secret, ensure_ascii=False)[1:-1]
    return [secret] if escaped == secret else [secret, escaped]


def redact(text: Optional[str], secrets: Optional[list[str]] = None) -> Optional[str]:
    """``text`` with every known secret replaced by ``[redacted]``."""
    if not text:
        return text
    for secret in known_secrets() if secrets is None else secrets:
        for form in _forms(secret):
            if form in text:
                text = text.replace(form, REDACTED)
    return text


#: What a text shows as: its lines, and with ``track=True`` for each character
#: of each line the index in the text it came from (logist.engine.commands.shown_lines).
Display = Callable[..., tuple[list[str], Optional[list[list[int]]]]]
#: How many times :func:`redact_shown` looks again after cutting what it found.
SHOWN_ROUNDS = 3


def redact_shown(text: str, display: Display, secrets: Optional[list[str]] = None) -> str:
    """``text`` (a command's output as written) with every known secret
    replaced where it is written *and* where it only shows once ``display``
    has applied what a terminal does (escape sequences, ``\\r`` and ``X\\b``
    redraws, control bytes removed): ``SEC\\x1b[0mRET`` shows as ``SECRET``,
    so the whole part of the text that shows the secret, from the first
    character it shows to the last, is replaced. What still shows a secret
    after :data:`SHOWN_ROUNDS` rounds is replaced by what it shows, redacted."""
    secrets = known_secrets() if secrets is None else secrets
    text = redact(text, secrets)
    if not secrets or not text:
        return text
    for _ in range(SHOWN_ROUNDS):
        lines, _ = display(text)
        shown = "\n".join(lines)
        if not any(secret in shown for secret in secrets):
            return text
        lines, origins = display(text, track=True)
        spans = []
        for line, where in zip(lines, origins or []):
            for secret in secrets:
                start = line.find(secret)
                while start != -1:
                    part = where[start:start + len(secret)]
                    spans.append((min(part), max(part) + 1))
                    start = line.find(secret, start + 1)
        if not spans:
            break  # a secret across lines: shown only as a whole
        for start, end in _merged(spans)[::-1]:
            text = text[:start] + REDACTED + text[end:]
    return redact("\n".join(display(text)[0]), secrets)


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``spans`` sorted, overlapping ones made one."""
    out: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def url_shown(text: str) -> str:
    """``text`` with the password of every URL with credentials in it
    replaced by ``[redacted]`` (``http://user:[redacted]@host/v1``): how an
    endpoint is shown, whether or not its password is a known secret (one
    given by ``--base-url`` or in config.json is not)."""
    if "@" not in text:
        return text
    return URL_PASSWORD.sub(lambda m: m.group(0)[: m.start(1) - m.start(0)] + REDACTED + "@", text)


def url_passwords(text: Optional[str]) -> list[str]:
    """The password of every URL with credentials in ``text`` (an endpoint's
    ``http://user:PASSWORD@host/v1``), for a caller that must take it out
    of what that endpoint says back."""
    return [match.group(1) for match in URL_PASSWORD.finditer(text or "")]


def redact_data(data: Any, secrets: Optional[list[str]] = None) -> Any:
    """JSON-like ``data`` with :func:`redact` applied to every string in it
    (keys too); a new object only where something changed."""
    secrets = known_secrets() if secrets is None else secrets
    if not secrets:
        return data
    if isinstance(data, str):
        return redact(data, secrets)
    if isinstance(data, dict):
        return {redact(key, secrets) if isinstance(key, str) else key: redact_data(value, secrets)
                for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        return [redact_data(value, secrets) for value in data]
    return data
