"""What Logist asks of a model, whatever answers: one small base class.

The engine makes a call by handing a :class:`Request` (the Chat Completions
body it prepared, the ``response_format`` forms it may fall back on, who to
tell as the answer streams in) to a :class:`Model` and reading back an
:class:`~logist.model.completions.LLMReply`, or an
:class:`~logist.errors.LLMCallError` whose ``kind`` says what failed. That
is the whole seam, as httpx's ``BaseTransport`` is one method: everything
about *where* the answer comes from is behind it.

* :class:`logist.model.client.OpenAICompatible` sends the request to an
  OpenAI-compatible endpoint (retries, streams, a refused response_format
  asked again with a weaker one, the faults of the wire named).
* :class:`logist.replay.scripted.ScriptedModel` answers from a script, in
  memory (tests, and people who write their own roles).

Another source of answers (a check's output, an agent run behind a gateway)
is another subclass. The engine asks for the model of a call in one place,
:meth:`logist.model.client.Endpoints.model_for`: the model its owner was
given (``logist.open(path, model=...)``), else the endpoint's.

Besides answering, a model may tell what it knows of itself (its context
window, its tokenizer) and what it was found to refuse (streams, forms of
``response_format``); the defaults say it knows nothing and refuses
nothing. Whatever answers, a call is recorded the same way.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Callable, Optional, Union

from .completions import LLMReply


@dataclass
class Request:
    """One call, as the engine makes it."""

    #: The Chat Completions body, key for key (see :func:`logist.engine.prepare.prepare`).
    body: dict
    #: The ``response_format`` values the body may carry, strongest first,
    #: the body carrying the first (a model that refuses one may use the next).
    formats: list = field(default_factory=list)
    #: Told, as a streamed answer arrives, how many pieces (about one token each) came so far.
    on_tokens: Optional[Callable[[int], None]] = None
    #: The ``Idempotency-Key`` of a body sent (the reply's ``key``); None: none.
    key_for: Optional[Callable[[dict], str]] = None
    #: A body's bytes as sent (compact JSON, encoded once: the key is their digest); None: the SDK encodes it.
    encoded: Optional[Callable[[dict], bytes]] = None
    #: Extra headers an endpoint is sent (the job's name: ``X-Logist-Job``).
    headers: dict = field(default_factory=dict)
    #: Answers longer than this (UTF-8 bytes) are refused; None: no limit.
    max_answer_bytes: Optional[int] = None

    def __post_init__(self) -> None:
        if not self.formats:
            self.formats = [self.body.get("response_format")]


class Model(ABC):
    """A source of answers to Chat Completions requests."""

    @abstractmethod
    def complete(self, request: Request) -> LLMReply:
        """The answer to ``request``; :class:`~logist.errors.LLMCallError`
        when none came (``kind``: :data:`logist.errors.FAULTS`; ``reply``: an
        answer that came and was refused, recorded as it is)."""

    def ready(self) -> None:
        """Make ready what a call needs before it is timed (a client, a connection)."""

    def streams(self) -> bool:
        """False once the model was found not to take streamed requests."""
        return True

    def usable_formats(self, formats: list) -> list:
        """``formats`` less those the model was found to refuse (the last always kept)."""
        return formats

    def context_window(self, model: str) -> tuple[Optional[int], str]:
        """``model``'s window as the model tells it, and where it was read; ``(None, "")``: it tells none."""
        return None, ""

    def count_tokens(self, model: str, text: Union[str, Callable[[], str]]) -> Optional[int]:
        """The tokens ``text`` is to the model's own tokenizer; None: it has none to ask.
        ``text``: the text, or what makes it (a request's text is the whole
        turn's: made only when there is a tokenizer to ask)."""
        return None

    def learn_window(self, model: str, error: str) -> Optional[int]:
        """The window a failed call's error names, remembered; None: it names none."""
        return None


#: HTTP statuses an endpoint is asked again after (the openai SDK's rule): 408, 409, 429, and 5xx.
def status_retried(status: int) -> bool:
    return status in (408, 409, 429) or status >= 500


def status_kind(status: int) -> str:
    """What kind of failure an HTTP error status is (:data:`logist.errors.FAULTS`)."""
    if status in (401, 403, 404, 405):
        return "setup"
    return "transient" if status_retried(status) else "failed"


def status_text(status: int, detail: str, base_url: str = "", key_from: Optional[str] = None) -> str:
    """An HTTP error as one line: its status, what the endpoint said, and a
    hint where one helps. ``base_url``: the endpoint (a URL that ends in /v1
    is not asked whether it does); ``key_from``: the variable the key sent
    was read from ("": a key given otherwise; None: no key was sent)."""
    hint = ""
    has_v1 = base_url.rstrip("/").endswith("/v1")
    if status == 401:
        hint = (f" (the key in {key_from} was refused)" if key_from else " (the API key was refused)"
                if key_from is not None else " (set LOGIST_API_KEY or OPENAI_API_KEY)")
    elif status == 403:
        hint = " (the key is not allowed this model or endpoint)"
    elif status in (404, 405) and not detail:
        hint = (" (no chat completions API there: is the base URL the API's?)" if has_v1 else
                " (no chat completions API there: does the base URL end in /v1?)")
    elif status == 404:
        hint = " (is the model name right?)" if has_v1 else " (is the model name right, and does the base URL end in /v1?)"
    return f"HTTP {status}{': ' + detail[:300] if detail else ''}{hint}"


def failed_after(attempts: int, what: str) -> str:
    """The one line a failed call is recorded with."""
    return f"LLM call failed after {attempts} attempt{'s' if attempts > 1 else ''}: {what}"
