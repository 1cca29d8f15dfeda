"""``logist serve``'s pages on a phone: a real ``logist serve`` process and
Debian's headless Chromium (Playwright) at 390×844, on the list and on a job
page of every state a person acts in, each decision form drawn."""

from __future__ import annotations

import json

import pytest

from logist.engine.create import create_job
from logist.engine.decide import user_action
from logist.engine.step import post_answer
from logist.replay.scripted import answer
from logist.resources import data_dir

from serving import browser, served  # noqa: F401 - fixtures

pytestmark = [pytest.mark.serve, pytest.mark.browser]

PHONE = {"width": 390, "height": 844}
WRITE = answer("COMPLETED", "Wrote hello.py.", ["hello.py"],
               file_changes=[{"path": "hello.py", "content": "print('Hello')\n"}])
REVIEW = answer("COMPLETED", "hello.py prints Hello.", ["hello.py"])
MESSAGE = json.dumps({"action": "MESSAGE", "message": "Working on it, " + "step by step " * 30})
#: Each job :func:`every_state` builds, and the decisions its page offers.
FORMS = {
    "ask": {"answer", "skip", "suspend", "restep"},
    "command": {"approve-command", "skip-command", "suspend", "restep"},
    "changes": {"approve-command", "skip-command", "suspend", "restep"},
    "review": {"approve", "reject", "suspend", "restep"},
    "stuck": {"resubmit", "suspend", "restep"},
    "suspended": {"resume", "restep"},
    "running": {"suspend", "restep"},
    "done": {"restep"},
}


def every_state(jobs) -> None:
    """One job in each state a person acts in (answers posted as steps: no model)."""
    post_answer(create_job(jobs, "ask", "Write hello.py"),
                json.dumps({"action": "ASK", "question": "Which greeting? " * 20, "required": False}))
    post_answer(create_job(jobs, "command", "Write hello.py", command_policy="ask"),
                answer("CMD", command="python3 -c 'print(1)' && " + "echo a-long-argument-without-spaces" * 6))
    role = json.loads((data_dir("roles") / "worker.json").read_text())
    (jobs.path / "roles" / "worker.json").write_text(json.dumps({**role, "file_changes": "approval"}))
    post_answer(create_job(jobs, "changes", "Write hello.py"), WRITE)
    (jobs.path / "roles" / "worker.json").unlink()
    review = create_job(jobs, "review", "Write hello.py " + "and say why " * 40)
    post_answer(review, WRITE)
    post_answer(review, REVIEW)
    post_answer(create_job(jobs, "stuck", "Write hello.py"), answer("STUCK", "I cannot go on without the spec " * 5))
    suspended = create_job(jobs, "suspended", "Write hello.py")
    post_answer(suspended, MESSAGE)
    user_action(suspended, "suspend")
    post_answer(create_job(jobs, "running", "Write hello.py"), MESSAGE)
    done = create_job(jobs, "done", "Write hello.py")
    post_answer(done, WRITE)
    post_answer(done, REVIEW)
    user_action(done, "approve")


def job_pages(jobs) -> list[str]:
    every_state(jobs)
    for job_id in FORMS:
        assert str(jobs.job(job_id).manifest().status) != "UNREADABLE"
    return list(FORMS)


def outside(page) -> list[str]:
    """Each decision form, button or box that is not fully inside the window's width."""
    return page.evaluate("""() => {
        const out = [], width = window.innerWidth;
        document.querySelectorAll("form.decide, form.decide button, form.decide textarea, form.decide input:not([type=hidden])")
          .forEach(e => { const r = e.getBoundingClientRect();
                          if (r.left < 0 || r.right > width) { out.push(`${e.tagName}.${e.className} ${r.left}-${r.right}`); } });
        return out; }""")


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_every_page_and_decision_fits_a_phone(jobs, browser, served, scheme):
    ids = job_pages(jobs)
    server = served()
    context = browser.new_context(viewport=PHONE, color_scheme=scheme)
    page = context.new_page()
    page.goto(server.login)
    for url in ["", *(f"jobs/{job_id}" for job_id in ids)]:
        page.goto(server.base + url)
        if url:
            page.click("#expand-all")  # every row open: the prompts, answers and diffs fit too
        assert page.evaluate("innerWidth") == 390
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, f"/{url} is {width} px wide"
        if url:
            job_id = url.split("/")[1]
            shown = set(page.eval_on_selector_all("form.decide button", "els => els.map(b => b.dataset.action)"))
            assert shown == FORMS[job_id], job_id
            assert outside(page) == [], job_id
    # Stacked, not hidden: the states passed through, and each row's state after.
    assert page.locator("ol.states").is_visible()
    assert page.locator("#steps .row .states").first.is_visible()
    page.goto(server.base)
    assert page.locator('tr[data-job="review"] td:nth-child(3)').is_visible()
    context.close()


def test_the_form_palette_follows_a_dark_scheme(jobs, browser, served):
    job_pages(jobs)
    server = served()
    colours = {}
    for scheme in ("light", "dark"):
        context = browser.new_context(viewport=PHONE, color_scheme=scheme)
        page = context.new_page()
        page.goto(server.login)
        page.goto(server.base + "jobs/review")
        # Read once the stream's state part has replaced the page's (an element taken out has no style).
        page.wait_for_selector("#state[data-streamed]", state="attached", timeout=5000)
        colours[scheme] = page.eval_on_selector(
            "form.d-reject textarea", "e => [getComputedStyle(e).backgroundColor, getComputedStyle(e).color]")
        context.close()
    assert colours["light"] == ["rgb(255, 255, 255)", "rgb(29, 31, 35)"]
    assert colours["dark"] == ["rgb(22, 24, 28)", "rgb(228, 230, 234)"]
