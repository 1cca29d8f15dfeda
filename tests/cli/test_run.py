"""Starting with a real model and what a person sees while it runs: the
endpoint check, ``doctor`` and ``models``, timeouts, streaming and its
fallback, the progress line (on a real pty), the line per call, estimated
usage, prices and tool-call answers. The real program (its entry point, in
the test's process, or a child process on a terminal: tests/conftest.py), or
click's CliRunner on the command group, against a real ScriptedLLMServer."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading

import pytest

from logist.store.session import JobFiles
from logist.engine.context import estimate
from click.testing import CliRunner

from logist.engine.create import create_job
from logist.engine.step import step_once
from logist.replay.apply import replay_history
from logist.store.jobsdir import JobsDir
from logist.cli import cli
from logist.errors import ConfigError
from logist.replay.scripted import Reply, ScriptedLLMServer, answer
from logist.store.config import DEFAULT_BASE_URL, NOT_CONFIGURED, load_config, resolve_endpoint, shipped_prices

from conftest import CANARY_KEY, logist_cli, run_on_a_terminal, write_config

DONE = answer("COMPLETED", "Wrote hello.py.", [])


def ok(result, code: int = 0):
    assert result.returncode == code, f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert "Traceback" not in result.stderr
    return result


def make_job(jobs, job_id="hello", **kwargs):
    return create_job(jobs, job_id, "Write hello.py that prints a greeting", **kwargs)


def files_of(job) -> dict:
    """The job's files (its lock file aside: taking the lock leaves it empty)."""
    return {p.name: p.read_bytes() for p in job.dir.iterdir() if p.is_file() and p.name != ".lock"}


# Starting: no endpoint, doctor, models ---------------------------------------------------------------------


def test_no_endpoint_and_no_key_fails_before_any_call_and_leaves_the_job(jobs):
    job = make_job(jobs)
    before = files_of(job)
    for command in (["job", "step", "hello", "--oneshot"], ["job", "run", "hello"], ["job", "run", "--all"]):
        result = ok(logist_cli(*command), 1)
        lines = result.stderr.strip().splitlines()
        assert lines == [f"Error: {NOT_CONFIGURED}"], result.stderr
        for way in ("--base-url", "LOGIST_BASE_URL", "config.json", "LOGIST_API_KEY"):
            assert way in lines[0]
    assert files_of(job) == before
    assert job.manifest().status == "PENDING" and job.manifest().calls == 0


def test_configured_means_an_endpoint_named_anywhere_or_a_key(jobs, monkeypatch):
    config = load_config(jobs.path)
    with pytest.raises(ConfigError):
        resolve_endpoint(None, config)
    assert resolve_endpoint("http://127.0.0.1:1/v1", config) == "http://127.0.0.1:1/v1"
    write_config(jobs, base_url="http://from-config/v1")
    assert resolve_endpoint(None, load_config(jobs.path)) == "http://from-config/v1"
    monkeypatch.setenv("OPENAI_BASE_URL", "http://from-env/v1")
    assert resolve_endpoint(None, load_config(jobs.path)) == "http://from-env/v1"
    monkeypatch.delenv("OPENAI_BASE_URL")
    (jobs.path / "config.json").unlink()
    monkeypatch.setenv("OPENAI_API_KEY", CANARY_KEY)
    assert resolve_endpoint(None, load_config(jobs.path)) == DEFAULT_BASE_URL


def test_doctor_shows_endpoint_key_models_and_pings(jobs, llm):
    write_config(jobs, models={"Supervisor": "mystery-model"})
    env = {"LOGIST_API_KEY": CANARY_KEY}
    result = ok(logist_cli("doctor", "--base-url", llm.base_url, env=env))
    out = result.stdout
    assert f"endpoint   {llm.base_url}  (from --base-url)" in out
    assert "api key    set, in LOGIST_API_KEY" in out
    # The scripted server lists the built-in roles' model; config.json's Supervisor model is not among its models.
    assert "Worker: gpt-4o-mini ($0.15 in, $0.6 out per million tokens)" in out
    assert "Supervisor: mystery-model (price unknown: add it to \"prices\" in config.json" in out
    assert "; not among the endpoint's models)" in next(line for line in out.splitlines() if "mystery-model" in line)
    assert "ping       GET /models: 1 model listed in" in out
    assert CANARY_KEY not in result.stdout + result.stderr
    data = json.loads(ok(logist_cli("doctor", "--json", env={**env, "LOGIST_BASE_URL": llm.base_url})).stdout)
    assert data["endpoint"] == llm.base_url and data["endpoint_from"] == "LOGIST_BASE_URL"
    assert data["api_key_set"] is True and data["api_key_variable"] == "LOGIST_API_KEY"
    assert data["roles"]["Worker"]["model"] == "gpt-4o-mini" and data["roles"]["Worker"]["listed"] is True
    assert data["roles"]["Supervisor"]["listed"] is False
    assert data["ping"]["ok"] is True and data["ping"]["models"] == 1
    assert CANARY_KEY not in json.dumps(data)


def test_doctor_fails_without_an_endpoint_or_when_it_does_not_answer(jobs):
    result = ok(logist_cli("doctor"), 1)
    assert f"endpoint   none: {NOT_CONFIGURED}" in result.stdout and "ping       skipped" in result.stdout
    result = ok(logist_cli("doctor", "--base-url", "http://127.0.0.1:9/v1"), 1)
    assert "ping       GET /models failed: LLM call failed after 1 attempt: cannot connect" in result.stdout


def test_models_lists_the_endpoints_models(jobs):
    with ScriptedLLMServer(models=["b-model", "a-model"]) as server:
        assert ok(logist_cli("models", "--base-url", server.base_url)).stdout.splitlines() == ["a-model", "b-model"]
        assert json.loads(ok(logist_cli("models", "--json", "--base-url", server.base_url)).stdout) == ["a-model", "b-model"]
    failed = ok(logist_cli("models", "--base-url", "http://127.0.0.1:9/v1"), 1)
    assert failed.stderr.startswith("Error: LLM call failed after 1 attempt: cannot connect")
    assert "(endpoint http://127.0.0.1:9/v1)" in failed.stderr
    assert ok(logist_cli("models"), 1).stderr.strip() == f"Error: {NOT_CONFIGURED}"


# Timeouts and retries --------------------------------------------------------------------------------------


def test_a_timed_out_call_is_not_sent_again_and_says_what_raises_the_limit(jobs, llm):
    write_config(jobs, request_timeout=0.5, max_retries=3)
    job = make_job(jobs)
    llm.add(Reply(content=DONE, delay=3.0), Reply(content=DONE, delay=3.0))
    result = ok(logist_cli("job", "step", "hello", "--oneshot", "--base-url", llm.base_url), 1)
    assert len(llm.requests) == 1, "a timed-out request is not sent again"
    reason = JobFiles(job.dir).load_history().interactions[-1].response.error
    assert reason.startswith("LLM call failed after 1 attempt: the request timed out: no answer within 0.5 s")
    assert "request_timeout in config.json or --request-timeout raises the limit" in reason
    assert "Worker ERROR -> PENDING" in result.stderr
    # The turn is kept: the message says how to go on, and the job is where it was.
    assert "The turn is kept: logist job step hello (or job run) goes on with the same conversation" in result.stderr
    assert job.manifest().status == "PENDING"


def test_request_timeout_option_overrides_config(jobs, llm):
    job = make_job(jobs)
    llm.add(Reply(content=DONE, delay=3.0))
    done = ok(logist_cli("job", "step", "hello", "--oneshot", "--request-timeout", "0.4", "--base-url", llm.base_url), 1)
    assert "no answer within 0.4 s" in done.stderr and len(llm.requests) == 1


def test_server_errors_are_still_retried_within_max_retries(jobs, llm):
    write_config(jobs, max_retries=2)
    job = make_job(jobs)
    llm.add(Reply(status=503), Reply(status=429), DONE)
    assert step_once(job, base_url=llm.base_url).action == "COMPLETED"
    assert len(llm.requests) == 3


# One client per endpoint; openai only when a call is made --------------------------------------------------


def test_one_client_per_endpoints_and_endpoint(jobs, llm):
    from logist.model.client import Endpoints

    job = make_job(jobs)
    llm.add(answer("MESSAGE", message="one"), answer("MESSAGE", message="two"))
    endpoints = Endpoints()
    step_once(job, base_url=llm.base_url, endpoints=endpoints)
    first = endpoints.client(llm.base_url, None)
    step_once(job, base_url=llm.base_url, endpoints=endpoints)
    assert endpoints.client(llm.base_url, None) is first
    assert [key for key in endpoints._clients if key[0] == llm.base_url] == [(llm.base_url, None)]
    assert Endpoints().client(llm.base_url, None) is not first, "another owner, another client"
    endpoints.close()


def test_openai_is_imported_only_when_a_call_is_made(jobs):
    make_job(jobs)
    code = (
        "import sys; from click.testing import CliRunner; from logist.cli import cli; import logist.model.client\n"
        "for args in (['--help'], ['job', 'status', 'hello'], ['job', 'preview', 'hello', '--json'], ['doctor']):\n"
        "    CliRunner().invoke(cli, args)\n"
        "print('openai' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "False", result.stderr


# Streaming -------------------------------------------------------------------------------------------------


def test_a_streamed_answer_is_recorded_whole_with_the_body_that_was_sent(jobs, llm):
    job = make_job(jobs)
    preview = CliRunner().invoke(cli, ["job", "preview", "hello", "--json"])
    body = json.loads(preview.stdout)
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    llm.add(Reply(content=DONE, pieces=7, usage={"prompt_tokens": 100, "completion_tokens": 20}))
    result = step_once(job, base_url=llm.base_url)
    assert llm.requests == [body], "what preview shows is what was sent"
    entry = JobFiles(job.dir).load_history().interactions[-1]
    assert entry.response.raw_response == DONE and result.action == "COMPLETED"
    assert entry.request.metadata.stream is True
    assert (entry.usage.prompt_tokens, entry.usage.completion_tokens, entry.usage.estimated) == (100, 20, False)
    inspect = json.loads(CliRunner().invoke(cli, ["job", "history", "hello", "--entry", "2", "--json"]).stdout)
    assert inspect["request_body"] == body


def test_streaming_off_in_config_sends_a_plain_body(jobs, llm):
    write_config(jobs, stream=False)
    job = make_job(jobs)
    llm.add(DONE)
    step_once(job, base_url=llm.base_url)
    assert "stream" not in llm.requests[0] and JobFiles(job.dir).load_history().interactions[-1].request.metadata.stream is None


@pytest.mark.parametrize("mode, first_requests", [("refuse", 2), ("ignore", 1)])
def test_an_endpoint_that_does_not_stream_is_asked_plainly_and_remembered(jobs, mode, first_requests):
    """refuse: HTTP 400 to a streamed request, so it is asked again plainly;
    ignore: a whole answer to a streamed request. Either way the calls that
    share its Endpoints (a command's, a logist.open's) send the endpoint's
    later calls plain."""
    from logist.model.client import Endpoints

    job = make_job(jobs)
    one, two = answer("MESSAGE", message="one"), answer("MESSAGE", message="two")
    endpoints = Endpoints()
    with ScriptedLLMServer([one, two], streaming=mode) as server:
        first = step_once(job, base_url=server.base_url, endpoints=endpoints)
        assert first.action == "MESSAGE" and len(server.requests) == first_requests
        assert server.requests[0]["stream"] is True
        second = step_once(job, base_url=server.base_url, endpoints=endpoints)
        assert second.action == "MESSAGE" and len(server.requests) == first_requests + 1
        assert "stream" not in server.requests[-1] and "stream_options" not in server.requests[-1]
    entries = JobFiles(job.dir).load_history().interactions
    # What is recorded is the body the answer came from.
    assert entries[-2].request.metadata.stream is (True if mode == "ignore" else None)
    assert entries[-1].request.metadata.stream is None
    assert [e.response.raw_response for e in entries[-2:]] == [one, two]


# While it runs: the progress line on a terminal ------------------------------------------------------------


def test_a_progress_line_while_the_call_is_in_flight_only_on_a_terminal(jobs, llm):
    make_job(jobs)
    # The pieces after the first are held until the line counts it (at most 10 s each: then the assert fails).
    counted = threading.Event()
    slow = Reply(content=answer("MESSAGE", message="thinking"), pieces=6, piece_delay=10, release=counted)
    llm.add(slow)
    code, output = run_on_a_terminal("job", "step", "hello", "--oneshot", "--base-url", llm.base_url,
                                     release_when=("tokens so far", counted))
    assert code == 0, output
    assert "\r\x1b[K  Worker (gpt-4o-mini), step 1 of 100: waiting for the model, 0 s" in output
    assert "tokens so far" in output, "the pieces streamed so far are counted"
    # The line is wiped before the step's lines are printed.
    progress_end = output.rindex("\r\x1b[K")
    assert output.index("#2 Worker MESSAGE -> RUNNING") > progress_end
    assert "Worker MESSAGE: " in output[progress_end:]

    # Quiet or piped there is no progress line at all (one is drawn as soon as it starts): the answer
    # need not be slow to show it is never drawn.
    fast = Reply(content=answer("MESSAGE", message="thinking"), pieces=6)
    llm.add(fast)
    code, quiet = run_on_a_terminal("job", "step", "hello", "--oneshot", "--quiet", "--base-url", llm.base_url)
    assert code == 0 and "waiting for the model" not in quiet and "\x1b[K" not in quiet
    assert "#3 Worker MESSAGE -> RUNNING" in quiet and "tokens in" not in quiet

    llm.add(fast)
    piped = ok(logist_cli("job", "step", "hello", "--oneshot", "--base-url", llm.base_url))  # stderr not a terminal
    assert "waiting for the model" not in piped.stderr and "\x1b" not in piped.stderr
    assert "#4 Worker MESSAGE -> RUNNING" in piped.stderr


# After each call: tokens, cost, time; a command's output ---------------------------------------------------


def test_one_line_per_call_with_tokens_cost_and_duration(jobs, llm):
    make_job(jobs)
    llm.add(Reply(content=answer("MESSAGE", message="hi"), usage={"prompt_tokens": 1000, "completion_tokens": 200}))
    result = ok(logist_cli("job", "step", "hello", "--oneshot", "--base-url", llm.base_url))
    lines = result.stderr.splitlines()
    assert lines[0].startswith("#2 Worker MESSAGE -> RUNNING")
    # gpt-4o-mini, shipped price: 1000 x $0.15 + 200 x $0.60 per million.
    assert lines[1].startswith("   Worker MESSAGE: 1,000 tokens in, 200 out, $0.0003, ") and lines[1].endswith(" s")
    assert JobFiles(jobs.job("hello").dir).load_history().interactions[-1].usage.cost_usd == pytest.approx(0.00027)

    llm.add(answer("MESSAGE", message="again"))
    result = ok(logist_cli("job", "step", "hello", "--oneshot", "--model", "mystery-model", "--base-url", llm.base_url))
    assert 'price unknown: add mystery-model to "prices" in config.json' in result.stderr

    write_config(jobs, prices={"mystery-model": {"input_per_million": 1000, "output_per_million": 0}})
    llm.add(Reply(content=answer("MESSAGE", message="priced"), usage={"prompt_tokens": 10, "completion_tokens": 5}))
    result = ok(logist_cli("job", "step", "hello", "--oneshot", "--model", "mystery-model", "--base-url", llm.base_url))
    assert "10 tokens in, 5 out, $0.0100, " in result.stderr

    llm.add(answer("MESSAGE", message="quiet"))
    result = ok(logist_cli("job", "step", "hello", "--oneshot", "-q", "--base-url", llm.base_url))
    assert result.stderr.splitlines()[0].startswith("#5 Worker MESSAGE") and "tokens in" not in result.stderr


def test_a_commands_output_is_shown_cut_to_a_few_lines(jobs, llm):
    make_job(jobs, command_policy="allow", allowed_commands=["python -c *"])
    script = "for i in range(40): print('line', i)"
    llm.add(answer("CMD", command=f'python -c "{script}"'))
    result = ok(logist_cli("job", "step", "hello", "--oneshot", "--base-url", llm.base_url))
    err = result.stderr
    assert re.search(re.escape(f'   $ python -c "{script}"  (exit 0, ') + r"\d+\.\d s\)\n", err), err
    assert "   | line 0\n" in err and "   | line 39\n" in err and "   | line 20\n" not in err
    assert "more lines (logist job show, or the transcript)" in err
    recorded = JobFiles(jobs.job("hello").dir).load_history().interactions[-1].command.output
    assert "line 20" in recorded, "the model is shown all of it"


# No usage from the server: estimated, marked, counted -------------------------------------------------------


def test_no_usage_is_estimated_marked_and_counted_against_the_token_budget(jobs, llm):
    job = make_job(jobs, max_tokens=50)
    content = answer("MESSAGE", message="x" * 100)
    llm.add(Reply(content=content, usage=False))
    result = step_once(job, base_url=llm.base_url)
    entry = JobFiles(job.dir).load_history().interactions[-1]
    assert entry.usage.estimated is True
    # The scripted server has no tokenizer: 4 characters a token, and the template's markers per message.
    assert entry.usage.prompt_tokens == estimate(llm.requests[0]) and entry.usage.completion_tokens == -(-len(content) // 4)
    assert result.tokens_estimated and job.manifest().totals.tokens == entry.usage.prompt_tokens + entry.usage.completion_tokens
    stopped = step_once(job, base_url=llm.base_url)
    assert stopped.action == "LIMIT" and "token budget spent" in stopped.error and len(llm.requests) == 1


# Tool-call answers -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("streamed", [True, False])
def test_a_tool_call_answer_is_read_as_the_answer(jobs, streamed, replay_llm, tmp_path):
    job = make_job(jobs)
    with ScriptedLLMServer([Reply(content=DONE, tool_call="submit_answer")], streaming=streamed or "ignore") as server:
        result = step_once(job, base_url=server.base_url)
    assert (result.action, str(result.status)) == ("COMPLETED", "REVIEWING")
    entry = JobFiles(job.dir).load_history().interactions[-1]
    assert entry.response.raw_response == DONE and entry.response.status == "SUCCESS"
    assert entry.note == "the answer came as a call of tool 'submit_answer'; its arguments were read as the answer"
    # Replayed, it comes as the same tool call.
    again = make_job(JobsDir(tmp_path / "again"))
    replay_history(again, JobFiles(job.dir).load_history(), base_url=replay_llm(JobFiles(job.dir).load_history()).base_url)
    assert JobFiles(again.dir).load_history().interactions[-1].note == entry.note


# Prices ----------------------------------------------------------------------------------------------------


def test_prices_ship_with_logist_and_config_adds_and_overrides(jobs):
    shipped = shipped_prices()
    assert {"gpt-4o-mini", "gpt-4o", "gpt-4.1", "claude-sonnet-4-5", "gemini-2.5-flash", "deepseek-chat"} <= set(shipped)
    config = load_config(jobs.path)
    assert config.price("gpt-4o-mini") == shipped["gpt-4o-mini"]
    assert config.price("openai/gpt-4o-mini") == shipped["gpt-4o-mini"]
    assert config.price("llama3.1:8b") is None
    write_config(jobs, prices={"gpt-4o-mini": {"input_per_million": 9, "output_per_million": 9},
                               "llama3.1:8b": {"input_per_million": 0, "output_per_million": 0}})
    config = load_config(jobs.path)
    assert config.price("gpt-4o-mini").input_per_million == 9 and config.price("llama3.1:8b").output_per_million == 0


# A local server and no model named anywhere -----------------------------------------------------------------


def test_with_only_a_base_url_the_endpoints_only_model_is_sent_not_a_hosted_one(jobs):
    """No --model, job model, default_model or models: a server that lists one
    model gets that model, not the built-in roles' gpt-4o-mini, and no price
    is counted for it."""
    with ScriptedLLMServer(models=["local-model"]) as server:
        write_config(jobs, base_url=server.base_url)
        ok(logist_cli("job", "create", "hello", "-o", "Say hi"))
        server.add(json.dumps({"action": "MESSAGE", "message": "hi"}))
        ok(logist_cli("job", "step", "hello", "--oneshot"))
        assert server.requests[-1]["model"] == "local-model"
        status = json.loads(ok(logist_cli("job", "status", "hello", "--json")).stdout)
        assert status["totals"]["cost_usd"] == 0 and status["totals"]["unpriced_calls"] == 1
        preview = json.loads(ok(logist_cli("job", "preview", "hello", "--json")).stdout)
        assert preview["model"] == "local-model", "the preview is the request a step sends"
        doctor = ok(logist_cli("doctor")).stdout
        assert "Worker: local-model" in doctor and "the endpoint's only model" in doctor


def test_with_only_a_base_url_and_several_models_the_error_names_default_model(jobs):
    with ScriptedLLMServer(models=["qwen", "smol"]) as server:
        write_config(jobs, base_url=server.base_url)
        ok(logist_cli("job", "create", "hello", "-o", "Say hi"))
        failed = ok(logist_cli("job", "step", "hello", "--oneshot"), 1)
        lines = failed.stderr.strip().splitlines()
        assert len(lines) == 1 and "default_model" in lines[0] and "gpt-4o-mini" in lines[0], failed.stderr
        assert "it lists 2 models (qwen, smol)" in lines[0]
        assert server.requests == [], "no call was made"
        # A model named anywhere is sent as named.
        write_config(jobs, base_url=server.base_url, default_model="smol")
        server.add(json.dumps({"action": "MESSAGE", "message": "hi"}))
        ok(logist_cli("job", "step", "hello", "--oneshot"))
        assert server.requests[-1]["model"] == "smol"
