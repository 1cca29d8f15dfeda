"""The HTTP library the ``openai`` SDK brings, and the one SSL context per
process that Logist's HTTP clients verify with: the endpoint clients
(:mod:`logist.model.client`) and the recording gateway's client to the
role's endpoint (:mod:`logist.model.gateway`).

Loading the machine's certificates is most of an HTTP client's cost (about
20 ms of CPU), and a context is made to be shared, so a process loads them
once for each ``SSL_CERT_FILE`` and ``SSL_CERT_DIR`` it runs with, not at
each client or gateway it makes. Below both users in the layers (the
client imports the gateway, through the coding agent's model), so that
both take the context from here."""

from __future__ import annotations

import functools
from typing import Optional


def httpx():
    """The SDK's HTTP library (``httpx2`` from openai 3 on), imported when
    first asked for, as lazily as the SDK itself."""
    try:
        import httpx2 as library  # lazy: only a call, or a run with an agent, needs it
    except ImportError:  # pragma: no cover - older SDKs bring httpx
        import httpx as library
    return library


@functools.cache
def ssl_context(cert_file: Optional[str], cert_dir: Optional[str]):
    """The SSL context the clients verify with, made as the SDK's transport
    makes it (the environment's ``SSL_CERT_FILE`` and ``SSL_CERT_DIR``,
    which this function is given, included), once per process for each."""
    return httpx().create_ssl_context()
