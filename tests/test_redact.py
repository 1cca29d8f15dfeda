"""Which values are secret, and that redaction replaces them wherever they are (logist.redact)."""

from __future__ import annotations

import json

from logist.redact import REDACTED, known_secrets, redact, redact_data, secret_name


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
