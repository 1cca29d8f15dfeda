"""Redaction after every transformation: a secret that a model's command
prints split by an escape sequence, a backspace, an OSC or a control byte
(which the cleaning joins), or one holding ``& < > " '`` (which HTML escapes),
appears in no output, no file of the job, no git object and no report, read
as a terminal or a browser would show it; an endpoint's password is not
printed. The real program against the scripted server; the commands are real
processes."""

from __future__ import annotations

import html
import json
import re
import socket
import subprocess
from pathlib import Path

import pytest

from logist.engine.create import create_job
from logist.replay.scripted import answer

from conftest import CANARY_KEY, logist_cli

#: Another secret redact.py knows (the name says TOKEN), holding what HTML escapes.
HTML_SECRET = "p&ss<w>rd\"x'y-Z7q"
ENV = {"LOGIST_API_KEY": CANARY_KEY, "DEPLOY_TOKEN": HTML_SECRET}

_A, _B = CANARY_KEY[:12], CANARY_KEY[12:]
#: A command per form, printing the key split so that only a terminal (or the cleaning) joins it.
SPLIT = {
    "ansi": f"printf '%s\\033[0m%s\\n' {_A} {_B}; printf '%s\\033[0m%s\\n' {_A} {_B} >&2",
    "backspace": f"printf '%sX\\b%s\\n' {_A} {_B}; printf '%sX\\b%s\\n' {_A} {_B} >&2",
    "osc": f"printf '%s\\033]0;title\\007%s\\n' {_A} {_B}; printf '%s\\033]52;c;eA==\\033\\\\%s\\n' {_A} {_B} >&2",
    "control byte": f"printf '%s\\001%s\\n' {_A} {_B}; printf '%s\\001%s\\n' {_A} {_B} >&2",
}
#: Prints HTML_SECRET (never written whole in the command) and writes it into the workspace,
#: so that it reaches the report's diff.
HTML_COMMAND = "printf '%s%s\\n' 'p&ss<w>rd\"x' \"'y-Z7q\" | tee leak.txt"

_JSON_ESCAPE = re.compile(r"\\(?:u([0-9a-fA-F]{4})|([\"\\/bfnrt]))")
_SEQUENCE = re.compile(r"\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-_]")


def revealed(text: str) -> str:
    """What a person could read in ``text``: JSON string escapes decoded,
    HTML entities decoded, then what a terminal shows (escape sequences
    obeyed, a character before a backspace erased, control bytes invisible)."""
    text = _JSON_ESCAPE.sub(lambda m: chr(int(m.group(1), 16)) if m.group(1)
                            else {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}.get(m.group(2), m.group(2)), text)
    text = html.unescape(text)
    text = _SEQUENCE.sub("", text)
    while re.search(r"[^\b\n]\x08", text):
        text = re.sub(r"[^\b\n]\x08", "", text)
    return re.sub(r"[\x00-\x08\x0b-\x1f\x7f]", "", text)


def leaks(text: str, secret: str) -> bool:
    return secret in text or secret in revealed(text)


def run(*args: str):
    result = logist_cli(*args, env=ENV)
    assert result.returncode in (0, 3), (args, result.stdout, result.stderr)
    return result


def run_job(jobs, llm, command: str) -> list:
    """A job whose model runs ``command`` twice (once printed for people,
    once as --json), and every command that shows or writes what it recorded."""
    create_job(jobs, "leak", "Print things", command_policy="allow", allowed_commands=[command])
    llm.add(answer("CMD", command=command), answer("CMD", command=command))
    results = [run("job", "step", "leak", "--oneshot", "--base-url", llm.base_url),
               run("job", "step", "leak", "--oneshot", "--json", "--base-url", llm.base_url)]
    for args in (("job", "history", "leak"), ("job", "history", "leak", "--json"),
                 ("job", "history", "leak", "--entry", "2"), ("job", "history", "leak", "--entry", "3", "--json"),
                 ("job", "show", "leak"), ("job", "show", "leak", "--json"), ("job", "status", "leak", "--json"),
                 ("job", "transcript", "leak"), ("job", "transcript", "leak", "--json"), ("job", "report", "leak"),
                 ("report",)):
        results.append(run(*args))
    entries = json.loads(run("job", "history", "leak", "--json").stdout)
    assert entries[-1]["command"]["decision"] == "run" and entries[-1]["command"]["exit_code"] == 0, "it ran"
    assert "[redacted]" in entries[-1]["command"]["output"], "what it printed was seen and redacted"
    return results


def files_of(root: Path, skip: tuple[str, ...] = ()) -> dict[Path, str]:
    return {p: p.read_bytes().decode("utf-8", "replace") for p in root.rglob("*")
            if p.is_file() and not p.is_symlink() and not any(part in skip for part in p.relative_to(root).parts)}


def git_text(workspace: Path) -> str:
    log = subprocess.run(["git", "-C", str(workspace), "log", "-p", "--all"], capture_output=True, check=True)
    objects = subprocess.run(["git", "-C", str(workspace), "cat-file", "--batch-all-objects", "--batch"],
                             capture_output=True, check=True)
    return (log.stdout + objects.stdout).decode("utf-8", "replace")


@pytest.mark.parametrize("form", list(SPLIT))
def test_a_secret_split_by_what_cleaning_removes_appears_nowhere(jobs, llm, form):
    results = run_job(jobs, llm, SPLIT[form])
    for result in results:
        assert not leaks(result.stdout, CANARY_KEY), (result.args, result.stdout)
        assert not leaks(result.stderr, CANARY_KEY), (result.args, result.stderr)
    files = files_of(jobs.path)
    assert any(p.name == "report.html" for p in files) and any(p.name == "jobHistory.json" for p in files)
    assert [str(p) for p, text in files.items() if leaks(text, CANARY_KEY)] == []
    assert not leaks(git_text(jobs.path / "leak" / "workspace"), CANARY_KEY)
    assert not leaks(json.dumps(llm.requests), CANARY_KEY), "nor was it sent to the model"


def test_a_secret_holding_what_html_escapes_appears_in_no_output_and_no_report(jobs, llm):
    results = run_job(jobs, llm, HTML_COMMAND)
    for result in results:
        assert not leaks(result.stdout, HTML_SECRET) and not leaks(result.stderr, HTML_SECRET), result.args
    report = (jobs.path / "leak" / "report.html").read_text()
    assert "leak.txt" in report, "the diff that holds it is in the report"
    assert not leaks(report, HTML_SECRET)
    # The workspace is the work, committed as it is (README, Safety); everything else of the job holds no secret.
    files = files_of(jobs.path, skip=("workspace",))
    assert [str(p) for p, text in files.items() if leaks(text, HTML_SECRET)] == []
    assert not leaks(json.dumps(llm.requests), HTML_SECRET)


def test_an_endpoints_password_is_not_printed(jobs):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    password = "pw-Zq8v1x"
    url = f"http://someone:{password}@127.0.0.1:{port}/v1"
    create_job(jobs, "down", "Anything")
    results = [logist_cli("job", "step", "down", "--oneshot", "--base-url", url),
               logist_cli("job", "preview", "down", "--base-url", url),
               logist_cli("doctor", "--base-url", url), logist_cli("doctor", "--json", "--base-url", url),
               logist_cli("models", "--base-url", url)]
    assert results[0].returncode == 1 and "(endpoint http://someone:[redacted]@127.0.0.1:" in results[0].stderr
    assert f"POST http://someone:[redacted]@127.0.0.1:{port}/v1/chat/completions" in results[1].stdout
    for result in results:
        assert password not in result.stdout + result.stderr, (result.args, result.stdout, result.stderr)
    assert [str(p) for p, text in files_of(jobs.path).items() if password in text] == []


def test_an_endpoints_password_a_401_says_back_is_redacted(jobs, llm):
    """An endpoint refuses the credentials and says the URL's password back
    in its error: printed and recorded as [redacted]."""
    from logist.replay.scripted import Reply

    password = "pw-Qe7r2kX9"
    url = llm.base_url.replace("http://", f"http://someone:{password}@", 1)
    create_job(jobs, "refused", "Anything")
    llm.add(Reply(status=401, error_message=f"wrong password {password} for someone",
                  headers={"x-should-retry": "false"}))
    result = logist_cli("job", "step", "refused", "--oneshot", "--base-url", url)
    assert result.returncode == 1 and "401" in result.stderr, result.stderr
    assert "wrong password [redacted] for someone" in result.stderr
    assert password not in result.stdout + result.stderr
    shown = logist_cli("job", "history", "refused", "--json")
    assert password not in shown.stdout + shown.stderr
    assert [str(p) for p, text in files_of(jobs.path).items() if password in text] == []


def test_a_secret_the_answer_holds_only_in_an_escaped_spelling_is_redacted_once_parsed(jobs, llm):
    """Parsing is a transformation too: ``\\u0061`` in the answer's JSON is an
    ``a`` once parsed. The raw answer is kept as it was received (its escaped
    spelling is the model's own text); nothing parsed from it holds the key."""
    escaped = CANARY_KEY.replace("a", "\\u0061", 1)
    assert escaped != CANARY_KEY
    content = json.dumps({"action": "COMPLETED", "summary_for_supervisor": "done: KEY",
                          "evidence_files": ["key.txt"], "file_changes": [{"path": "key.txt", "content": "KEY\n"}]})
    create_job(jobs, "leak", "Write the key")
    llm.add(content.replace("KEY", escaped))
    results = [run("job", "step", "leak", "--oneshot", "--base-url", llm.base_url),
               run("job", "show", "leak"), run("job", "status", "leak", "--json"), run("job", "history", "leak"),
               run("job", "report", "leak")]
    assert (jobs.path / "leak" / "workspace" / "key.txt").read_text() == "[redacted]\n"
    for result in results:
        assert CANARY_KEY not in result.stdout + result.stderr, result.args
    assert [str(p) for p, text in files_of(jobs.path).items() if CANARY_KEY in text] == []
    assert CANARY_KEY not in git_text(jobs.path / "leak" / "workspace")
