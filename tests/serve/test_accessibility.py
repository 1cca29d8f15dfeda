"""``logist serve``'s pages for people who use a keyboard or a screen
reader, in Debian's headless Chromium (Playwright) against a real server
process: axe-core finds no serious or critical violation, and a live update
keeps the focus, says what changed and brings every counter up to date."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from logist.engine.create import create_job
from logist.engine.step import post_answer

from conftest import logist_cli
from serving import browser, served, wait_for  # noqa: F401 - fixtures
from test_small_screens import FORMS, every_state

pytestmark = [pytest.mark.serve, pytest.mark.browser]

#: Where .ci/axe.sh installs axe-core (LOGIST_AXE_DIR: another folder).
AXE = Path(os.environ.get("LOGIST_AXE_DIR") or Path(__file__).parents[2] / ".ci" / "axe") / "node_modules/axe-core/axe.min.js"


def axe_source() -> str:
    if not AXE.is_file():
        if os.environ.get("CI") == "true":
            pytest.fail(f"axe-core is not installed at {AXE}; .ci/run installs it (bash .ci/axe.sh)")
        pytest.skip(f"axe-core is not installed at {AXE} (bash .ci/axe.sh installs it); in CI this is a failure")
    return AXE.read_text(encoding="utf-8")


def violations(page, source: str) -> list[dict]:
    """axe-core's serious and critical violations on the page as it is now."""
    page.add_script_tag(content=source)
    found = page.evaluate("""async () => (await axe.run(document, {resultTypes: ["violations"]})).violations
        .map(v => ({id: v.id, impact: v.impact, nodes: v.nodes.slice(0, 3).map(n => n.target.join(" "))}))""")
    return [v for v in found if v["impact"] in ("serious", "critical")]


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_axe_finds_nothing_serious_on_the_list_a_job_with_every_step_open_and_each_decision(jobs, browser, served, scheme):
    source = axe_source()
    every_state(jobs)
    server = served()
    # The checker is added as a script of the test's own: the server's policy allows none, so the context bypasses it.
    context = browser.new_context(bypass_csp=True, color_scheme=scheme)
    page = context.new_page()
    page.goto(server.login)
    assert violations(page, source) == [], "the list"
    for job_id in FORMS:
        page.goto(server.base + f"jobs/{job_id}")
        page.click("#expand-all")
        assert page.locator("form.decide").count() == len(FORMS[job_id])
        assert violations(page, source) == [], job_id
    # The restep's question: the dialog, and the page a browser without JavaScript gets.
    page.click('button[data-action="restep"]')
    assert page.locator("dialog.confirm").is_visible()
    assert violations(page, source) == [], "the restep dialog"
    static = browser.new_context(java_script_enabled=False, bypass_csp=True, color_scheme=scheme)
    still = static.new_page()
    still.goto(server.login)
    still.goto(server.base + "jobs/done")
    with still.expect_navigation():
        still.click('button[data-action="restep"]')
    assert still.locator("h1").inner_text().startswith("Restep to entry")
    # axe-core is a script: run it with JavaScript on, on the page as the server sent it.
    page.set_content(still.content())
    assert violations(page, source) == [], "the restep page"
    static.close()
    context.close()


def test_landmarks_and_scrolling_text_blocks_reachable_from_the_keyboard(jobs, browser, served):
    every_state(jobs)
    server = served()
    context = browser.new_context()
    page = context.new_page()
    page.goto(server.login)
    page.goto(server.base + "jobs/review")
    assert page.locator("main").count() == 1 and page.locator("main #state").count() == 1
    assert page.locator('#announce[aria-live="polite"]').count() == 1
    page.click("#expand-all")
    blocks = page.eval_on_selector_all("#steps pre", "els => els.map(e => [e.tabIndex, e.getAttribute('aria-label')])")
    assert blocks and all(tab == 0 and label for tab, label in blocks), blocks
    assert ["entry 2", "system message"] in [label.split(": ") for _, label in blocks]
    context.close()


def test_a_live_update_keeps_focus_updates_counters_and_title_and_announces_the_state(jobs, browser, served):
    job = create_job(jobs, "j", "Write hello.py")
    post_answer(job, json.dumps({"action": "MESSAGE", "message": "Part 1."}))
    server = served()
    context = browser.new_context()
    page = context.new_page()
    page.goto(server.login)
    page.goto(server.base + "jobs/j")
    page.wait_for_selector("#state[data-streamed]", state="attached", timeout=5000)
    assert page.title() == "j: RUNNING · Logist"
    assert page.locator("#pages").inner_text() == "entries 1–2 of 2"
    page.focus('form.d-restep input[name="to"]')

    post_answer(job, json.dumps({"action": "MESSAGE", "message": "Part 2."}))
    page.wait_for_selector("#step-3", state="attached", timeout=3000)
    wait_for(lambda: page.locator("#pages").inner_text() == "entries 1–3 of 3", timeout=3000)
    assert page.locator("#steps").locator("xpath=..").locator("h2 small").inner_text() == "3 entries"
    # The restep form was sent anew (a new entry): the focus is in its box again.
    assert page.evaluate("document.activeElement.name") == "to"
    assert page.evaluate("document.activeElement.form.querySelector('button').dataset.action") == "restep"

    page.focus('button[data-action="suspend"]')
    done = logist_cli("job", "suspend", "j")
    assert done.returncode == 0, done.stderr
    wait_for(lambda: page.title() == "j: SUSPENDED · Logist", timeout=3000)
    assert "The job is now SUSPENDED (it was RUNNING)." in page.locator("#announce").inner_text()
    assert page.locator("#pages").inner_text() == "entries 1–4 of 4"
    # Its button gone with the state it belonged to, the focus is on the state's heading, not lost to the page.
    assert page.evaluate("document.activeElement.tagName") == "H1"
    assert page.evaluate("document.getElementById('state').contains(document.activeElement)")
    context.close()
