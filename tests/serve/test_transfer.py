"""What ``logist serve`` sends over the wire: assets under names made from
their content, kept by the browser for good; pages kept by the browser
only and validated every time (a strong ETag, 304 while unchanged); pages,
assets and events gzip-compressed for a client that accepts it, each event
flushed as it is sent. A real server process and a raw HTTP client."""

from __future__ import annotations

import gzip
import http.client
import json
import re
import shutil
import time
import zlib
from pathlib import Path

import pytest

from logist.engine.create import create_job
from logist.store.jobsdir import JobsDir
from logist.engine.step import post_answer

from serving import browser, served  # noqa: F401 - fixtures

pytestmark = pytest.mark.serve

GZIP = {"Accept-Encoding": "gzip, deflate, br"}


ENTRIES = 500


@pytest.fixture(scope="session")
def built_big(tmp_path_factory) -> Path:
    """A jobs directory holding a job of :data:`ENTRIES` short MESSAGE
    entries, posted once per test process (the tests copy it)."""
    made = JobsDir(tmp_path_factory.mktemp("big") / "jobs")
    made.init()
    job = create_job(made, "big", "Write hello.py", max_steps=ENTRIES)
    for n in range(2, ENTRIES + 1):
        post_answer(job, json.dumps({"action": "MESSAGE", "message": f"Working, part {n}: read the files, then wrote a plan."}))
    return made.path


@pytest.fixture
def big_job(jobs, built_big):
    """The 500-entry job in the test's jobs directory (the index names it by its relative folder)."""
    shutil.copytree(built_big, jobs.path, dirs_exist_ok=True, symlinks=True)
    job = jobs.job("big")
    assert job.manifest().last_sequence == ENTRIES
    return job


def load(server, path: str, cache: dict, headers: dict) -> int:
    """The bytes one load of ``path`` transfers (bodies and headers), with a
    client cache that keeps what the server says it may keep, as a browser
    does: an immutable asset is not asked for again; a page kept with its
    ETag is asked for with If-None-Match, and a 304 shows the kept copy."""
    kept = cache.get(path)
    asked = {**headers, "If-None-Match": kept[0]} if kept is not None else headers
    page = server.request("GET", path, asked)
    sent = len(page.data) + sum(len(k) + len(v) + 4 for k, v in page.getheaders())
    if page.status == 304:
        assert kept is not None and page.getheader("ETag") == kept[0] and not page.data
        data = kept[1]
    else:
        assert page.status == 200
        data = page.data
        if page.getheader("ETag") and "no-store" not in (page.getheader("Cache-Control") or ""):
            cache[path] = (page.getheader("ETag"), data)
    html = gzip.decompress(data) if page.getheader("Content-Encoding") == "gzip" or data[:2] == b"\x1f\x8b" else data
    for link in re.findall(rb'(?:href|src)="(/assets/[^"]+)"', html):
        if link in cache:
            continue
        asset = server.request("GET", link.decode(), headers)
        assert asset.status == 200
        sent += len(asset.data) + sum(len(k) + len(v) + 4 for k, v in asset.getheaders())
        if "immutable" in (asset.getheader("Cache-Control") or ""):
            cache[link] = asset.data
    return sent


def test_a_500_entry_page_loaded_again_transfers_under_a_tenth_of_the_first_load(big_job, served):
    server = served()
    page = server.request("GET", "/jobs/big", GZIP)
    plain = server.request("GET", "/jobs/big")
    assert page.getheader("Content-Encoding") == "gzip" and page.getheader("Cache-Control") == "no-cache, private"
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

    # A strong tag, one per representation: the gzip page and the plain one differ.
    tag = page.getheader("ETag")
    assert re.fullmatch(r'"[0-9a-f]{32}"', tag) and plain.getheader("ETag") not in (None, tag)

    # What a load transferred before: each one the page and every asset, uncompressed, nothing kept.
    before = load(server, "/jobs/big", {}, {})
    cache: dict = {}
    first = load(server, "/jobs/big", cache, GZIP)
    again = load(server, "/jobs/big", cache, GZIP)
    assert len(cache) == 5 and again < first / 10, (before, first, again)
    assert first < before / 10, (before, first, again)


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


def test_a_page_is_304_while_unchanged_and_whole_again_once_the_job_moves_on(jobs, served):
    job = create_job(jobs, "j", "Write hello.py")
    post_answer(job, json.dumps({"action": "ASK", "question": "Which greeting?", "required": True}))
    server = served()
    first = server.request("GET", "/jobs/j")
    tag = first.getheader("ETag")
    assert first.status == 200 and b'name="at" value="2"' in first.data
    assert first.getheader("Cache-Control") == "no-cache, private"
    same = server.request("GET", "/jobs/j", {"If-None-Match": f'"other", {tag}'})
    assert same.status == 304 and same.data == b"" and same.getheader("ETag") == tag
    assert same.getheader("Cache-Control") == "no-cache, private"
    assert server.request("GET", "/jobs/j", {"If-None-Match": "W/" + tag}).status == 304
    # Another page of the history is another representation.
    assert server.request("GET", "/jobs/j?from=1", {"If-None-Match": tag}).status == 200
    # The job moves on (a person answers): the kept page's form would be stale, so it is not validated.
    answered = server.request("POST", "/jobs/j/answer", {"Content-Type": "application/x-www-form-urlencoded"},
                              b"at=2&text=Hello")
    assert answered.status == 303
    moved = server.request("GET", "/jobs/j", {"If-None-Match": tag})
    assert moved.status == 200 and moved.getheader("ETag") != tag
    assert b'name="at" value="3"' in moved.data and b'name="at" value="2"' not in moved.data
    # A stop asked for while a step runs shows on the page: another tag too.
    (job.dir / "stop_request.json").write_text(json.dumps({"action": "suspend", "requested_at": "now"}))
    assert server.request("GET", "/jobs/j", {"If-None-Match": moved.getheader("ETag")}).status == 200
    # The list of jobs is validated the same way.
    listed = server.request("GET", "/")
    assert server.request("GET", "/", {"If-None-Match": listed.getheader("ETag")}).status == 304
    post_answer(job, json.dumps({"action": "MESSAGE", "message": "Part 4."}))
    assert server.request("GET", "/", {"If-None-Match": listed.getheader("ETag")}).status == 200


@pytest.mark.browser
def test_a_browser_loading_a_500_entry_page_again_transfers_under_a_tenth(big_job, served, browser):
    """The same acceptance as a real Chromium measures it: CDP's encoded
    bytes of every response, the page's event stream's first events included."""
    server = served()
    context = browser.new_context()
    page = context.new_page()
    cdp = context.new_cdp_session(page)
    cdp.send("Network.enable")
    urls: dict[str, str] = {}
    received: dict[str, int] = {}
    cdp.on("Network.requestWillBeSent", lambda e: urls.__setitem__(e["requestId"], e["request"]["url"]))
    cdp.on("Network.dataReceived", lambda e: received.__setitem__(e["requestId"], received.get(e["requestId"], 0) + e["encodedDataLength"]))
    cdp.on("Network.loadingFinished", lambda e: received.__setitem__(e["requestId"], e["encodedDataLength"]))
    # The run's cookie, as its login sets it, but with nothing loaded yet: the first load fills an empty cache.
    context.add_cookies([{"name": f"logist_token_{server.port}", "value": server.token, "url": server.base,
                          "httpOnly": True, "sameSite": "Strict"}])

    def load() -> dict[str, int]:
        """The bytes each URL's response took on the wire, headers included."""
        urls.clear()
        received.clear()
        page.goto(server.base + "jobs/big")
        page.wait_for_selector("#state[data-streamed]", state="attached", timeout=10000)  # the stream's first events came
        page.wait_for_timeout(200)
        by_url: dict[str, int] = {}
        for request, size in received.items():
            url = urls.get(request, "?").removeprefix(server.base.rstrip("/"))
            by_url[url] = by_url.get(url, 0) + size
        return by_url

    first = load()
    again = load()
    context.close()
    assert first["/jobs/big"] > 10_000 and again["/jobs/big"] < 1_000, again  # the page: 304, its headers only
    assert sum(size for url, size in first.items() if url.startswith("/assets/")) > 10_000
    assert sum(size for url, size in again.items() if url.startswith("/assets/")) == 0, again  # the browser's cache
    assert sum(again.values()) < sum(first.values()) / 10, (first, again)
