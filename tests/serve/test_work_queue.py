"""The list of jobs as a work queue, without JavaScript: filtered by state
and text and sorted by a column through the address's query, what a job
waits for a link to its decisions, and each row's buttons (cancel, budgets,
rerun) posting through the same decisions as the job page (``at``, Origin,
token), its work a download of what ``logist job export --patch`` writes.
A real server process and plain HTTP."""

from __future__ import annotations

import json
import re
from urllib.parse import urlencode

import pytest

from logist.engine.create import create_job
from logist.engine.step import post_answer
from logist.replay.scripted import answer

from conftest import logist_cli
from serving import served  # noqa: F401 - fixture

pytestmark = pytest.mark.serve

WRITE = answer("COMPLETED", "Wrote hello.py.", ["hello.py"],
               file_changes=[{"path": "hello.py", "content": "print('Hello')\n"}])
FORM = {"Content-Type": "application/x-www-form-urlencoded"}


def queue(jobs) -> None:
    """Three jobs: one asking a question, one whose work waits for review (three steps), one fresh."""
    post_answer(create_job(jobs, "ask", "Greet in French"),
                json.dumps({"action": "ASK", "question": "Which greeting?", "required": True}))
    review = create_job(jobs, "review", "Write hello.py")
    post_answer(review, json.dumps({"action": "MESSAGE", "message": "Reading."}))
    post_answer(review, WRITE)
    create_job(jobs, "fresh", "Write bye.py")


def rows(page: bytes) -> list[str]:
    return re.findall(r'<tr data-job="([^"]+)"', page.decode())


def row_of(page: bytes, job_id: str) -> str:
    return re.search(rf'<tr data-job="{job_id}".*?</tr>', page.decode(), re.S).group(0)


def test_the_list_filters_by_state_and_text_and_sorts_by_a_column(jobs, served):
    queue(jobs)
    server = served()
    everything = server.request("GET", "/").data
    assert rows(everything) == ["ask", "review", "fresh"]
    assert '<form method="get" action="/" class="filter" role="search">' in everything.decode()
    assert rows(server.request("GET", "/?state=input_required").data) == ["ask"]
    assert rows(server.request("GET", "/?q=HELLO").data) == ["review"]  # the objective, any case
    assert rows(server.request("GET", "/?q=question").data) == ["ask"]  # what it waits for
    some = server.request("GET", "/?state=PENDING&q=bye").data.decode()
    assert rows(some.encode()) == ["fresh"] and "1 of 3 jobs shown" in some
    assert rows(server.request("GET", "/?sort=steps&order=desc").data) == ["review", "ask", "fresh"]
    # The filter form's own query (every field sent, empty ones too), as a phone without the headings sends it.
    sent = server.request("GET", "/?state=&q=&sort=steps&order=desc").data.decode()
    assert rows(sent.encode()) == ["review", "ask", "fresh"]
    assert '<option value="steps" selected>steps</option>' in sent and 'value="desc" checked' in sent
    ascending = server.request("GET", "/?sort=job").data.decode()
    assert rows(ascending.encode()) == ["ask", "fresh", "review"]
    # Each heading sorts by its column; the one sorted by sorts the other way; the filter is kept.
    assert '<a href="/?sort=job&amp;order=desc">job <span aria-hidden="true">↑</span>' in ascending
    filtered = server.request("GET", "/?q=py&sort=job").data.decode()
    assert '<a href="/?q=py&amp;sort=steps">steps</a>' in filtered and rows(filtered.encode()) == ["fresh", "review"]
    # What a job waits for is a link to its decisions.
    assert re.search(r'<a href="/jobs/ask#decisions">answer its question', row_of(everything, "ask"))
    assert 'id="decisions"' in server.request("GET", "/jobs/ask").data.decode()
    # The live stream of a filtered list sends the same filtered table.
    stream = server_events(server, "/events?state=INPUT_REQUIRED")
    assert 'data-job="ask"' in stream and 'data-job="review"' not in stream
    # An unknown sort or state shows nothing wrong, just nothing sorted or nothing found.
    assert rows(server.request("GET", "/?sort=__class__").data) == ["ask", "review", "fresh"]
    assert rows(server.request("GET", "/?state=NOPE").data) == []
    # Each row offers what its job allows.
    page = server.request("GET", "/").data

    def offered(job_id: str) -> set[str]:
        row = row_of(page, job_id)
        return set(re.findall(r'data-action="([^"]+)"', row)) | ({"export"} if "export.patch" in row else set())

    assert offered("ask") == {"cancel", "rerun", "budgets"}
    assert offered("review") == {"cancel", "rerun", "budgets", "export"}  # its work is committed
    assert offered("fresh") == {"cancel", "budgets"}  # nothing to rerun
    assert 'name="max_steps" min="0" step="any" value="100"' in row_of(page, "fresh")
    assert logist_cli("job", "cancel", "fresh").returncode == 0
    page = server.request("GET", "/").data
    assert offered("fresh") == set()  # canceled is final


def server_events(server, path: str) -> str:
    import http.client

    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    connection.request("GET", path, headers={"Host": f"127.0.0.1:{server.port}",
                                             "Authorization": f"Bearer {server.token}"})
    response = connection.getresponse()
    text = ""
    while "event: jobs" not in text or not text.endswith("\n\n"):
        text += response.read1(65536).decode()
    connection.close()
    return text


def test_the_rows_buttons_are_the_decisions_of_the_cli_and_export_downloads_what_job_export_writes(
        jobs, served, tmp_path):
    queue(jobs)
    server = served()
    patch = server.request("GET", "/jobs/review/export.patch")
    assert patch.status == 200 and patch.getheader("Content-Disposition") == 'attachment; filename="review.patch"'
    assert logist_cli("job", "export", "review", "--patch", str(tmp_path / "cli.patch")).returncode == 0
    assert patch.data == (tmp_path / "cli.patch").read_bytes() and b"+print('Hello')" in patch.data
    assert server.request("GET", "/api/v1/jobs/review/patch").data == patch.data
    nothing = server.request("GET", "/jobs/fresh/export.patch")
    assert nothing.status == 409 and b"nothing to export" in nothing.data
    back = urlencode({"state": "PENDING", "q": "py", "sort": "job"})
    # Budgets: job set through the API, recorded as its entry; back to the list as it was shown.
    done = server.request("POST", "/jobs/fresh/budgets", FORM, urlencode(
        {"at": 1, "back": back, "max_steps": "7", "max_cost_usd": "0.5", "max_tokens": ""}).encode())
    assert done.status == 303 and done.getheader("Location") == "/?state=PENDING&q=py&sort=job"
    settings = jobs.job("fresh").manifest().settings
    assert (settings.max_steps, settings.max_cost_usd, settings.max_tokens) == (7, 0.5, None)
    last = list(jobs.job("fresh").entries())[-1]
    assert last.user_input.action == "set"
    refused = server.request("POST", "/jobs/fresh/budgets", FORM, urlencode({"at": 2, "max_steps": "0"}).encode())
    assert refused.status == 400 and "max_steps" in refused.data.decode()
    # The API takes the same budgets decision.
    api = server.request("POST", "/api/v1/jobs/fresh/decisions/budgets", {"Content-Type": "application/json"},
                         json.dumps({"at": 2, "max_steps": 9}).encode())
    assert api.status == 200, api.data
    assert jobs.job("fresh").manifest().settings.max_steps == 9
    # A form the job has moved on from: 409, nothing done.
    stale = server.request("POST", "/jobs/review/cancel", FORM, urlencode({"at": 2, "back": ""}).encode())
    assert stale.status == 409 and str(jobs.job("review").manifest().status) != "CANCELED"
    # Without this server's Origin: refused before anything.
    assert server.request("POST", "/jobs/ask/cancel", {**FORM, "Origin": "http://evil.test"},
                          b"at=2").status == 403
    # Rerun: back to the baseline, as logist job rerun does.
    rerun = server.request("POST", "/jobs/review/rerun", FORM, urlencode({"at": 3, "back": ""}).encode())
    assert rerun.status == 303 and rerun.getheader("Location") == "/"
    after = jobs.job("review").manifest()
    assert after.last_sequence == 4 and str(after.status) == "PENDING" and after.workspace_commit == after.baseline_commit
    # Cancel, and the back address only ever names the list's own query.
    canceled = server.request("POST", "/jobs/ask/cancel", FORM,
                              urlencode({"at": 2, "back": "state=CANCELED&next=//evil.test"}).encode())
    assert canceled.getheader("Location") == "/?state=CANCELED"
    assert str(jobs.job("ask").manifest().status) == "CANCELED"
