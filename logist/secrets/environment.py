"""Logist's environment, with its secrets held apart from ``os.environ``.

The ``logist`` program takes every secret out of its own environment as it
starts, before it starts any thread or process
(:func:`logist.workspace.sandbox.withdraw_secrets`): the API key
(``LOGIST_API_KEY``, ``OPENAI_API_KEY``) and every variable
:func:`logist.secrets.redact.known_secrets` takes for a secret. They are kept
here, in this module's memory only, so that:

* no process Logist starts inherits one by accident (git, a command, a
  probe: each is given an environment built from an allowlist anyway);
* the key has one source, read once: :func:`get` is what
  :func:`logist.store.config.resolve_api_key` reads, and the client is
  given the key it returns;
* redaction still knows every secret (:func:`full` is the environment
  :func:`logist.secrets.redact.known_secrets` reads), and a variable a job passes to
  its commands (``command_env``) is still found.

The hold lives as long as one run of the ``logist`` program
(:func:`logist.secrets.process.secrets_withdrawn`): the entry point puts every
secret back into ``os.environ`` when its command ends, so a program (or a
test) that calls it in its own process goes on as it was, and nothing is
held between runs. A program that uses the library keeps its environment as
it is: nothing is held until something calls :func:`hold` (the library
blanks the secrets in ``/proc/self/environ`` before its first command
instead, as before).
"""

from __future__ import annotations

import contextlib
import os
from typing import Iterable, Iterator, Optional

#: The secrets taken out of ``os.environ``, by variable name, while a run holds them.
_HELD: dict[str, str] = {}


def hold(names: Iterable[str]) -> list[str]:
    """Move the variables ``names`` from ``os.environ`` to the hold; returns those moved."""
    moved = []
    for name in names:
        value = os.environ.pop(name, None)
        if value is not None:
            _HELD[name] = value
            moved.append(name)
    return moved


def get(name: str) -> Optional[str]:
    """A variable of Logist's environment, held or not (``os.environ`` wins:
    a value set after start-up is the newer)."""
    value = os.environ.get(name)
    return value if value is not None else _HELD.get(name)


def full() -> dict:
    """Logist's whole environment: ``os.environ`` and what is held."""
    return {**_HELD, **os.environ}


def held() -> dict:
    """What is held (a copy)."""
    return dict(_HELD)


def release() -> dict:
    """Put every held variable back into ``os.environ`` (where it is not set
    again already) and empty the hold; returns what was held. For a program
    that runs ``logist``'s entry point in its own process and goes on."""
    released = dict(_HELD)
    for name, value in released.items():
        os.environ.setdefault(name, value)
    _HELD.clear()
    return released


@contextlib.contextmanager
def lent() -> Iterator[None]:
    """The held variables back in ``os.environ`` for the length of the
    block, held again after it: for processes that must inherit them (a
    local Ray cluster's, whose workers run steps and read the key from
    their own environment)."""
    names = list(release())
    try:
        yield
    finally:
        hold(names)
