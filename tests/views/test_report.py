"""The HTML report of a job, the index of a jobs directory, and ``job show``.

The browser tests load the files from disk in Debian's headless Chromium
(driven by its command line: ``--dump-dom`` and ``--screenshot``, so no
extra Python package), with DNS and any proxy pointed nowhere, so a page
that tried to load anything from the network would show it. They are
skipped when Chromium is missing, except in CI (``CI=true``), where a
missing Chromium is a failure: ``.ci/run`` installs it.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
from click.testing import CliRunner

from logist.store.session import JobFiles
from logist.engine.create import create_job
from logist.engine.decide import user_action
from logist.engine.step import post_answer, step_once
from logist.cli import cli
from logist.views.report import render_job_report, write_index, write_job_report
from logist.engine.rewind import rewind
from logist.replay.scripted import Reply
from logist.store.requests import HistoryReader

from conftest import chromium_executable, logist_cli, write_config
from test_transcript import HOSTILE, RUN_CHECK, a, calc_scenario

ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
EXPECTED_ROWS = [
    (1, "person", "create"), (2, "Worker", "CMD"), (3, "Worker", "ASK"), (4, "person", "answer"),
    (5, "Worker", "MESSAGE"), (6, "Worker", "COMPLETED"), (7, "Supervisor", "RETRY"),
    (8, "Worker", "COMPLETED"), (9, "Supervisor", "COMPLETED"), (10, "person", "approve"),
]


class Tags(HTMLParser):
    """Every start tag with its attributes, and the text of every row cell."""

    CELLS = ("seq", "actor", "action", "states", "text", "commit")

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.rows: dict[int, dict[str, str]] = {}
        self._step: int | None = None
        self._cell: str | None = None

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        self.tags.append((tag, attributes))
        if tag == "details" and "step" in (attributes.get("class") or "").split():
            self._step = int(attributes["data-seq"])
            self.rows[self._step] = {"open": "open" in attributes}
        elif self._step is not None and (attributes.get("class") or "-").split()[0] in self.CELLS:
            self._cell = attributes["class"].split()[0]

    def handle_endtag(self, tag):
        if tag == "summary":
            self._step = None
        self._cell = None

    def handle_data(self, data):
        if self._step is not None and self._cell:
            row = self.rows[self._step]
            row[self._cell] = row.get(self._cell, "") + data


def parse(page: str) -> Tags:
    parser = Tags()
    parser.feed(page)
    return parser


# 1. The page as written ----------------------------------------------------------------------------


def test_report_has_every_step_and_escapes_everything(jobs, llm, tmp_path):
    job = calc_scenario(jobs, llm, tmp_path)
    path = write_job_report(job)
    assert path == job.dir / "report.html"
    page = path.read_text(encoding="utf-8")
    parsed = parse(page)

    assert [(seq, row["actor"], row["action"]) for seq, row in sorted(parsed.rows.items())] == EXPECTED_ROWS
    assert parsed.rows[7]["states"] == "RUNNING" and parsed.rows[10]["states"] == "SUCCESS"
    commits = {e.sequence: e.workspace_commit for e in JobFiles(job.dir).load_history().interactions}
    assert all(row["commit"] == commits[seq][:8] for seq, row in parsed.rows.items())

    # Markup from the model and from files is text: one script (the page's own), no image.
    assert [t for t, _ in parsed.tags].count("script") == 1 and "img" not in [t for t, _ in parsed.tags]
    assert html.escape(HOSTILE) in page
    assert "<b>hi</b>" not in page and html.escape("print('<b>hi</b>')") in page
    # Self-contained: nothing to fetch, and a policy that would refuse it anyway.
    links = [attrs["href"] for tag, attrs in parsed.tags if "href" in attrs]
    assert links and all(link.startswith("#step-") for link in links)
    assert not [attrs for _, attrs in parsed.tags if "src" in attrs]
    assert "default-src 'none'" in page and "<link" not in page

    # Each step carries its own diff, and only what is new of its prompt.
    step5 = page[page.index('id="step-5"'): page.index('id="step-6"')]
    assert "+    return a + b" in step5 and "diff --git a/notes.md b/notes.md" in step5
    assert page.count("--- Role: Worker ---") == 2, "the system prompt where each Worker turn starts"
    assert 'data-continues="5"' in page[page.index('id="step-6"'): page.index('id="step-7"')]


def test_hostile_names_commands_and_answers_are_text(jobs):
    job = create_job(jobs, "hostile", "Objective with <script>window.pwned=3</script> & \"quotes\"", command_policy="deny")
    post_answer(job, a("MESSAGE", message="</pre><script>window.pwned=4</script>",
                       file_changes=[{"path": "x<img src=y onerror=z>.txt", "content": "</details><script>1</script>\n"}]))
    post_answer(job, a("CMD", command="echo \"'><svg onload=alert(1)>"))
    user_action(job, "suspend")
    page = render_job_report(job)
    tags = [tag for tag, _ in parse(page).tags]
    assert tags.count("script") == 1 and not {"img", "svg"} & set(tags)
    for text in ("<script>window.pwned=3</script>", "</pre><script>window.pwned=4</script>", "x<img src=y onerror=z>.txt",
                 "</details><script>1</script>", "echo \"'><svg onload=alert(1)>"):
        assert html.escape(text) in page


def test_a_rewind_shows_what_it_undid(jobs):
    job = create_job(jobs, "rw", "Write two files")
    post_answer(job, a("MESSAGE", message="one", file_changes=[{"path": "one.txt", "content": "1\n"}]))
    post_answer(job, a("MESSAGE", message="two", file_changes=[{"path": "two.txt", "content": "2\n"}]))
    rewind(job)
    page = render_job_report(job)
    row = parse(page).rows[4]
    assert (row["actor"], row["action"]) == ("person", "rewind")
    step4 = page[page.index('id="step-4"'):]
    assert "deleted file mode" in step4 and "-2" in step4


def test_a_commit_git_cannot_read_costs_its_diff_only(jobs):
    job = create_job(jobs, "lost", "Write three files")
    for name in ("one", "two", "three"):
        post_answer(job, a("MESSAGE", message=name, file_changes=[{"path": f"{name}.txt", "content": f"{name}\n"}]))
    # Entry 3's commit was made by hand elsewhere and never reached this repository.
    history = job.history_path.read_text(encoding="utf-8")
    lost = JobFiles(job.dir).load_history().interactions[2].workspace_commit
    job.history_path.write_text(history.replace(lost, "0123456789abcdef" * 2 + "01234567"), encoding="utf-8")
    page = render_job_report(job)
    steps = {n: page[page.index(f'id="step-{n}"'):] for n in (2, 3, 4)}
    assert "+one" in steps[2].split('id="step-3"')[0]
    lost_step = steps[3].split('id="step-4"')[0]
    assert "(no diff: " in lost_step and "0123456789abcdef" * 2 in lost_step.split("(no diff: ")[1].split(")")[0]
    assert "(no diff: " in steps[4] and "+three" not in steps[4], "its diff starts from the lost commit"

    shutil.rmtree(job.workspace)
    page = render_job_report(job)
    assert [seq for seq in parse(page).rows] == [1, 2, 3, 4] and 'class="diff"' not in page.split("</style>")[1]


def test_job_report_cli_writes_where_asked(jobs, tmp_path):
    job = create_job(jobs, "out", "Say hi")
    post_answer(job, a("MESSAGE", message="hi"))
    target = tmp_path / "elsewhere" / "out.html"
    result = logist_cli("job", "report", "out", "-o", str(target))
    assert result.returncode == 0, result.stderr
    assert result.stdout == "" and "Wrote" in result.stderr and "out.html" in result.stderr
    assert 'id="step-2"' in target.read_text(encoding="utf-8")
    default = logist_cli("job", "report", "out")
    assert default.returncode == 0 and (job.dir / "report.html").is_file()


# 2. The index of a jobs directory --------------------------------------------------------------------


def _jobs_in_every_state(jobs):
    done = create_job(jobs, "done", "Finish")
    post_answer(done, a("COMPLETED", evidence_files=[], summary_for_supervisor="did it"))
    post_answer(done, a("COMPLETED", evidence_files=[], summary_for_supervisor="checked"))
    user_action(done, "approve")
    asking = create_job(jobs, "asking", "Ask something")
    post_answer(asking, a("ASK", question="Which one?"))
    create_job(jobs, "fresh", "Not started <yet>")
    broken = create_job(jobs, "broken", "Damaged")
    # A damaged manifest alone is rebuilt from the history (in memory, for
    # commands that only look); with both damaged the job cannot be read.
    broken.manifest_path.write_text("{ not json")
    broken.history_path.write_text("{ not json either")
    return {"done": "SUCCESS", "asking": "INPUT_REQUIRED", "fresh": "PENDING", "broken": "UNREADABLE"}


@pytest.mark.parametrize("elsewhere", [False, True], ids=["in-jobs-dir", "with-o"])
def test_index_lists_every_job_with_links_that_resolve(jobs, tmp_path, elsewhere):
    expected = _jobs_in_every_state(jobs)
    args = ["report"] + (["-o", str(tmp_path / "site" / "all.html")] if elsewhere else [])
    result = logist_cli(*args)
    assert result.returncode == 0, result.stderr
    index = tmp_path / "site" / "all.html" if elsewhere else jobs.path / "index.html"
    assert "No report for: broken" in result.stderr
    parsed = parse(index.read_text(encoding="utf-8"))
    rows = {attrs["data-job"]: attrs["data-status"] for tag, attrs in parsed.tags if tag == "tr" and "data-job" in attrs}
    assert rows == expected
    links = [attrs["href"] for tag, attrs in parsed.tags if tag == "a"]
    assert len(links) == 3, "every readable job links to its report"
    for link in links:
        target = (index.parent / link).resolve()
        assert target.is_file(), f"{link} does not resolve from {index.parent}"
        job_id = target.parent.name
        assert target == jobs.path.resolve() / job_id / "report.html"
        assert f"<title>{job_id}: {expected[job_id]}" in target.read_text(encoding="utf-8")
    assert "&lt;yet&gt;" in index.read_text(encoding="utf-8")


# 3. job show ----------------------------------------------------------------------------------------


def test_job_show_prints_the_same_summary(jobs, llm, tmp_path):
    job = calc_scenario(jobs, llm, tmp_path)
    result = CliRunner().invoke(cli, ["job", "show", "calc"], terminal_width=100)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert ("States:  DRAFT -> PENDING -> RUNNING -> INPUT_REQUIRED -> RUNNING -> REVIEWING -> RUNNING -> REVIEWING"
            " -> APPROVAL_REQUIRED -> SUCCESS") in out
    assert "Last entries (8 of 10):" in out
    table = out[out.index("Last entries"):].splitlines()[2:10]
    assert [line.split()[0] for line in table] == [str(n) for n in range(3, 11)]
    assert "Supervisor RETRY      RUNNING" in out and "$0.0002" in out
    assert f"Transcript: {job.dir / 'transcript.md'}" in out
    assert "Calls:   7 made to a model, 8960 tokens (8400 in, 560 out), $0.0016" in out
    as_json = CliRunner().invoke(cli, ["job", "show", "calc", "--json"])
    assert json.loads(as_json.stdout) == job.manifest().dump(), "--json stays the manifest"


def test_job_show_prints_budget_use(jobs, llm):
    write_config(jobs, prices={"gpt-4o-mini": {"input_per_million": 1000, "output_per_million": 2000}})
    job = create_job(jobs, "budget", "Spend a little", max_steps=10, max_tokens=10_000, max_cost_usd=2.0)
    # A real call (a posted answer costs nothing: its tokens are counted apart).
    llm.add(Reply(content=a("MESSAGE", message="one"), usage={"prompt_tokens": 200, "completion_tokens": 100}))
    step_once(job, endpoints=llm.endpoints)
    out = CliRunner().invoke(cli, ["job", "show", "budget"]).stdout
    assert "Budgets: steps 1 of 10 (10%), cost_usd $0.4000 of $2.0000 (20%), tokens 300 of 10000 (3%)" in out
    page = render_job_report(job)
    assert '<meter min="0" max="1" low="0.75" high="0.9" optimum="0" value="0.2000"></meter> 20%' in page


# 4. In a real browser -------------------------------------------------------------------------------


@pytest.fixture
def chromium():
    return chromium_executable()


def run_chromium(chromium: str, profile: Path, *args: str) -> str:
    command = [
        chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-extensions",
        # No network: every name resolves to nothing and every proxied request fails.
        "--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=127.0.0.1:9",
        f"--user-data-dir={profile}", *args,
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


HARNESS = """<!DOCTYPE html><html><body><pre id="result">pending</pre>
<iframe id="report" src="REPORT#step-5" width="1200" height="900"></iframe>
<script>
document.getElementById("report").addEventListener("load", function () {
  var out = {};
  try {
    var w = this.contentWindow, d = w.document;
    function diff(seq) { return d.querySelector("#step-" + seq + " section.diff pre"); }
    out.open = Array.from(d.querySelectorAll("details.step")).filter(function (s) { return s.open; }).map(function (s) { return s.id; });
    out.diff5Visible = diff(5).checkVisibility();
    out.diff5 = diff(5).textContent;
    out.diff8Visible = diff(8).checkVisibility();
    out.pwned = w.pwned === undefined ? null : w.pwned;
    out.scripts = d.querySelectorAll("script").length;
    out.images = d.querySelectorAll("img").length;
    out.row6 = d.querySelector("#step-6 > summary .text").textContent;
    d.querySelector("#step-8 > summary").click();
    out.diff8VisibleAfterClick = diff(8).checkVisibility();
    d.querySelector("#step-6 button.full-prompt").click();
    out.fullPrompt6 = Array.from(d.querySelectorAll("#step-6 .full .msg")).map(function (m) {
      return {role: m.querySelector(".who").textContent, content: m.querySelector("pre").textContent};
    });
  } catch (e) { out.error = String(e) + " " + e.stack; }
  document.getElementById("result").textContent = JSON.stringify(out);
});
</script></body></html>
"""


def test_report_in_headless_chromium(jobs, llm, tmp_path, chromium):
    job = calc_scenario(jobs, llm, tmp_path)
    report = write_job_report(job)
    entries = JobFiles(job.dir).load_history().interactions

    # The DOM after the page's own script ran, opened at step 5 by its URL.
    dom = run_chromium(chromium, tmp_path / "profile", "--dump-dom", report.as_uri() + "#step-5")
    parsed = parse(dom)
    assert [(seq, row["actor"], row["action"]) for seq, row in sorted(parsed.rows.items())] == EXPECTED_ROWS
    assert [seq for seq, row in parsed.rows.items() if row["open"]] == [5]
    assert parsed.rows[6]["text"].startswith("add() adds now <script>window.pwned = 1</script>")
    assert [t for t, _ in parsed.tags].count("script") == 1 and "img" not in [t for t, _ in parsed.tags]

    # Behaviour: what is visible, what ran, and the full prompt assembled by the page.
    harness = tmp_path / "harness.html"
    harness.write_text(HARNESS.replace("REPORT", report.as_uri()), encoding="utf-8")
    dom = run_chromium(
        chromium, tmp_path / "profile", "--allow-file-access-from-files", "--virtual-time-budget=10000",
        "--dump-dom", harness.as_uri(),
    )
    found = re.search(r'<pre id="result">(.*?)</pre>', dom, re.S)
    assert found, dom[-2000:]
    result = json.loads(html.unescape(found.group(1)))
    assert "error" not in result, result.get("error")
    assert result["open"] == ["step-5"]
    assert result["diff5Visible"] is True and "+    return a + b" in result["diff5"]
    assert result["diff8Visible"] is False and result["diff8VisibleAfterClick"] is True
    assert result["pwned"] is None and result["scripts"] == 1 and result["images"] == 0
    assert HOSTILE in result["row6"]
    # Step 6 recorded only what it added; the page rebuilds its request exactly.
    assert entries[5].request.prompt is None and entries[5].request.continues == 5
    assert result["fullPrompt6"] == HistoryReader(JobFiles(job.dir)).messages(6)

    # A picture, for people: the job with step 5 open (a tall window: headless
    # Chromium paints nothing when a screenshot follows a scroll).
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "report-calc.png"
    shot.unlink(missing_ok=True)
    run_chromium(chromium, tmp_path / "profile", "--window-size=1400,3200", f"--screenshot={shot}", report.as_uri() + "#step-5")
    data = shot.read_bytes()
    assert data.startswith(b"\x89PNG") and len(data) > 50_000, "a blank page compresses to a few KB"
    print(f"screenshot: {shot}")

    _jobs_in_every_state(jobs)
    write_index(jobs)
    index_shot = ARTIFACTS / "index.png"
    run_chromium(chromium, tmp_path / "profile", "--window-size=1400,600", f"--screenshot={index_shot}",
                 (jobs.path / "index.html").as_uri())
    assert index_shot.read_bytes().startswith(b"\x89PNG")
    print(f"screenshot: {index_shot}")


# 5. One summary, every view ----------------------------------------------------------------------------


def test_every_view_takes_its_words_from_the_one_summary(jobs, llm, tmp_path):
    from logist.views.summary import one_line, summarise
    from test_transcript import HEADING

    job = calc_scenario(jobs, llm, tmp_path)
    rows = summarise(job).rows
    assert [(r.sequence, r.actor, r.action) for r in rows] == EXPECTED_ROWS

    parsed = parse(render_job_report(job))
    assert [(seq, row["actor"], row["action"], row.get("text", "")) for seq, row in sorted(parsed.rows.items())] == [
        (r.sequence, r.actor, r.action, one_line(r.summary, 160)) for r in rows
    ]
    transcript = JobFiles(job.dir).transcript_path.read_text(encoding="utf-8")
    assert [(int(s), who, what) for s, who, what in HEADING.findall(transcript)] == EXPECTED_ROWS

    wide = CliRunner(env={"COLUMNS": "1000"})  # every column, and the summaries whole
    table = wide.invoke(cli, ["job", "history", "calc"]).stdout.splitlines()[1:]
    assert [line.split()[:4] for line in table] == [[str(r.sequence), r.timestamp[:19] + "Z", r.actor, r.action] for r in rows]
    assert all(line.endswith(one_line(r.summary, 1000)) for line, r in zip(table, rows))
    show = wide.invoke(cli, ["job", "show", "calc"]).stdout
    shown = show[show.index("Last entries"):].splitlines()[2:10]
    assert [line.split()[:4] for line in shown] == [[str(r.sequence), r.timestamp[:19] + "Z", r.actor, r.action] for r in rows[-8:]]
    assert "Supervisor RETRY" in show and "$ " + RUN_CHECK in table[1]


def test_the_page_inlines_the_package_style_and_script_and_allows_only_them(jobs):
    import base64
    import hashlib

    import logist.views
    from logist.views.html import asset

    job = create_job(jobs, "assets", "Say hi")
    page = render_job_report(job)
    assets = Path(logist.views.__file__).parent / "assets"
    css, js = asset("report.css"), asset("report.js")
    assert css == (assets / "report.css").read_text(encoding="utf-8") and ".step" in css
    assert js == (assets / "report.js").read_text(encoding="utf-8") and "full-prompt" in js
    assert f"<style>{css}</style>" in page and f"<script>{js}</script>" in page
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page).group(1)
    for text, directive in ((css, "style-src"), (js, "script-src")):
        digest = base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")
        assert f"{directive} 'sha256-{digest}'" in policy
