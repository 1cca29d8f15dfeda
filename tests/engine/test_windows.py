"""Where a model's context window comes from (issue 26, point 2): the role,
config.json, Logist's table, or what a local server tells, read from real
HTTP servers on 127.0.0.1 that answer as llama.cpp (/props), vLLM
(/v1/models) and Ollama (/api/show) do; and the request sized to it."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from logist.engine.create import create_job
from logist.engine.context import ContextOverflowError, context_window, sized_call
from logist.model.client import LLMSettings
from logist.store.config import LogistConfig
from logist.store.roles import builtin_roles

from conftest import write_config


def serving(routes: dict):
    """A server answering ``routes`` ({(method, path): JSON}) and 404 to the rest."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def _answer(self, method: str) -> None:
            if method == "POST":
                self.rfile.read(int(self.headers.get("content-length") or 0))
            found = routes.get((method, self.path))
            data = json.dumps(found if found is not None else {"error": "not found"}).encode()
            self.send_response(200 if found is not None else 404)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._answer("GET")

        def do_POST(self) -> None:
            self._answer("POST")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.mark.parametrize("routes, window, where", [
    ({("GET", "/props"): {"default_generation_settings": {"n_ctx": 3072}}}, 3072, "/props"),
    ({("GET", "/v1/models"): {"data": [{"id": "other", "max_model_len": 99},
                                        {"id": "local", "max_model_len": 16384}]}}, 16384, "/v1/models"),
    ({("POST", "/api/show"): {"model_info": {"llama.context_length": 131072}, "parameters": "num_ctx 8192"}},
     8192, "/api/show"),
    ({("POST", "/api/show"): {"model_info": {"qwen2.context_length": 32768}}}, 4096, "/api/show"),
    ({}, None, ""),
], ids=["llama.cpp", "vllm", "ollama-num_ctx", "ollama-default", "none"])
def test_a_local_servers_window_is_read_where_it_tells(routes, window, where):
    server = serving(routes)
    try:
        settings = LLMSettings(base_url=f"http://127.0.0.1:{server.server_address[1]}/v1", api_key=None)
        found = context_window(LogistConfig(), builtin_roles()["Worker"], "local", settings)
        assert found.tokens == window
        assert (where in found.source) if window else found.source == ""
    finally:
        server.shutdown()
        server.server_close()


def test_the_role_then_config_then_the_table_come_before_asking(jobs):
    role = builtin_roles()["Worker"].model_copy(update={"context_window": 1000})
    config = LogistConfig.model_validate({"model_settings": {"gpt-4o-mini": {"context_window": 2000}}})
    assert context_window(config, role, "gpt-4o-mini", None).tokens == 1000
    assert context_window(config, builtin_roles()["Worker"], "gpt-4o-mini", None).tokens == 2000
    table = context_window(LogistConfig(), builtin_roles()["Worker"], "openai/gpt-4o-mini", None)
    assert table.tokens == 128000 and table.source == "Logist's table of models"


def test_a_request_is_sized_to_the_window_and_one_over_it_stops_with_nothing_written(jobs):
    write_config(jobs, model_settings={"gpt-4o-mini": {"context_window": 4000}})
    job = create_job(jobs, "w", "Write hello.py")
    prepared = sized_call(job, job.manifest(), None, None)
    assert prepared.body["max_tokens"] == 1000, "at most a quarter of the window"
    write_config(jobs, model_settings={"gpt-4o-mini": {"context_window": 1200}})
    before = job.history_path.read_bytes(), job.manifest_path.read_bytes()
    with pytest.raises(ContextOverflowError, match=r"over the window of 1,200 \(config.json model_settings\)"):
        sized_call(job, job.manifest(), None, None)
    assert (job.history_path.read_bytes(), job.manifest_path.read_bytes()) == before


def test_the_servers_own_smaller_window_stops_a_request_before_the_call_naming_both(jobs):
    """config.json says 4,096, the server (llama.cpp's /props) 2,048: a
    request of about 2,500 tokens is stopped before the call, nothing written."""
    server = serving({("GET", "/props"): {"default_generation_settings": {"n_ctx": 2048}}})
    try:
        base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        write_config(jobs, model_settings={"gpt-4o-mini": {"context_window": 4096}})
        job = create_job(jobs, "w", "Write hello.py", details="word " * 2000)  # about 2,500 tokens with the prompt
        before = job.history_path.read_bytes(), job.manifest_path.read_bytes()
        with pytest.raises(ContextOverflowError) as raised:
            sized_call(job, job.manifest(), None, LLMSettings(base_url=base_url, api_key=None))
        assert "over the window of 2,048 (the endpoint (/props), though config.json model_settings says 4,096)" \
            in str(raised.value), str(raised.value)
        assert "no call was made" in str(raised.value)
        assert (job.history_path.read_bytes(), job.manifest_path.read_bytes()) == before
        # A smaller request fits both; the max_tokens stays config.json's quarter.
        small = create_job(jobs, "s", "Write hello.py")
        prepared = sized_call(small, small.manifest(), None, LLMSettings(base_url=base_url, api_key=None))
        assert prepared.body["max_tokens"] == 1024
    finally:
        server.shutdown()
        server.server_close()


def test_an_endpoint_that_cannot_say_its_window_fails_no_job(jobs):
    """The question goes nowhere (nothing listens): the window is config.json's, the call is prepared."""
    write_config(jobs, model_settings={"gpt-4o-mini": {"context_window": 4096}})
    job = create_job(jobs, "w", "Write hello.py")
    prepared = sized_call(job, job.manifest(), None, LLMSettings(base_url="http://127.0.0.1:9/v1", api_key=None))
    assert prepared.body["max_tokens"] == 1024


def test_a_requests_text_is_made_for_a_tokenizer_only_where_the_endpoint_has_one():
    """A request's text (the whole turn's) is made to be counted only where the
    endpoint has a tokenizer to ask; where it has one, that text is counted."""
    from logist.model.client import count_tokens

    made = []

    def text() -> str:
        made.append(1)
        return "one two three"

    for routes, count in (({}, None), ({("POST", "/tokenize"): {"tokens": [1, 2, 3]}}, 3)):
        server = serving(routes)
        try:
            settings = LLMSettings(base_url=f"http://127.0.0.1:{server.server_address[1]}/v1", api_key=None)
            made.clear()
            assert count_tokens(settings, "local", text) == count and len(made) == 1  # asked: the text is made once
            made.clear()
            assert count_tokens(settings, "local", text) == count and len(made) == (0 if count is None else 1)
        finally:
            server.shutdown()
            server.server_close()


def test_a_requests_estimate_is_its_texts_length_joined_in_four_and_the_markers():
    """Counted without joining the text, the estimate is still the joined text's: a
    newline between texts, messages of other shapes left out of the text, markers for all."""
    from logist.engine.context import PER_MESSAGE, estimate, message_text

    texts = [{"role": "system", "content": "s" * 9}, {"role": "user", "content": "caf\u00e9"}]
    others = [{"role": "assistant", "content": None, "tool_calls": []},
              {"role": "user", "content": [{"type": "text", "text": "x" * 40}]}]
    for messages, text in ((texts, "s" * 9 + "\ncaf\u00e9"), (texts + others, "s" * 9 + "\ncaf\u00e9"),
                           ([], ""), ([{"role": "user", "content": ""}] * 2, "\n")):
        body = {"model": "m", "messages": messages}
        assert message_text(body) == text
        assert estimate(body) == -(-len(text) // 4) + PER_MESSAGE * len(messages)
