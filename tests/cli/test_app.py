"""The application object: data on stdout with --json, chatter on stderr,
for the commands that change a job or show its work."""

from __future__ import annotations

import json

from click.testing import CliRunner

from logist.engine.create import create_job
from logist.engine.step import post_answer
from logist.cli import cli
from logist.replay.scripted import answer


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), prog_name="logist")


def _json(result) -> dict:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_a_persons_decision_prints_the_new_state_as_json(jobs):
    create_job(jobs, "j", "objective")
    data = _json(invoke("job", "suspend", "j", "--json"))
    assert data["job_id"] == "j" and data["status"] == "SUSPENDED" and data["role"] == "Worker"
    text = invoke("job", "resume", "j")
    assert text.exit_code == 0 and text.stdout == "" and "is now PENDING" in text.stderr


def test_rewind_diff_and_export_print_json(jobs, tmp_path):
    job = create_job(jobs, "j", "objective")
    post_answer(job, answer("MESSAGE", message="one", file_changes=[{"path": "a.txt", "content": "a\n"}]))
    post_answer(job, answer("MESSAGE", message="two", file_changes=[{"path": "b.txt", "content": "b\n"}]))
    diff = _json(invoke("job", "diff", "j", "--step", "3", "--json"))
    assert diff["step"] == 3 and "+b" in diff["diff"] and "a.txt" not in diff["diff"]
    patch = tmp_path / "j.patch"
    exported = _json(invoke("job", "export", "j", "--patch", str(patch), "--json"))
    assert exported["commits"] == 2 and patch.is_file()
    rewound = _json(invoke("job", "restep", "j", "--json"))
    assert rewound["status"] == "RUNNING" and rewound["workspace_commit"] == job.manifest().workspace_commit
    baseline = _json(invoke("job", "rerun", "j", "--json"))
    assert baseline["status"] == "PENDING" and baseline["workspace_commit"] == job.manifest().baseline_commit


def test_version_is_answered_before_click_is_imported_with_clicks_own_text():
    import subprocess
    import sys

    from conftest import logist_process

    clicks = invoke("--version")
    assert clicks.exit_code == 0 and clicks.stdout.startswith("logist, version ")
    fast = logist_process("--version")
    assert (fast.returncode, fast.stdout, fast.stderr) == (0, clicks.stdout, "")
    probe = ("import sys\nfrom logist.__main__ import main\ntry:\n    main(['--version'])\nexcept SystemExit:\n    pass\n"
             "print(sorted(m for m in sys.modules if m.split('.')[0] in ('click', 'pydantic')), file=sys.stderr)\n")
    seen = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert seen.stdout == clicks.stdout and seen.stderr == "[]\n"
    # Anything else is click's: with an option before it, --version is click's own answer.
    slow = logist_process("--jobs-dir", ".", "--version")
    assert (slow.returncode, slow.stdout) == (0, clicks.stdout)


def test_help_is_answered_before_click_is_imported_with_clicks_own_text(monkeypatch):
    import subprocess
    import sys

    from conftest import logist_cli

    from logist.cli import help_text

    assert help_text.HELP_FILE.read_text(encoding="utf-8") == help_text.render(), \
        "logist/help.txt is stale: python -m logist.cli.help_text rewrites it"
    assert help_text.main(["--check"]) == 0
    # click's own answer in a process of its own (CliRunner forces another width).
    by_click = [sys.executable, "-c", "from logist.cli import main; main(['--help'])"]
    for columns in ("100", "80", "79", "60"):  # click wraps at min(columns, 80) - 2: the file from 80 on, click below
        monkeypatch.setenv("COLUMNS", columns)
        clicks = subprocess.run(by_click, capture_output=True, text=True)
        assert clicks.returncode == 0 and clicks.stdout.startswith("Usage: logist [OPTIONS] COMMAND")
        assert (help_text.HELP_FILE.read_text(encoding="utf-8") == clicks.stdout) == (int(columns) >= 80)
        for option in ("--help", "-h"):
            fast = logist_cli(option)
            assert (fast.returncode, fast.stdout, fast.stderr) == (0, clicks.stdout, ""), (columns, option)
    monkeypatch.setenv("COLUMNS", "100")
    probe = ("import sys\nfrom logist.__main__ import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
             "print(sorted(m for m in sys.modules if m.split('.')[0] in ('click', 'pydantic')), file=sys.stderr)\n")
    seen = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert seen.stdout == help_text.HELP_FILE.read_text(encoding="utf-8") and seen.stderr == "[]\n"
