"""Command policy, execution and output cleaning (logist.engine.commands)."""

from __future__ import annotations

import sys

from hypothesis import given
from hypothesis import strategies as st

from logist.engine.commands import clean_output, command_env, cut_middle, decide, run_command


def test_escapes_and_redraws_are_removed():
    raw = (
        "\x1b]0;title\x07\x1b[1;32mPASSED\x1b[0m test_a\r\n"
        "progress  10%\rprogress  50%\rprogress 100%\n"
        "abc\bd\n"
    )
    assert clean_output(raw) == "PASSED test_a\nprogress 100%\nabd"


def test_echoed_command_and_prompts_are_removed():
    raw = "$ make test\nok\nuser@host:~/w$ \n>>> \n"
    assert clean_output(raw, "make test") == "ok"


def test_meaningful_repeats_are_kept_long_runs_collapsed():
    short = "ok\nok\nok\nFAILED\n"
    assert clean_output(short) == "ok\nok\nok\nFAILED"
    long = "retry\n" * 50 + "done\n"
    assert clean_output(long) == "retry\n[... the line above repeated 49 more times]\ndone"


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


def test_command_env_drops_secrets():
    env = command_env({
        "PATH": "/bin", "HOME": "/h", "LOGIST_API_KEY": "k", "OPENAI_API_KEY": "k", "GITHUB_TOKEN": "t",
        "DB_PASSWORD": "p", "AWS_SECRET_ACCESS_KEY": "s", "MY_API_KEY": "s", "EDITOR": "vi",
    })
    assert set(env) == {"PATH", "HOME", "EDITOR", "TERM", "NO_COLOR", "PYTHONDONTWRITEBYTECODE"}


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
    import time

    time.sleep(3.5)
    assert not marker.exists(), "a background child outlived the timeout"


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
