"""Errors that Logist reports to people as one clear line.

Everything the core raises on purpose derives from :class:`LogistError`; the
CLI turns it into a one-line message and a non-zero exit. Anything else is a
bug and shows a traceback only with ``LOGIST_DEBUG=1``.
"""

from __future__ import annotations


class LogistError(Exception):
    """An expected failure, shown to the user as one line."""


class NotFoundError(LogistError):
    """A job, role or file the user named does not exist."""


class TransitionError(LogistError):
    """The job's current state does not allow what was asked."""


class NotSteppableError(TransitionError):
    """The job cannot be stepped: it is finished or waits for a person (``status`` says which)."""

    def __init__(self, message: str, status=None):
        super().__init__(message)
        self.status = status


class JobBusyError(LogistError):
    """Another process holds the job's lock."""


class CorruptFileError(LogistError):
    """A file Logist owns could not be parsed (and was moved aside)."""


class ConfigError(LogistError):
    """A manifest, role, config or option is malformed."""


class LLMCallError(LogistError):
    """The LLM endpoint failed after the bounded retries.

    ``reply``: what did come back, when there was an answer Logist refused
    (one over ``max_answer_bytes``: its content cut to the limit), so that
    an answer that was paid for is recorded, once."""

    def __init__(self, message: str, reply=None):
        super().__init__(message)
        self.reply = reply
