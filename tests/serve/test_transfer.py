"""What ``logist serve`` sends over the wire: assets under names made from
their content, kept by the browser for good; pages never kept; pages,
assets and events gzip-compressed for a client that accepts it, each event
flushed as it is sent. A real server process and a raw HTTP client."""

from __future__ import annotations

import gzip
import http.client
import json
import re
import time
import zlib

import pytest

from logist.engine.create import create_job
from logist.engine.step import post_answer

from serving import served  # noqa: F401 - fixture

pytestmark = pytest.mark.serve

GZIP = {"Accept-Encoding": "gzip, deflate, br"}


def big_job(jobs, entries: int = 500):
    job = create_job(jobs, "big", "Write hello.py", max_steps=entries)
    for n in range(2, entries + 1):
        post_answer(job, json.dumps({"action": "MESSAGE", "message": f"Working, part {n}: read the files, then wrote a plan."}))
    assert job.manifest().last_sequence == entries
    return job


def load(server, path: str, cache: dict, headers: dict) -> int:
    """The bytes one load of ``path`` transfers (bodies and headers), with a
    client cache that keeps what the server says it may keep, as a browser does."""
    page = server.request("GET", path, headers)
    assert page.status == 200
    sent = len(page.data) + sum(len(k) + len(v) + 4 for k, v in page.getheaders())
    html = gzip.decompress(page.data) if page.getheader("Content-Encoding") == "gzip" else page.data
    for link in re.findall(rb'(?:href|src)="(/assets/[^"]+)"', html):
        if link in cache:
            continue
        asset = server.request("GET", link.decode(), headers)
        assert asset.status == 200
        sent += len(asset.data) + sum(len(k) + len(v) + 4 for k, v in asset.getheaders())
        if "immutable" in (asset.getheader("Cache-Control") or ""):
            cache[link] = asset.data
    return sent


def test_a_500_entry_page_loaded_again_transfers_under_a_tenth_of_the_first_load(jobs, served):
    big_job(jobs)
    server = served()
    page = server.request("GET", "/jobs/big", GZIP)
    plain = server.request("GET", "/jobs/big")
    assert page.getheader("Content-Encoding") == "gzip" and page.getheader("Cache-Control") == "no-store"
    assert plain.getheader("Content-Encoding") is None
    assert gzip.decompress(page.data) == plain.data, "the same page, compressed"
    links = re.findall(rb'(?:href|src)="(/assets/[^"]+)"', plain.data)
    assert len(links) == 4 and all(re.fullmatch(rb"/assets/\w+\.[0-9a-f]{12}\.(css|js)", link) for link in links), links
    for link in links:
        asset = server.request("GET", link.decode(), GZIP)
        assert asset.getheader("Cache-Control") == "public, max-age=31536000, immutable"
        assert asset.getheader("Content-Encoding") == "gzip"
    # The name an older page linked is still served, and not kept.
    assert server.request("GET", "/assets/serve.js").getheader("Cache-Control") == "no-store"

    # What a load transferred before: each one the page and every asset, uncompressed (no-store).
    before = load(server, "/jobs/big", {}, {})
    cache: dict = {}
    first = load(server, "/jobs/big", cache, GZIP)
    again = load(server, "/jobs/big", cache, GZIP)
    assert len(cache) == 4 and again < first
    assert again < before / 10, (before, first, again)


def test_an_event_stream_is_compressed_and_each_event_arrives_as_it_is_sent(jobs, served):
    job = create_job(jobs, "j", "Write hello.py")
    server = served()
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    connection.request("GET", "/jobs/j/events", headers={
        "Host": f"127.0.0.1:{server.port}", "Authorization": f"Bearer {server.token}", **GZIP})
    response = connection.getresponse()
    assert response.getheader("Content-Encoding") == "gzip"
    assert response.getheader("Content-Type").startswith("text/event-stream")
    inflate, text = zlib.decompressobj(31), ""

    def until(word: str) -> None:
        nonlocal text
        deadline = time.monotonic() + 5
        while word not in text:
            assert time.monotonic() < deadline, text[-500:]
            text += inflate.decompress(response.read1(65536)).decode()

    until("event: counts")  # the stream's first events, while it is still open
    post_answer(job, json.dumps({"action": "MESSAGE", "message": "Part 2."}))
    until("Part 2.")
    assert "id: 2\nevent: step\n" in text
    connection.close()
