"""transcript.md: the readable transcript Logist appends as each entry is recorded."""

from __future__ import annotations

import json
import logging
import re
import sys

import pytest

from logist.store.session import JobFiles
from logist.engine.create import create_job
from logist.engine.decide import user_action
from logist.engine.loop import run_job
from logist.engine.step import post_answer, step_once
from logist.views import transcript as tr
from logist.replay.scripted import Reply
from logist.views.markdown import fenced
from logist.views.transcript import render

from conftest import via, logist_cli, logist_process, write_config

PY = sys.executable
CALC = "def add(a, b):\n    return a - b\n"
CHECK = "from calc import add\n\nresult = add(2, 3)\nprint(f'add(2, 3) = {result}')\nraise SystemExit(0 if result == 5 else 1)\n"
RUN_CHECK = f"{PY} check.py"
USAGE = {"prompt_tokens": 1200, "completion_tokens": 80}
#: Markup in an answer: the report must show it as text and never run it.
HOSTILE = "<script>window.pwned = 1</script><img src=x onerror=\"window.pwned = 2\">"
NOTES = "# Notes\n\nA fence inside a file:\n```python\nprint('<b>hi</b>')\n```\n"


def a(action, **fields) -> str:
    if action in ("COMPLETED", "STUCK", "RETRY"):
        fields.setdefault("evidence_files", [])
        fields.setdefault("summary_for_supervisor", "done")
    return json.dumps({"action": action, **fields})


def calc_scenario(jobs, llm, tmp_path):
    """A job with file changes, a command, a question and a Supervisor RETRY,
    through the real server; ends approved."""
    write_config(jobs, prices={"gpt-4o-mini": {"input_per_million": 0.15, "output_per_million": 0.6}})
    (tmp_path / "calc.py").write_text(CALC)
    (tmp_path / "check.py").write_text(CHECK)
    job = create_job(
        jobs, "calc", "Make add() add", acceptance=[f"{RUN_CHECK} exits 0"],
        files=[str(tmp_path / "calc.py"), str(tmp_path / "check.py")], allowed_commands=[RUN_CHECK],
    )
    script = [
        a("CMD", command=RUN_CHECK),
        a("ASK", question="Should add() accept floats too?"),
        a("MESSAGE", message="add() subtracts; fixing it and writing notes.",
          file_changes=[{"path": "calc.py", "old": "a - b", "new": "a + b"}, {"path": "notes.md", "content": NOTES}]),
        a("COMPLETED", summary_for_supervisor=f"add() adds now {HOSTILE}", evidence_files=["calc.py"]),
        a("RETRY", summary_for_supervisor="add() has no docstring; add one.", evidence_files=["calc.py"]),
        a("COMPLETED", summary_for_supervisor="Added the docstring.", evidence_files=["calc.py"],
          file_changes=[{"path": "calc.py", "old": "def add(a, b):\n", "new": "def add(a, b):\n    \"\"\"Sum of a and b.\"\"\"\n"}]),
        a("COMPLETED", summary_for_supervisor="Correct and documented.", evidence_files=["calc.py"]),
    ]
    llm.add(*[Reply(content=s, usage=USAGE) for s in script])
    step_once(job, **via(llm))
    step_once(job, **via(llm))
    user_action(job, "answer", "Integers only.")
    run_job(job, **via(llm))
    user_action(job, "approve")
    return job


def normalised(text: str, normalise) -> str:
    text = normalise.text(text.replace(PY, "<python>"))
    return re.sub(r" · [0-9.e-]+ s\*$", " · <duration> s*", text, flags=re.M)


HEADING = re.compile(r"^## #(\d+) · (\S+) · (\S+)$", re.M)


@pytest.mark.wire  # its snapshot holds each call's duration, which a call in memory (0 ms) leaves out
def test_transcript_reads_in_order_and_matches_the_history(jobs, llm, tmp_path, normalise, snapshot):
    job = calc_scenario(jobs, llm, tmp_path)
    text = JobFiles(job.dir).transcript_path.read_text(encoding="utf-8")
    entries = JobFiles(job.dir).load_history().interactions

    # One section per history entry, in order, naming who acted and what they did.
    assert [(int(s), who, what) for s, who, what in HEADING.findall(text)] == [
        (1, "person", "create"), (2, "Worker", "CMD"), (3, "Worker", "ASK"), (4, "person", "answer"),
        (5, "Worker", "MESSAGE"), (6, "Worker", "COMPLETED"), (7, "Supervisor", "RETRY"),
        (8, "Worker", "COMPLETED"), (9, "Supervisor", "COMPLETED"), (10, "person", "approve"),
    ]
    assert len(entries) == 10

    # Each turn's prompt in full once, system prompt included; later rounds
    # show only the messages they added.
    assert text.count("### System prompt\n") == 4, "once per turn"
    assert text.count("--- Role: Worker ---") == 2 and text.count("--- Role: Supervisor ---") == 2
    assert text.count("## Objective\nMake add() add") == 4, "each of the 4 turns opens once"
    assert "continues the conversation of #3; new" in text and "User response: Integers only." in text
    # The command, its cleaned output and the files changed, readable (no escaped newlines).
    assert "ran (exit 1); its output" in text and "--- stdout ---\nadd(2, 3) = -1\nExit code: 1" in text
    assert "(the command output shown in #2, then `[Step 2 of 100]`)" in text, "the output is not repeated in the next prompt"
    assert "- Files changed: `calc.py`, `notes.md`" in text
    assert "````text\n" + NOTES + "````" in text, "a fence inside a file gets a longer fence around it"
    # Commit, tokens and cost of every call.
    assert text.count("1280 tokens (1200 in, 80 out) · $0.000228") == 7
    for entry in entries:
        assert f"commit `{entry.workspace_commit}`" in text

    # No bookkeeping but one plain comment at the end, naming the last step.
    assert text.count("<!--") == 1 and text.endswith("\n\n<!-- logist: transcript up to step 10 -->\n")
    assert not re.search(r"\b[0-9a-f]{16}\b", re.sub(r"\b[0-9a-f]{40}\b", "", text)), "no digests"
    # Appended step by step, it is exactly what a rebuild from the history writes.
    assert text == render(entries, "calc")
    assert normalised(text, normalise) == snapshot


def test_a_replayed_job_has_the_same_transcript_as_a_rebuild(jobs):
    from conftest import REPO_ROOT
    from logist.replay.apply import replay_history
    from logist.replay.apply import read_history_file
    from logist.views.summary import action_of, actor_of

    job = create_job(jobs, "wc", "Write wordcount.py")
    replay_history(job, read_history_file(REPO_ROOT / "fixtures" / "wordcount" / "jobHistory.json"))
    entries = JobFiles(job.dir).load_history().interactions
    text = JobFiles(job.dir).transcript_path.read_text(encoding="utf-8")
    assert [(int(s), who, what) for s, who, what in HEADING.findall(text)] == [
        (e.sequence, actor_of(e), action_of(e)) for e in entries
    ]
    assert len(entries) > 4 and text == render(entries, "wc")


def test_append_does_not_read_the_history(jobs, llm, tmp_path, monkeypatch):
    """An append costs the new entry (and the few before it that it needs): the history is not read whole."""
    from logist.store import history

    job = create_job(jobs, "quick", "Say hi", command_policy="ask")
    post_answer(job, a("MESSAGE", message="first"))
    assert tr.is_current(JobFiles(job.dir), 2)

    def no_reading(*args, **kwargs):
        raise AssertionError("the transcript append read the whole history")

    for name in ("load_history", "iter_entry_data"):
        monkeypatch.setattr(history, name, no_reading)
    monkeypatch.setattr(tr, "rebuild", no_reading)
    post_answer(job, a("MESSAGE", message="second <b>"))
    post_answer(job, a("CMD", command="echo held"))
    user_action(job, "approve-command")  # the output is shown here, and repeated by the next prompt
    post_answer(job, a("MESSAGE", message="third"))
    monkeypatch.undo()
    text = JobFiles(job.dir).transcript_path.read_text(encoding="utf-8")
    assert text == render(JobFiles(job.dir).load_history().interactions, "quick")
    assert "> second <b>" in text
    assert "(the command output shown in #5, then `[Step 4 of 100]`)" in text


def test_an_output_is_shown_again_after_the_window(jobs, monkeypatch):
    """A command output repeated more than OUTPUT_WINDOW entries later is shown
    in full again; an update that catches up many entries and a rebuild agree."""
    from logist.views.prompt_tracker import OUTPUT_WINDOW

    job = create_job(jobs, "window", "Say hi", allowed_commands=["echo far"])
    post_answer(job, a("CMD", command="echo far"))
    behind = JobFiles(job.dir).transcript_path.read_bytes()
    for _ in range(OUTPUT_WINDOW // 2 + 1):
        user_action(job, "suspend")
        user_action(job, "resume")
    JobFiles(job.dir).transcript_path.write_bytes(behind)  # as if the views lock had been busy all along
    with monkeypatch.context() as patched:
        patched.setattr(tr, "rebuild", lambda job_dir: pytest.fail("caught up by a rebuild, not an append"))
        post_answer(job, a("MESSAGE", message="after a long wait"))
    entries = JobFiles(job.dir).load_history().interactions
    assert entries[-1].request.continues == 2 and entries[-1].sequence - 2 > OUTPUT_WINDOW
    text = JobFiles(job.dir).transcript_path.read_text(encoding="utf-8")
    assert text == render(entries, "window")
    assert "the command output shown in" not in text
    assert text.count("--- stdout ---\nfar\nExit code: 0") == 2, "in #2, and in full in the prompt that repeats it"


def test_missing_or_cut_transcript_is_rebuilt_by_the_next_entry(jobs):
    job = create_job(jobs, "cut", "Say hi")
    post_answer(job, a("MESSAGE", message="one"))
    path = JobFiles(job.dir).transcript_path
    path.unlink()
    post_answer(job, a("MESSAGE", message="two"))
    assert path.read_text(encoding="utf-8") == render(JobFiles(job.dir).load_history().interactions, "cut")

    # A crash in the middle of an append leaves a file that does not end in a marker.
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 40])
    post_answer(job, a("MESSAGE", message="three"))
    text = path.read_text(encoding="utf-8")
    assert text == render(JobFiles(job.dir).load_history().interactions, "cut")
    assert [int(s) for s, _, _ in HEADING.findall(text)] == [1, 2, 3, 4]


def test_entries_recorded_by_crash_recovery_reach_the_transcript(jobs):
    """A step killed after recording but before its transcript append: the
    next command repairs the job and the transcript catches up."""
    job = create_job(jobs, "crash", "Say hi")
    post_answer(job, a("MESSAGE", message="before the crash"))
    killed = logist_process(
        "job", "poststep", "crash", "--response-string", a("MESSAGE", message="killed after recording"),
        env={"LOGIST_FAILPOINT": "after_manifest"},
    )
    assert killed.returncode == -9, killed.stderr
    assert not tr.is_current(JobFiles(job.dir), 3)
    post_answer(job, a("MESSAGE", message="after the crash"))
    entries = JobFiles(job.dir).load_history().interactions
    assert [e.kind for e in entries] == ["user_action", "poststep", "poststep", "repair", "poststep"]
    text = JobFiles(job.dir).transcript_path.read_text(encoding="utf-8")
    assert text == render(entries, "crash")
    assert "killed after recording" in text and "## #4 · Logist · repair" in text


def test_a_transcript_that_cannot_be_written_never_fails_a_step(jobs, caplog):
    job = create_job(jobs, "nowrite", "Say hi")
    JobFiles(job.dir).transcript_path.unlink()
    JobFiles(job.dir).transcript_path.mkdir()  # the transcript's path is taken by a directory
    with caplog.at_level(logging.WARNING, logger="logist"):
        result = post_answer(job, a("MESSAGE", message="still recorded", file_changes=[{"path": "a.txt", "content": "a\n"}]))
    assert result.action == "MESSAGE" and result.commit
    assert [e.sequence for e in JobFiles(job.dir).load_history().interactions] == [1, 2]
    assert job.manifest().last_sequence == 2 and (job.workspace / "a.txt").read_text() == "a\n"
    assert any("could not update" in r.getMessage() and "transcript.md" in r.getMessage() for r in caplog.records)


def test_cli_prints_and_rebuilds_the_transcript(jobs):
    job = create_job(jobs, "cli", "Say hi")
    post_answer(job, a("MESSAGE", message="hello from the model"))
    shown = logist_cli("job", "transcript", "cli")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == JobFiles(job.dir).transcript_path.read_text(encoding="utf-8")
    assert "hello from the model" in shown.stdout and shown.stderr == ""

    JobFiles(job.dir).transcript_path.write_text("edited by hand\n")
    rebuilt = logist_cli("job", "transcript", "cli")  # outdated: rebuilt first
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert "Rebuilt" in rebuilt.stderr and "hello from the model" in rebuilt.stdout
    forced = logist_cli("job", "transcript", "cli", "--rebuild")
    assert forced.returncode == 0 and forced.stdout == rebuilt.stdout


def test_invalid_answers_and_failed_calls_are_shown(jobs):
    job = create_job(jobs, "bad", "Say hi", format_retries=1)
    post_answer(job, "this is not JSON")
    post_answer(job, None, error="cannot connect to http://127.0.0.1:9/v1")
    text = JobFiles(job.dir).transcript_path.read_text(encoding="utf-8")
    assert "## #2 · Worker · INVALID" in text and "```text\nthis is not JSON\n```" in text
    assert "The answer was refused, nothing from it was applied" in text
    assert "## #3 · Worker · FAILED" in text and "No answer: cannot connect" in text
    assert "The job needs a person" in text


def test_fence_is_longer_than_any_backtick_run():
    assert fenced("plain") == "```text\nplain\n```\n"
    assert fenced("a ``` b\n`````x") == "``````text\na ``` b\n`````x\n``````\n"


def test_the_step_marker_is_read_in_both_spellings():
    from logist.views.prompt_tracker import STEP_MARKER

    # [Step N of MAX] since issue 29; a job recorded before says [Call N of MAX], and its transcript reads the same.
    for marker in ("[Step 2 of 100]", "[Call 2 of 100]"):
        assert STEP_MARKER.sub("", f"Command output:\nok\n\n{marker}") == "Command output:\nok"
    assert STEP_MARKER.search("ok\n\n[Round 2 of 100]") is None
