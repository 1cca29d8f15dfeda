"""A restep from ``logist serve``'s page asks first, naming what it undoes:
a page without JavaScript, a dialog with it. A real server process, Debian's
headless Chromium (Playwright)."""

from __future__ import annotations

import json

import pytest

from logist.engine.create import create_job
from logist.engine.step import post_answer
from logist.store.session import JobFiles

from serving import browser, served  # noqa: F401 - fixtures

pytestmark = [pytest.mark.serve, pytest.mark.browser]


def three_entries(jobs):
    job = create_job(jobs, "j", "Write hello.py")
    for n in (1, 2):
        post_answer(job, json.dumps({"action": "MESSAGE", "message": f"Part {n}."}))
    return job


def entries(job) -> list:
    return JobFiles(job.dir).load_history().interactions


def test_without_javascript_a_page_says_what_the_restep_undoes_then_does_it(jobs, browser, served):
    job = three_entries(jobs)
    server = served()
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    page.goto(server.login)
    page.goto(server.base + "jobs/j")
    assert "you are asked first" in page.locator(".controls .hint").inner_text()
    page.fill('form.d-restep input[name="to"]', "1")
    with page.expect_navigation() as navigation:
        page.click('button[data-action="restep"]')
    assert navigation.value.status == 200
    assert page.locator("h1").inner_text() == "Restep to entry 1?"
    said = page.locator(".confirm p").inner_text()
    assert "undoes entries 2–3 (2 entries)" in said and "its state after entry 1" in said, said
    assert [int(n) for n in page.eval_on_selector_all("#steps > details.step", "els => els.map(e => e.dataset.seq)")] == [2, 3]
    assert len(entries(job)) == 3, "asking changes nothing"
    assert page.locator('a:text("Cancel: back to the job")').get_attribute("href") == "/jobs/j"
    with page.expect_navigation():
        page.click('button:text("Restep to entry 1")')
    assert page.url == server.base + "jobs/j"
    last = entries(job)[-1]
    assert (last.kind, last.rewound_to) == ("rewind", 1) and str(job.manifest().status) == "PENDING"
    context.close()


def test_with_javascript_a_dialog_names_the_entries_it_undoes(jobs, browser, served):
    job = three_entries(jobs)
    server = served()
    context = browser.new_context()
    page = context.new_page()
    page.goto(server.login)
    page.goto(server.base + "jobs/j")
    page.wait_for_selector("#state[data-streamed]", state="attached", timeout=5000)
    page.click('button[data-action="restep"]')
    dialog = page.locator("dialog.confirm")
    assert dialog.is_visible() and dialog.locator("h2").inner_text() == "Restep to entry 2?"
    assert "undoes entries 3–3 (1 entry)" in dialog.locator("p").inner_text()
    assert dialog.locator("li").all_inner_texts() == ["#3 Worker MESSAGE: Part 2."]
    assert page.evaluate("document.activeElement.dataset.confirm") == "no", "the safe choice has the focus"
    page.keyboard.press("Enter")
    assert page.locator("dialog").count() == 0 and len(entries(job)) == 3
    page.click('button[data-action="restep"]')
    with page.expect_navigation():
        page.click('dialog.confirm button[data-confirm="yes"]')
    last = entries(job)[-1]
    assert (last.kind, last.rewound_to) == ("rewind", 2)
    assert page.url == server.base + "jobs/j"
    context.close()
