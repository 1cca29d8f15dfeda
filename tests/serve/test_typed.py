"""Nothing a person types into ``logist serve``'s page is lost: when the job
moves on under an open page, when a late decision is refused (409), with
JavaScript and without. A real ``logist serve`` process, Debian's headless
Chromium (Playwright), the job decided from the real CLI."""

from __future__ import annotations

import pytest

from logist.engine.create import create_job
from logist.engine.step import post_answer
from logist.store.session import JobFiles

from conftest import logist_cli
from serving import browser, served, wait_for  # noqa: F401 - fixtures
from test_small_screens import REVIEW, WRITE

pytestmark = [pytest.mark.serve, pytest.mark.browser]

FEEDBACK = "Print it in French too,\nand say why."


def review_job(jobs, job_id: str = "r"):
    job = create_job(jobs, job_id, "Write hello.py")
    post_answer(job, WRITE)
    post_answer(job, REVIEW)
    assert str(job.manifest().status) == "APPROVAL_REQUIRED"
    return job


def cli(*args: str) -> None:
    done = logist_cli(*args)
    assert done.returncode == 0, done.stderr


def open_page(browser, server, path: str, **options):
    context = browser.new_context(**options)
    page = context.new_page()
    page.goto(server.login)
    page.goto(server.base + path)
    return context, page


def test_feedback_typed_in_reject_stays_when_the_job_is_approved_from_the_cli(jobs, browser, served):
    review_job(jobs)
    server = served()
    context, page = open_page(browser, server, "jobs/r")
    page.wait_for_selector("#state[data-streamed]", state="attached", timeout=5000)
    page.fill('form.d-reject textarea[name="feedback"]', FEEDBACK)
    cli("job", "approve", "r")
    page.wait_for_selector("#kept .kept", timeout=3000)
    assert page.locator("form.d-reject").count() == 0 and "SUCCESS" in page.locator("#state h1").inner_text()
    said = page.locator("#kept .kept p").inner_text()
    assert "moved on" in said and "now SUCCESS" in said and "Reject" in said, said
    assert page.input_value("#kept .kept textarea") == FEEDBACK
    # Copyable: selected and copied as text (the box is read-only, not a form: nothing posts it).
    assert page.eval_on_selector("#kept .kept textarea", "e => e.readOnly && e.form === null")
    context.close()


def test_typed_text_goes_back_in_its_form_when_the_decision_applies_again(jobs, browser, served):
    review_job(jobs)
    server = served()
    context, page = open_page(browser, server, "jobs/r")
    page.wait_for_selector("#state[data-streamed]", state="attached", timeout=5000)
    at = page.get_attribute("form.d-reject input[name=at]", "value")
    page.fill('form.d-reject textarea[name="feedback"]', FEEDBACK)
    cli("job", "suspend", "r")
    cli("job", "resume", "r")
    wait_for(lambda: page.get_attribute("form.d-reject input[name=at]", "value") not in (None, at), timeout=3000)
    assert page.input_value('form.d-reject textarea[name="feedback"]') == FEEDBACK
    assert "back in its form" in page.locator("#kept .kept p").inner_text()
    with page.expect_navigation():
        page.click('button[data-action="reject"]')
    last = JobFiles(jobs.job("r").dir).load_history().interactions[-1]
    # A form sends each line break as CR LF (HTML's form encoding).
    assert (last.user_input.action, last.user_input.text) == ("reject", FEEDBACK.replace("\n", "\r\n"))
    assert page.url == server.base + "jobs/r"
    context.close()


@pytest.mark.parametrize("script", [False, True], ids=["without-javascript", "with-javascript"])
def test_a_refused_decision_s_page_carries_the_text_and_the_job_s_address(jobs, browser, served, script):
    review_job(jobs)
    server = served()
    context, page = open_page(browser, server, "jobs/r", java_script_enabled=script)
    history = JobFiles(jobs.job("r").dir).load_history().interactions
    cli("job", "approve", "r")
    approved = len(history) + 1
    if script:
        # The live page takes the form away; a form made before (another tab, a slow network) posts late.
        page.wait_for_selector("form.d-reject", state="detached", timeout=3000)
        page.evaluate("""([text, at]) => { const f = document.createElement("form"); f.method = "post";
            f.action = "/jobs/r/reject"; f.innerHTML = '<input name="at"><textarea name="feedback"></textarea>';
            f.elements.at.value = at; f.elements.feedback.value = text; document.body.appendChild(f); f.submit(); }""",
                      [FEEDBACK, str(len(history))])
        page.wait_for_selector(".notice", timeout=5000)
    else:
        page.fill('form.d-reject textarea[name="feedback"]', FEEDBACK)
        with page.expect_navigation() as navigation:
            page.click('button[data-action="reject"]')
        assert navigation.value.status == 409
    assert "has moved on" in page.locator(".notice").inner_text()
    assert page.input_value("#kept .kept textarea") == FEEDBACK
    assert "now SUCCESS" in page.locator("#kept .kept p").inner_text()
    if script:
        # The address is the job's page: a reload asks for it, and posts nothing again.
        assert page.url == server.base + "jobs/r"
        with page.expect_navigation() as navigation:
            page.reload()
        assert navigation.value.status == 200 and navigation.value.request.method == "GET"
    assert len(JobFiles(jobs.job("r").dir).load_history().interactions) == approved
    context.close()
