"""What doctor and models say of an endpoint that is not the API, and what
doctor finds out about an endpoint that is (issue 26, point 3), against real
HTTP servers on 127.0.0.1: a web page server, and the scripted one."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from conftest import logist_cli, write_config

PAGE = b"<!doctype html><html><head><title>Welcome</title></head><body>It works!</body></html>"


class _Page(BaseHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/html; charset=utf-8")
        self.send_header("content-length", str(len(PAGE)))
        self.end_headers()
        self.wfile.write(PAGE)


@pytest.fixture
def web_page():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("command", [("models",), ("doctor",), ("doctor", "--json")])
def test_a_web_page_at_the_base_url_is_named_as_such(jobs, web_page, command):
    done = logist_cli(*command, "--base-url", web_page)
    assert done.returncode == 1
    said = done.stdout + done.stderr
    assert "internal error" not in said
    assert "the base URL serves a web page, not the API" in said and "does the base URL end in /v1?" in said
    assert "text/html" in said


def test_doctor_shows_the_window_and_probes_the_structured_output_form(jobs, llm):
    write_config(jobs, model_settings={"gpt-4o-mini": {"context_window": 8192}})
    llm.add('{"ok": true}')
    done = logist_cli("doctor", "--json", "--probe", "--base-url", llm.base_url)
    assert done.returncode == 0, done.stderr
    worker = json.loads(done.stdout)["roles"]["Worker"]
    assert worker["context_window"] == 8192 and worker["context_window_from"] == "config.json model_settings"
    assert worker["max_tokens"] == 2048 and worker["structured_output"] == "auto"
    assert worker["form_found"] == "json_schema (strict)"
    assert len(llm.requests) == 1, "one tiny call for the one model the roles use"
    probe = llm.requests[0]
    assert probe["max_tokens"] == 16 and probe["response_format"]["json_schema"]["strict"] is True
    # Without --probe no call is made; the table gives a hosted model's window.
    write_config(jobs)
    plain = json.loads(logist_cli("doctor", "--json", "--base-url", llm.base_url).stdout)["roles"]["Worker"]
    assert plain["context_window"] == 128000 and plain["context_window_from"] == "Logist's table of models"
    assert plain["form_found"] is None and len(llm.requests) == 1


def test_a_web_page_under_a_base_url_that_ends_in_v1_is_not_asked_about_v1(jobs, web_page):
    done = logist_cli("models", "--base-url", web_page + "/v1")
    said = done.stdout + done.stderr
    assert done.returncode == 1
    assert "the base URL serves a web page, not the API" in said and "is it the API's address?" in said
    assert "end in /v1" not in said


@pytest.mark.parametrize("variable", ["LOGIST_API_KEY", "OPENAI_API_KEY"])
def test_a_401_names_the_variable_the_refused_key_came_from_and_only_it(jobs, llm, variable):
    from logist.replay.scripted import Reply

    write_config(jobs, max_retries=0)
    assert logist_cli("job", "create", "k", "-o", "Say hi").returncode == 0
    llm.add(Reply(status=401, error_message="Incorrect API key provided"))
    done = logist_cli("job", "step", "k", "--base-url", llm.base_url, env={variable: "sk-refused-key-1234"})
    said = done.stdout + done.stderr
    assert done.returncode == 1, said
    assert f"HTTP 401: Incorrect API key provided (the key in {variable} was refused)" in said
    other = {"LOGIST_API_KEY", "OPENAI_API_KEY"} - {variable}
    assert other.pop() not in said and "sk-refused-key-1234" not in said


def test_a_401_without_a_key_says_where_to_set_one(jobs, llm):
    from logist.replay.scripted import Reply

    write_config(jobs, max_retries=0)
    assert logist_cli("job", "create", "k", "-o", "Say hi").returncode == 0
    llm.add(Reply(status=401, error_message="no key"))
    done = logist_cli("job", "step", "k", "--base-url", llm.base_url)
    assert "(set LOGIST_API_KEY or OPENAI_API_KEY)" in done.stderr
