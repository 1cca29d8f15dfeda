"""``logist serve`` in a real headless Chromium (Debian's, driven by
Playwright): the server a real process on a free port, the jobs real job
directories stepped by the real ``logist`` against the suite's scripted
OpenAI-compatible server. Nothing is mocked: what the page shows is what
the browser rendered from what the server sent."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from logist.store.session import JobFiles
from logist.engine.create import create_job
from logist.engine.step import post_answer, step_once
from logist.store.requests import HistoryReader
from logist.replay.scripted import ScriptedLLMServer, answer

from conftest import logist_cli, long_job
from serving import browser, served, wait_for  # noqa: F401 - fixtures

pytestmark = [pytest.mark.serve, pytest.mark.browser]

ASK = json.dumps({"action": "ASK", "question": "Which greeting?", "required": True})
WRITE = answer("COMPLETED", "Wrote hello.py.", ["hello.py"],
               file_changes=[{"path": "hello.py", "content": "print('Hello')\n"}])
REVIEW = answer("COMPLETED", "hello.py prints Hello.", ["hello.py"])
SCRIPT = "<script>window.__pwned=1</script>"
IMG = "<img src=x onerror=\"window.__pwned=2\">"


def message(n: int) -> str:
    return json.dumps({"action": "MESSAGE", "message": f"Working, part {n}."})


def ok(result, *codes: int):
    assert result.returncode in (codes or (0, 3)), f"exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    return result


def step(job_id: str, llm) -> None:
    ok(logist_cli("job", "step", job_id, "--oneshot", "--base-url", llm.base_url))


def shown_steps(page) -> list[int]:
    return page.eval_on_selector_all("#steps > details.step", "els => els.map(e => Number(e.dataset.seq))")


def screenshot(page, name: str) -> None:
    """With SERVE_SCREENSHOTS=DIR, the page as the browser shows it,
    into DIR/NAME.png (the README's pictures: docs/serve-*.png)."""
    folder = os.environ.get("SERVE_SCREENSHOTS")
    if folder:
        page.set_viewport_size({"width": 1280, "height": 860})
        page.screenshot(path=str(Path(folder) / f"{name}.png"))


def logged_in(browser, server, **options):
    """A fresh browser context with the run's cookie, and every URL it requested."""
    context = browser.new_context(**options)
    requests: list[str] = []
    context.on("request", lambda request: requests.append(request.url))
    page = context.new_page()
    page.goto(server.login)
    return context, page, requests


def test_the_token_url_becomes_a_cookie_and_steps_appear_live_without_gaps(jobs, llm, browser, served):
    create_job(jobs, "j", "Write hello.py")
    server = served()
    context, page, requests = logged_in(browser, server)
    assert page.url == server.base, "the token is gone from the address"
    (cookie,) = context.cookies()
    assert (cookie["name"], cookie["value"], cookie["httpOnly"], cookie["sameSite"]) == (
        f"logist_token_{server.port}", server.token, True, "Strict")
    assert page.evaluate("document.cookie") == "", "not readable by a script"

    # A job created by the CLI after the list was loaded appears within 2 s.
    page.wait_for_selector("#live:not([hidden])", timeout=5000)
    ok(logist_cli("job", "create", "later", "-o", "Write bye.py"), 0)
    page.wait_for_selector('tr[data-job="later"]', timeout=2000)

    page.click('a[href="/jobs/j"]')
    page.wait_for_selector("#live:not([hidden])", timeout=5000)
    assert shown_steps(page) == [1]
    for n in range(2, 5):
        llm.add(message(n))
        step("j", llm)
        page.wait_for_selector(f"#step-{n}", state="attached", timeout=2000)
    assert shown_steps(page) == [1, 2, 3, 4]

    # Offline and back: the stream reconnects from the last entry shown.
    context.set_offline(True)
    for n in (5, 6):
        llm.add(message(n))
        step("j", llm)
    time.sleep(1)
    context.set_offline(False)
    page.wait_for_selector("#step-6", state="attached", timeout=10000)
    assert shown_steps(page) == [1, 2, 3, 4, 5, 6]

    # A server restart (on the same port, with a new token): the page retries
    # and, once the new token's URL is opened, goes on from where it was.
    server.stop()
    llm.add(message(7))
    step("j", llm)
    again = served(port=server.port)
    other = context.new_page()
    other.goto(again.login)
    llm.add(message(8))
    step("j", llm)
    page.wait_for_selector("#step-8", state="attached", timeout=10000)
    assert shown_steps(page) == [1, 2, 3, 4, 5, 6, 7, 8], "none twice, none missing"
    assert page.locator("#step-8 .text").inner_text() == "Working, part 8."
    assert all(url.startswith(f"http://127.0.0.1:{server.port}/") for url in requests), requests
    context.close()


def test_decisions_show_only_while_waited_for_and_a_late_post_gets_409(jobs, llm, browser, served):
    create_job(jobs, "q", "Write hello.py")
    llm.add(ASK)
    step("q", llm)
    create_job(jobs, "r", "Write hello.py")
    llm.add(WRITE, REVIEW)
    ok(logist_cli("job", "run", "r", "--base-url", llm.base_url), 3)
    assert str(jobs.job("r").manifest().status) == "APPROVAL_REQUIRED"
    server = served()

    # Answering from the page: one entry, and the job goes on.
    context, page, _ = logged_in(browser, server)
    screenshot(page, "serve-jobs")
    page.goto(server.base + "jobs/q")
    screenshot(page, "serve-job")
    assert page.locator('button[data-action="approve"]').count() == 0
    # Typed once the stream's first state part has replaced the page's (a fill that lands
    # while the part is replaced writes into the element taken out, as no keystroke can).
    page.wait_for_selector("#state[data-streamed]", state="attached", timeout=5000)
    page.fill('form.d-answer textarea[name="text"]', "Say Hello")
    # The tab hidden and shown again: the stream reopens, the state part is
    # sent again, and what was typed stays.
    page.evaluate("""() => { Object.defineProperty(document, "hidden", {value: true, configurable: true});
                             document.dispatchEvent(new Event("visibilitychange")); }""")
    page.wait_for_selector("#live[hidden]", state="attached", timeout=2000)
    page.evaluate("""() => { Object.defineProperty(document, "hidden", {value: false, configurable: true});
                             document.dispatchEvent(new Event("visibilitychange")); }""")
    page.wait_for_selector("#live:not([hidden])", timeout=5000)
    time.sleep(1)
    assert page.input_value('form.d-answer textarea[name="text"]') == "Say Hello"
    with page.expect_navigation():
        page.click('button[data-action="answer"]')
    assert page.url == server.base + "jobs/q", page.content()[:3000]
    entries = JobFiles(jobs.job("q").dir).load_history().interactions
    assert [(e.kind, e.user_input and e.user_input.text) for e in entries[2:]] == [("user_action", "Say Hello")]
    assert page.locator('form.d-answer').count() == 0 and "RUNNING" in page.locator("#state h1").inner_text()
    llm.add(WRITE)
    step("q", llm)
    page.wait_for_selector("#step-4", state="attached", timeout=2000)

    # Approve / reject show while the job waits for them; the CLI decides
    # first: they go away live, and the late POST of a page with JavaScript off gets 409.
    page.goto(server.base + "jobs/r")
    page.wait_for_selector("#live:not([hidden])", timeout=5000)
    assert page.locator('button[data-action="approve"]').count() == 1
    assert page.locator('button[data-action="reject"]').count() == 1
    assert page.locator('button[data-action="approve-command"]').count() == 0
    static, still, _ = logged_in(browser, server, java_script_enabled=False)
    still.goto(server.base + "jobs/r")
    history = (jobs.job("r").dir / "jobHistory.json").read_bytes()
    ok(logist_cli("job", "approve", "r"), 0)
    page.wait_for_selector('button[data-action="approve"]', state="detached", timeout=2000)
    assert page.locator('button[data-action="reject"]').count() == 0
    assert "SUCCESS" in page.locator("#state h1").inner_text()
    approved = (jobs.job("r").dir / "jobHistory.json").read_bytes()
    assert approved != history
    with still.expect_navigation() as navigation:
        still.click('button[data-action="approve"]')
    assert navigation.value.status == 409
    assert "has moved on" in still.locator(".notice").inner_text()
    assert "SUCCESS" in still.locator("#state h1").inner_text() and still.locator('button[data-action="approve"]').count() == 0
    assert (jobs.job("r").dir / "jobHistory.json").read_bytes() == approved
    static.close()
    context.close()


def test_a_held_command_model_text_and_files_stay_text(jobs, llm, browser, served):
    command = f"echo {SCRIPT}\r\x1b[2K{IMG}"
    create_job(jobs, "x", "Write hello.py", command_policy="ask")
    llm.add(answer("CMD", command=command))
    step("x", llm)
    assert jobs.job("x").manifest().pending_command == command
    server = served()

    # JavaScript off: the forms alone decide (POST, then the page again).
    static, still, _ = logged_in(browser, server, java_script_enabled=False)
    still.goto(server.base + "jobs/x")
    assert still.locator("pre.held").inner_text() == f"echo {SCRIPT}␍␛[2K{IMG}", "shown as it runs, controls visible"
    with still.expect_navigation() as navigation:
        still.click('button[data-action="skip-command"]')
    assert navigation.value.status == 200 and still.url == server.base + "jobs/x"
    assert still.locator("pre.held").count() == 0
    assert jobs.job("x").manifest().pending_command is None
    static.close()

    llm.add(answer("COMPLETED", f"Done {SCRIPT} {IMG}", ["hello.py"],
                   file_changes=[{"path": "hello.py", "content": f"# {SCRIPT}\n# {IMG}\n"}]))
    context, page, requests = logged_in(browser, server)
    response = page.goto(server.base + "jobs/x")
    assert response.headers["content-security-policy"].startswith("default-src 'self'; frame-ancestors 'none'")
    step("x", llm)
    page.wait_for_selector("#step-4", state="attached", timeout=2000)
    page.click("#expand-all")
    text = page.locator("#steps").inner_text()
    assert f"Done {SCRIPT} {IMG}" in text and f"+# {SCRIPT}" in text and f"+# {IMG}" in text
    assert page.locator("#steps img, #steps script").count() == 0
    assert page.evaluate("window.__pwned") is None
    assert all(url.startswith(f"http://127.0.0.1:{server.port}/") for url in requests), requests
    context.close()


class _Attacker(BaseHTTPRequestHandler):
    page = b""

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.end_headers()
        self.wfile.write(self.page)

    def log_message(self, *args):
        pass


def test_a_form_from_another_port_is_refused_and_writes_nothing(jobs, llm, browser, served):
    create_job(jobs, "r", "Write hello.py")
    llm.add(WRITE, REVIEW)
    ok(logist_cli("job", "run", "r", "--base-url", llm.base_url), 3)
    at = jobs.job("r").manifest().last_sequence
    server = served()
    _Attacker.page = (
        f'<form id="f" method="post" action="http://127.0.0.1:{server.port}/jobs/r/approve">'
        f'<input name="at" value="{at}"></form><script>document.getElementById("f").submit()</script>'
    ).encode()
    attacker = ThreadingHTTPServer(("127.0.0.1", 0), _Attacker)
    threading.Thread(target=attacker.serve_forever, daemon=True).start()
    try:
        history = (jobs.job("r").dir / "jobHistory.json").read_bytes()
        context, page, _ = logged_in(browser, server)
        with page.expect_response(f"http://127.0.0.1:{server.port}/jobs/r/approve") as posted:
            page.goto(f"http://127.0.0.1:{attacker.server_address[1]}/")
        assert posted.value.status == 403
        assert (jobs.job("r").dir / "jobHistory.json").read_bytes() == history
        assert str(jobs.job("r").manifest().status) == "APPROVAL_REQUIRED"
        context.close()
    finally:
        attacker.shutdown()


def test_ctrl_c_with_three_pages_streaming_exits_within_5_s(jobs, browser, served):
    create_job(jobs, "j", "Write hello.py")
    server = served()
    context, first, _ = logged_in(browser, server)
    pages = [first, context.new_page(), context.new_page()]
    pages[1].goto(server.base + "jobs/j")
    pages[2].goto(server.base + "jobs/j")
    for page in pages:
        page.wait_for_selector("#live:not([hidden])", timeout=5000)
    took = server.stop()
    assert took < 5, took
    # Logist's exit status for Ctrl-C, with nothing but the interruption said.
    assert server.process.returncode == 130
    assert "Traceback" not in server.process.stderr.read()
    for page in pages:
        page.wait_for_selector("#live[hidden]", state="attached", timeout=5000)
    context.close()


def test_a_page_of_a_long_history_assembles_each_full_prompt_exactly_and_follows_the_job(jobs, llm, browser, served):
    job = long_job(jobs, llm, rounds=2)
    last = JobFiles(job.dir).load_history().interactions[-1].sequence
    server = served("--page-size", "2")
    context, page, _requests = logged_in(browser, server)
    page.goto(f"{server.base}jobs/long")
    page.wait_for_selector("#live:not([hidden])", timeout=5000)
    assert shown_steps(page) == [last - 1, last]
    # Each shown call's conversation began before the page: the page's script rebuilds its prompt from the
    # hidden rows of the turn's earlier calls, exactly what was sent.
    for sequence in (last - 1, last):
        assert page.locator(f"#step-{sequence}").get_attribute("data-continues") == str(sequence - 1)
        page.evaluate(f'document.querySelector("#step-{sequence} button.full-prompt").click()')
        shown = page.eval_on_selector_all(f"#step-{sequence} .full .msg", "els => els.map(m => ("
                                          "{role: m.querySelector('.who').textContent, content: m.querySelector('pre').textContent}))")
        assert shown == HistoryReader(JobFiles(job.dir)).messages(sequence)
    # The page follows the job: its stream (?from=N&after=M) sends the next entry.
    llm.add(message(9))
    step_once(job, base_url=llm.base_url)
    page.wait_for_selector(f"#step-{last + 1}", state="attached", timeout=3000)
    assert shown_steps(page) == [last - 1, last, last + 1]
    context.close()


class HeldCallServer(ScriptedLLMServer):
    """The scripted server, each call held until the test releases it (``release``)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.release = threading.Event()

    def reply_for(self, body: dict, headers: dict):
        self.release.wait(60)
        return super().reply_for(body, headers)


def test_suspend_clicked_mid_call_stops_the_runner_at_the_step_boundary_and_nothing_is_busy(jobs, browser, served):
    create_job(jobs, "j", "Say hi", allowed_commands=["echo hi"])
    server = served()
    with HeldCallServer() as llm:
        # The first answer goes on with the turn (a command): without the suspend the runner would call again.
        llm.add(answer("CMD", command="echo hi"), answer("COMPLETED", "said hi", []))
        runner = subprocess.Popen([sys.executable, "-m", "logist", "job", "run", "j", "--base-url", llm.base_url],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            context, page, _ = logged_in(browser, server)
            wait_for(lambda: len(llm.requests) == 1, timeout=60)  # the call is in flight, the runner holds the lock
            page.goto(server.base + "jobs/j")
            page.click("form.d-suspend button")
            page.wait_for_url(server.base + "jobs/j")
            notice = page.locator("#state .notice")
            assert "Suspend asked for" in notice.inner_text()
            assert json.loads((jobs.path / "j" / "stop_request.json").read_text())["action"] == "suspend"
            llm.release.set()
            out, err = runner.communicate(timeout=120)
        finally:
            llm.release.set()
            if runner.poll() is None:
                runner.kill()
                runner.wait()
    assert runner.returncode == 3, err  # a suspended job's exit code
    assert "busy" not in out + err
    assert len(llm.requests) == 1, "no call after the step in progress"
    # The page follows: SUSPENDED, and its Resume form in place of Suspend.
    page.wait_for_selector("form.d-resume button", timeout=10000)
    assert "busy" not in page.content()
    manifest = json.loads((jobs.path / "j" / "job_manifest.json").read_text())
    assert manifest["status"] == "SUSPENDED" and not (jobs.path / "j" / "stop_request.json").exists()
    context.close()


def test_the_list_asks_before_cancel_and_keeps_typed_budgets_through_a_live_update(jobs, browser, served):
    create_job(jobs, "a", "Write hello.py")
    other = create_job(jobs, "b", "Write bye.py")
    server = served()
    context, page, _ = logged_in(browser, server)
    page.goto(server.base + "?sort=job")
    answers: list[bool] = []
    page.on("dialog", lambda dialog: (answers.append(dialog.message), dialog.dismiss() if len(answers) == 1 else dialog.accept()))
    page.click('tr[data-job="a"] form.d-cancel button')  # dismissed: nothing is posted
    assert answers == ["Cancel job a for good? It cannot be resumed, rerun or restepped."]
    assert str(jobs.job("a").manifest().status) == "PENDING"
    # A budget typed into a row stays while another job's change redraws the table.
    page.click('tr[data-job="a"] details.budgets summary')
    page.fill('tr[data-job="a"] input[name="max_steps"]', "42")
    post_answer(other, message(2))
    page.wait_for_function("""() => { const r = document.querySelector('tr[data-job="b"] td:nth-child(5)');
                                      return r && r.textContent.startsWith("1 /"); }""", timeout=10000)
    assert page.input_value('tr[data-job="a"] input[name="max_steps"]') == "42"
    page.click('tr[data-job="a"] form.d-budgets button')
    page.wait_for_url(server.base + "?sort=job")
    assert jobs.job("a").manifest().settings.max_steps == 42
    page.click('tr[data-job="a"] form.d-cancel button')  # accepted
    page.wait_for_selector('tr[data-job="a"][data-status="CANCELED"]', timeout=10000)
    assert len(answers) == 2 and str(jobs.job("a").manifest().status) == "CANCELED"
    context.close()
