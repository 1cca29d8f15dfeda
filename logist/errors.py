"""Errors that Logist reports to people as one clear line.

Everything the core raises on purpose derives from :class:`LogistError`; the
CLI turns it into a one-line message and a non-zero exit. Anything else is a
bug and shows a traceback only with ``LOGIST_DEBUG=1``.
"""

from __future__ import annotations

#: The name Logist is published and installed under (``pip install logist-jobs``);
#: the import name and the command stay ``logist`` (``logist`` on PyPI is
#: another project).
DISTRIBUTION = "logist-jobs"


def install_hint(extra: str) -> str:
    """The command that installs one of Logist's extras, for a message saying
    what is missing: ``pip install 'logist-jobs[ray]'``."""
    return f"pip install '{DISTRIBUTION}[{extra}]'"


class LogistError(Exception):
    """An expected failure, shown to the user as one line."""


class NotFoundError(LogistError):
    """A job, role or file the user named does not exist."""


class UsageError(LogistError):
    """What the person typed cannot be used: a wrong, missing or ambiguous
    option or argument (an empty objective, a job id that is no job id or
    names no job). The CLI exits 2 for it, as for click's own usage errors."""


class NoSuchNameError(NotFoundError, UsageError):
    """A job, role, skill or prompt template a person named does not exist
    (a wrong argument: exit 2)."""


class TransitionError(LogistError):
    """The job's current state does not allow what was asked."""


class NotSteppableError(TransitionError):
    """The job cannot be stepped: it is finished or waits for a person (``status`` says which)."""

    def __init__(self, message: str, status=None):
        super().__init__(message)
        self.status = status


class MovedOnError(TransitionError):
    """The job is no longer at the entry a decision was made on (a page's
    form, rendered before another command recorded a step)."""


class JobBusyError(LogistError):
    """Another process holds the job's lock."""


class CorruptFileError(LogistError):
    """A file Logist owns could not be parsed (and was moved aside)."""


class ConfigError(LogistError):
    """A manifest, role, config or option is malformed."""


class InvalidManifestError(ConfigError):
    """A job's manifest is a JSON object with a field of a wrong type or
    value (a hand edit): refused, never rebuilt from the history on its own
    (that would drop the person's other edits). ``fields``: the dotted
    names of the fields at fault."""

    def __init__(self, message: str, fields: tuple[str, ...] = ()):
        super().__init__(message)
        self.fields = fields


class LLMCallError(LogistError):
    """The LLM endpoint failed after the bounded retries.

    ``reply``: what did come back, when there was an answer Logist refused
    (one over ``max_answer_bytes``: its content cut to the limit), so that
    an answer that was paid for is recorded, once."""

    #: What kind of failure it was (:data:`FAULTS`).
    kind: str = "failed"

    def __init__(self, message: str, reply=None, kind: str = "failed"):
        super().__init__(message)
        self.reply = reply
        self.kind = kind


class EndpointError(LogistError):
    """The endpoint cannot be used as configured (not reachable, the key or
    the URL refused, a response_format it refuses): no call was made, and
    the job is exactly as it was."""


#: The kinds of :class:`LLMCallError`: ``setup``, the endpoint cannot be used
#: as configured and nothing was asked of a model (connection refused, 401,
#: 403, 404, a response_format it refuses): the job is left as it was;
#: ``transient``, the endpoint failed for now (5xx after the retries, a
#: timeout, a disconnect): the turn is kept to go on with; ``failed``, any
#: other failure, recorded as the step's failed call.
FAULTS = ("setup", "transient", "failed")


def format_validation_error(exc, where: str) -> str:
    """A pydantic ``ValidationError`` as one line: one part per field, as the
    CLI shows them."""
    parts = []
    for err in exc.errors():
        loc = ".".join(str(x) for x in err["loc"])
        message = err["msg"].removeprefix("Value error, ")
        # A check across fields names its fields in its own message.
        parts.append(f"{loc}: {message}" if loc else message)
    return f"{where}: " + "; ".join(parts)


class InvalidAnswer(ValueError):
    """The answer is not one valid JSON object of the protocol (:mod:`logist.protocol.answer`).

    Not a :class:`LogistError`: an invalid answer is the model's, recorded
    and answered in the job, never a command's failure."""


def json_problem(exc) -> str:
    """What a ``json.JSONDecodeError`` found, without the "at" Python's
    message ends with where it leaves the position to its own text
    ("Invalid control character at"), so that "... at line 1" reads once."""
    msg = str(getattr(exc, "msg", exc))
    return msg[:-3] if msg.endswith(" at") else msg
