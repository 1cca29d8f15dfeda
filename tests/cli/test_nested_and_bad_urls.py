"""A configuration, a role or an index nested far too deep, and a base URL
that is no URL, are one-line errors naming the file or the setting, never
an internal error."""

from __future__ import annotations

import pytest

from conftest import logist_cli

DEEP_LIST = "[" * 100_000 + "]" * 100_000
DEEP_OBJECT = '{"a":' * 100_000 + "1" + "}" * 100_000


def _created(jobs) -> None:
    assert logist_cli("job", "create", "x", "-o", "hi").returncode == 0


def test_a_config_nested_too_deep_is_named(jobs):
    _created(jobs)
    (jobs.path / "config.json").write_text(DEEP_LIST)
    done = logist_cli("job", "step", "x")
    assert done.returncode == 1 and "config.json: nested too deeply to be a configuration" in done.stderr
    assert "internal error" not in done.stderr


def test_a_role_nested_too_deep_is_not_loaded_and_said_so(jobs):
    (jobs.path / "roles").mkdir(exist_ok=True)
    (jobs.path / "roles" / "deep.json").write_text(DEEP_OBJECT)
    listed = logist_cli("role", "list")
    assert listed.returncode == 0 and "deep.json: nested too deeply to be a role" in listed.stderr
    assert "Worker" in listed.stdout


def test_an_index_nested_too_deep_is_rebuilt(jobs):
    _created(jobs)
    (jobs.path / "jobs_index.json").write_text(DEEP_LIST)
    listed = logist_cli("job", "list")
    assert listed.returncode == 0 and "nested too deeply to be an index" in listed.stderr and "x" in listed.stdout


@pytest.mark.parametrize("url, said", [
    ("http://[::1", "is not a valid URL: Invalid IPv6 URL"),
    ("http://localhost:99999/v1", "is not a valid URL: Port out of range"),
    ("ftp://example.org/v1", "is not an http:// or https:// URL with a host"),
    ("http://user:secret@/v1", "is not an http:// or https:// URL with a host"),
])
def test_a_base_url_that_is_no_url_is_named_with_where_it_came_from(jobs, url, said):
    _created(jobs)
    (jobs.path / "config.json").write_text('{"base_url": "%s"}' % url)
    done = logist_cli("job", "step", "x")
    assert done.returncode == 1 and f"the base URL from config.json {said}" in done.stderr, done.stderr
    assert "secret" not in done.stderr and "internal error" not in done.stderr
    given = logist_cli("job", "step", "x", "--base-url", url)
    assert f"the base URL from --base-url {said}" in given.stderr
