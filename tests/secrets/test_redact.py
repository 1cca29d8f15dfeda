"""Which values are secret, and that redaction replaces them wherever they are (logist.secrets.redact)."""

from __future__ import annotations

import json

from logist.engine.commands import clean_output, shown_lines
from logist.secrets.redact import REDACTED, known_secrets, redact, redact_data, redact_shown, secret_name, url_shown


def test_secret_names():
    for name in ("LOGIST_API_KEY", "GH_PAT", "GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD", "PGPASSWD",
                 "GPG_PASSPHRASE", "GOOGLE_APPLICATION_CREDENTIALS", "SSH_AUTH_SOCK", "npm_token"):
        assert secret_name(name), name
    for name in ("PATH", "PATTERN", "AUTHOR", "HOME", "DATABASE_URL", "LANG"):
        assert not secret_name(name), name


def test_known_secrets_from_an_environment():
    env = {"LOGIST_API_KEY": "sk-abcdef123", "GH_PAT": "ghp_123456", "DATABASE_URL": "postgres://app:s3cr3t-pw@db/x",
           "SENTRY": "https://public@sentry.io/1", "SESSION_KEY": "1", "PATH": "/usr/bin:/bin", "EMPTY_TOKEN": "     "}
    # Longest first; a URL's password, not the URL; short or blank values are left alone.
    assert known_secrets(env) == ["sk-abcdef123", "ghp_123456", "s3cr3t-pw"]
    assert known_secrets({}, extra=["given-secret"]) == ["given-secret"]


def test_redact_text_and_data():
    secrets = ["sk-abcdef123", 'pa"ss\\word']
    text = "key sk-abcdef123 twice sk-abcdef123"
    assert redact(text, secrets) == f"key {REDACTED} twice {REDACTED}"
    # The JSON-escaped form of a secret is found too (a secret inside serialised JSON).
    assert 'pa"ss' not in redact(json.dumps({"v": 'pa"ss\\word'}), secrets)
    data = {"sk-abcdef123": ["x sk-abcdef123", 3, None, {"y": "sk-abcdef123"}], "n": 1.5}
    assert redact_data(data, secrets) == {REDACTED: [f"x {REDACTED}", 3, None, {"y": REDACTED}], "n": 1.5}
    assert redact_data(data, []) is data
    assert redact(None, secrets) is None and redact("", secrets) == ""


def test_the_process_environment_is_read_again_when_it_changes(monkeypatch):
    monkeypatch.setenv("SOME_TOKEN", "first-token-value")
    assert "first-token-value" in known_secrets()
    monkeypatch.setenv("SOME_TOKEN", "second-token-value")
    assert "second-token-value" in known_secrets() and "first-token-value" not in known_secrets()
    assert redact("a second-token-value b") == f"a {REDACTED} b"


SECRET = "sk-abcdef123456"


def test_a_secret_that_only_shows_on_a_terminal_is_redacted_where_it_is_written():
    for written in ("sk-abc\x1b[0mdef123456", "sk-abcX\bdef123456", "sk-abc\x1b]0;t\x07def123456", "sk-abc\x01def123456",
                    "sk-abc\x1b[1m\x1b[0m\x02def1\x1b]8;;\x1b\\23456", "sk-abcdeXY\b\bf123456"):
        raw = redact_shown(f"before {written} after\nnext", shown_lines, [SECRET])
        assert raw == f"before {REDACTED} after\nnext", repr(written)
        assert clean_output(raw) == f"before {REDACTED} after\nnext"
    # A redraw that writes the secret's start over its end: the stretch from the first shown character to the last.
    assert clean_output("xxxxxxdef123456 tail\rsk-abc") == "sk-abcdef123456 tail"
    assert redact_shown("xxxxxxdef123456 tail\rsk-abc", shown_lines, [SECRET]) == f"xxxxxx{REDACTED}"
    assert redact_shown("def123456\rsk-abc", shown_lines, [SECRET]) == "def123456\rsk-abc", "shows sk-abc456"
    # Written whole, or shown by nothing: as redact.
    assert redact_shown(f"a {SECRET} \x1b[0m", shown_lines, [SECRET]) == f"a {REDACTED} \x1b[0m"
    assert redact_shown("plain \x1b[1mtext", shown_lines, [SECRET]) == "plain \x1b[1mtext"
    assert redact_shown("sk-abc\x1b[0mdef123456", shown_lines, []) == "sk-abc\x1b[0mdef123456"


def test_an_urls_password_is_shown_redacted():
    assert url_shown("http://user:PW-1@host:8080/v1") == f"http://user:{REDACTED}@host:8080/v1"
    assert url_shown("cannot reach https://a:b@x/v1 or ftp://c:d@y") == f"cannot reach https://a:{REDACTED}@x/v1 or ftp://c:{REDACTED}@y"
    for plain in ("http://localhost:11434/v1", "http://user@host/v1", "mail me@example.org"):
        assert url_shown(plain) == plain
