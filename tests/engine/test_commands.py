"""Command policy, execution and output cleaning (logist.engine.commands)."""

from __future__ import annotations

import sys

from hypothesis import given
from hypothesis import strategies as st

from conftest import processes_with
from logist.engine.commands import clean_output, cut_middle, decide, run_command
from logist.workspace.sandbox import command_env


def test_escapes_and_redraws_are_removed():
    raw = (
        "\x1b]0;title\x07\x1b[1;32mPASSED\x1b[0m test_a\r\n"
        "progress  10%\rprogress  50%\rprogress 100%\n"
        "abc\bd\n"
    )
    assert clean_output(raw) == "PASSED test_a\nprogress 100%\nabd"


def _printed(tmp_path, text: str, command: str = ""):
    """What a real command printing ``text`` (written to a file, then cat) gives the model, and the raw output kept."""
    (tmp_path / "out.txt").write_text(text, encoding="utf-8")
    result = run_command(command or "cat out.txt", tmp_path, timeout=30)
    assert result.exit_code == 0
    return result.stdout, result.raw_stdout


# Seed 002's cleaning, one rule per test, each through a real command run.

def test_real_output_is_never_taken_for_a_prompt(tmp_path):
    # Each of these was once dropped as a bare prompt at either end (echo 100% reached the model as no output).
    for line in ("100%", "#", ">", "---", "$", "%", ">>>", "...", "C:\\src\\a.py:3: assert 1 > 2"):
        shown, raw = _printed(tmp_path, line + "\n")
        assert shown == line, line
        assert raw is None  # nothing was cleaned: nothing kept twice


def test_ansi_sequences_are_removed(tmp_path):
    shown, raw = _printed(tmp_path, "\x1b]0;title\x07\x1b[1;32mPASSED\x1b[0m test_a\n")
    assert shown == "PASSED test_a"
    assert raw == "\x1b]0;title\x07\x1b[1;32mPASSED\x1b[0m test_a\n"


def test_windows_prompts_are_removed_wherever_they_are(tmp_path):
    shown, raw = _printed(tmp_path, "C:\\Users\\me>dir\n a.txt\nC:\\Program Files>\nPS C:\\Users\\me> ls\n b.txt\nPS C:\\>\n")
    assert shown == " a.txt\n b.txt"
    assert "C:\\Users\\me>dir" in raw


def test_unix_prompts_are_removed_wherever_they_are(tmp_path):
    shown, raw = _printed(tmp_path, "user@host:~$ ls\na.txt\nroot@box:/srv# make\nbuilt\nme@x-1.lan:~/w$\n")
    assert shown == "a.txt\nbuilt"
    assert raw.startswith("user@host:~$ ls\n")


def test_a_prompt_echoing_the_command_is_removed_another_is_kept(tmp_path):
    shown, _ = _printed(tmp_path, "$ cat out.txt\nok\n# cat out.txt\n$ rm -rf /\n")
    assert shown == "ok\n$ rm -rf /"


def test_windows_banners_are_removed(tmp_path):
    shown, _ = _printed(tmp_path, "Microsoft Windows [Version 10.0.19045.3803]\n"
                                  "(c) Microsoft Corporation. All rights reserved.\nok\n")
    assert shown == "ok"


def test_empty_lines_are_removed(tmp_path):
    shown, raw = _printed(tmp_path, "\n\na\n\n\n  \nb\n\n")
    assert shown == "a\nb"
    assert raw == "\n\na\n\n\n  \nb\n\n"


def test_consecutive_duplicate_lines_are_collapsed(tmp_path):
    shown, _ = _printed(tmp_path, "retry\n" * 5 + "ok\nok\nFAILED\nok\n")
    assert shown == "retry\nok\nFAILED\nok"


def test_the_seeds_cleaning_all_at_once(tmp_path):
    # Acceptance 4 of issue 29: 100%, a Windows and a Unix prompt, blank lines and five duplicate lines.
    text = "C:\\Users\\me>dir\nuser@host:~$ ls\n\n100%\n\n" + "same\n" * 5 + "\n"
    shown, raw = _printed(tmp_path, text)
    assert shown == "100%\nsame"
    assert raw == text


def test_cut_in_the_middle_keeps_both_ends():
    text = "HEAD" + "x" * 10_000 + "TAIL"
    cut = cut_middle(text, 1000)
    assert cut.startswith("HEAD") and cut.endswith("TAIL")
    assert "characters cut from the middle" in cut
    assert len(cut) < 1100


@given(st.text(), st.integers(min_value=200, max_value=5000))
def test_clean_output_is_bounded_and_escape_free(text, limit):
    out = clean_output(text, limit=limit)
    assert len(out) <= limit + 80
    assert "\x1b" not in out and "\r" not in out


def test_policy_decisions():
    assert decide("deny", ["*"], "ls") == "deny"
    assert decide("ask", ["*"], "ls") == "ask"
    assert decide("allow", ["python -m pytest*"], "python -m pytest -q") == "run"
    assert decide("allow", ["python -m pytest*"], "rm -rf /") == "ask"
    # A glob cannot smuggle a second command through.
    assert decide("allow", ["ls*"], "ls; rm -rf ~") == "ask"
    assert decide("allow", ["ls*"], "ls $(rm -rf ~)") == "ask"
    assert decide("allow", ["make test | tee log"], "make test | tee log") == "run"


def test_command_env_is_an_allowlist():
    base = {
        "PATH": "/bin", "HOME": "/h", "LANG": "C.UTF-8", "LC_ALL": "C", "TZ": "UTC", "LOGIST_API_KEY": "k",
        "OPENAI_API_KEY": "k", "GITHUB_TOKEN": "t", "GH_PAT": "ghp_x", "DATABASE_URL": "postgres://u:p@h/db",
        "AWS_ACCESS_KEY_ID": "a", "DB_PASSWORD": "p", "EDITOR": "vi", "SENTRY_DSN": "https://k@s.io/1",
    }
    assert set(command_env(base=base)) == {"PATH", "HOME", "LANG", "LC_ALL", "TZ", "TERM", "NO_COLOR", "PYTHONDONTWRITEBYTECODE"}
    # The job names what else a command needs; never the API key.
    named = command_env(["EDITOR", "GH_PAT", "LOGIST_API_KEY", "OPENAI_API_KEY"], base=base)
    assert named["EDITOR"] == "vi" and named["GH_PAT"] == "ghp_x"
    assert "LOGIST_API_KEY" not in named and "OPENAI_API_KEY" not in named


def test_run_reports_exit_code_and_stderr(tmp_path):
    result = run_command("echo out; echo err >&2; exit 3", tmp_path, timeout=30)
    report = result.report(30)
    assert result.exit_code == 3 and not result.timed_out
    assert "--- stdout ---\nout" in report and "--- stderr ---\nerr" in report and report.endswith("Exit code: 3")


def test_timeout_kills_the_whole_process_group(tmp_path):
    marker = tmp_path / "survived"
    result = run_command(f"(sleep 3; touch {marker}) & sleep 30", tmp_path, timeout=0.5)
    assert result.timed_out and result.exit_code is None
    assert "was killed" in result.report(0.5)
    # The background subshell's command line names the marker: none is left that could touch it later.
    assert processes_with(str(marker)) == [], "a background child outlived the timeout"
    assert not marker.exists()


def test_huge_output_is_read_capped(tmp_path):
    cmd = f"{sys.executable} -c \"import sys; sys.stdout.write('A' * 5_000_000 + 'END')\""
    result = run_command(cmd, tmp_path, timeout=60, limit=2000)
    assert len(result.stdout) < 2200
    assert result.stdout.endswith("END") and "cut from the middle" in result.stdout


def test_python_in_a_command_neither_writes_nor_trusts_bytecode(tmp_path):
    # The model may change a module within the second at the same size: a
    # cached .pyc (checked by mtime and size) would run the old code.
    (tmp_path / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    first = run_command(f"{sys.executable} -c 'import calc; print(calc.add(2, 3))'", tmp_path, timeout=60)
    (tmp_path / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    second = run_command(f"{sys.executable} -c 'import calc; print(calc.add(2, 3))'", tmp_path, timeout=60)
    assert (first.stdout.strip(), second.stdout.strip()) == ("-1", "5"), (first, second)
    assert not (tmp_path / "__pycache__").exists()  # nothing for the next commit to pick up


def test_the_tags_protocol_reports_a_run_as_seed_002_does(tmp_path):
    # "Command output:" and the cleaned output, both streams; no "$ cmd", stream headings or exit code.
    result = run_command("echo out; echo err >&2; exit 3", tmp_path, timeout=30)
    assert result.report(30, protocol="tags") == "Command output:\nout\nerr"
    quiet = run_command("true", tmp_path, timeout=30)
    assert quiet.report(30, protocol="tags") == "Command output:\n(no output)"
    # A command stopped at the timeout is said to be, after its output.
    slow = run_command("echo started; sleep 5", tmp_path, timeout=0.5)
    assert slow.report(0.5, protocol="tags") == (
        "Command output:\nstarted\n\nThe command did not finish within 0.5 s and was killed.")
