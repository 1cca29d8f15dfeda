"""gzip for ``logist serve``'s pages, assets and event streams, with the
standard library's zlib.

An ASGI middleware: when the request accepts gzip and the response is text
(HTML, CSS, JavaScript, an event stream) it is compressed as it is sent,
one compressor per response. A page is sent as it is rendered, in pieces,
and compressed as one stream; an event stream is flushed after each piece
(``Z_SYNC_FLUSH``), so that each event reaches the browser when it is sent,
not when a buffer fills, while the stream keeps one dictionary (a job's
rows, much alike, compress well after the first: a page of them to a few
per cent of its size).
"""

from __future__ import annotations

import zlib

#: The media types compressed (what comes before any ``;``).
TEXT = (b"text/html", b"text/css", b"text/javascript", b"text/event-stream", b"text/plain")
#: Sent as it comes: each piece flushed.
STREAMED = b"text/event-stream"


def accepts_gzip(header: str) -> bool:
    """Whether an Accept-Encoding header takes gzip (a ``q=0`` refuses it)."""
    for part in header.split(","):
        coding, _, params = part.strip().partition(";")
        if coding.strip().lower() in ("gzip", "*"):
            q = params.strip().lower()
            return not (q.startswith("q=") and q[2:].strip() in ("0", "0.0", "0.00", "0.000"))
    return False


class Gzip:
    """The ASGI middleware (see the module's doc)."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] == "HEAD":
            return await self.app(scope, receive, send)
        accept = next((v.decode("latin-1") for k, v in scope["headers"] if k.lower() == b"accept-encoding"), "")
        if not accepts_gzip(accept):
            return await self.app(scope, receive, send)
        state = {"compressor": None, "flush": zlib.Z_NO_FLUSH}

        async def compressing(message):
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                kind = next((v.split(b";")[0].strip().lower() for k, v in headers if k.lower() == b"content-type"), b"")
                encoded = any(k.lower() == b"content-encoding" for k, _ in headers)
                if kind in TEXT and not encoded and message.get("status", 200) != 304:
                    state["compressor"] = zlib.compressobj(6, zlib.DEFLATED, 31)  # 31: the gzip format
                    state["flush"] = zlib.Z_SYNC_FLUSH if kind == STREAMED else zlib.Z_NO_FLUSH
                    headers = [(k, v) for k, v in headers if k.lower() != b"content-length"]
                    headers += [(b"content-encoding", b"gzip"), (b"vary", b"Accept-Encoding")]
                    message = {**message, "headers": headers}
                elif kind in TEXT:
                    message = {**message, "headers": [*headers, (b"vary", b"Accept-Encoding")]}
            elif message["type"] == "http.response.body" and state["compressor"] is not None:
                compressor, more = state["compressor"], message.get("more_body", False)
                data = compressor.compress(message.get("body", b""))
                data += compressor.flush(state["flush"] if more else zlib.Z_FINISH)
                if more and not data:
                    return  # nothing to send yet: the compressor holds it
                message = {**message, "body": data}
            await send(message)

        await self.app(scope, receive, compressing)
