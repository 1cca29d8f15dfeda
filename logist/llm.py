"""The one module that talks to the model, through the ``openai`` SDK.

Retries are the SDK's own: it retries timeouts, connection errors, 408, 409,
429 and 5xx with exponential backoff and honours ``Retry-After``; Logist only
bounds the count (``max_retries`` in config.json) and the per-request timeout
(``request_timeout``, 30 s by default). When those are spent the call raises
:class:`~logist.errors.LLMCallError` with one line saying what happened; the
API key never appears in it, nor does the endpoint.

What is sent is decided elsewhere: :func:`chat` sends the request body it is
given, key for key, so ``job preview --json`` shows exactly what goes out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from .errors import LLMCallError


@dataclass
class LLMSettings:
    base_url: str
    api_key: Optional[str]
    timeout: float = 30.0
    max_retries: int = 3


@dataclass
class LLMReply:
    content: str
    prompt_tokens: Optional[int]
    completion_tokens: Optional[int]
    model: Optional[str]


# Local servers (Ollama, vLLM, LM Studio) accept any key; the SDK insists on
# one, so a fixed placeholder is sent when none is configured.
NO_KEY = "no-key-set"


def scrub(text: str, secret: Optional[str]) -> str:
    """Remove the key from anything an endpoint sent back (error bodies can
    echo it), since what comes back is recorded and printed."""
    if secret and len(secret) >= 4 and text:
        return text.replace(secret, "[redacted]")
    return text


def _describe(exc: Exception) -> str:
    import openai

    if isinstance(exc, openai.APITimeoutError):
        return "the request timed out"
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__ or exc
        return f"cannot connect ({type(cause).__name__})"
    if isinstance(exc, openai.APIStatusError):
        detail = ""
        body = exc.body
        if isinstance(body, dict):
            inner = body.get("error", body)
            if isinstance(inner, dict):
                detail = str(inner.get("message") or "")
            elif isinstance(inner, str):
                detail = inner
        hint = ""
        if exc.status_code == 401:
            hint = " (set LOGIST_API_KEY or OPENAI_API_KEY)"
        return f"HTTP {exc.status_code}{': ' + detail[:300] if detail else ''}{hint}"
    return f"{type(exc).__name__}: {exc}"


def chat(settings: LLMSettings, body: dict) -> LLMReply:
    """One Chat Completions call of ``body`` exactly as given (see
    :func:`logist.engine.prepare.prepare`), with the SDK's bounded retries.

    The error message names neither the endpoint nor the key: it is
    recorded as the step's reason, and a resubmitted job shows that reason
    to the model, which has no business knowing where it is served from
    (and a recording replays against another port). The CLI adds the
    endpoint where a person reads the error.
    """
    import openai
    from openai.types.chat import ChatCompletion

    client = openai.OpenAI(
        base_url=settings.base_url,
        api_key=settings.api_key or NO_KEY,
        timeout=settings.timeout,
        max_retries=settings.max_retries,
    )
    try:
        # The body as it is: the SDK's create() would walk and re-validate
        # every message first, which costs more than the rest of a step once
        # a turn has a few hundred messages (bench/history_size.py).
        completion = client.post("/chat/completions", body=body, cast_to=ChatCompletion)
    except openai.OpenAIError as exc:
        retried = not isinstance(exc, openai.APIStatusError) or exc.status_code in (408, 409, 429) or exc.status_code >= 500
        attempts = settings.max_retries + 1 if retried else 1
        message = f"LLM call failed after {attempts} attempt{'s' if attempts > 1 else ''}: {_describe(exc)}"
        raise LLMCallError(scrub(message, settings.api_key)) from None
    finally:
        client.close()
    if not completion.choices:
        raise LLMCallError("LLM call returned no choices")
    content = scrub(completion.choices[0].message.content or "", settings.api_key)
    usage = completion.usage
    return LLMReply(
        content=content,
        prompt_tokens=getattr(usage, "prompt_tokens", None) if usage else None,
        completion_tokens=getattr(usage, "completion_tokens", None) if usage else None,
        model=completion.model,
    )
