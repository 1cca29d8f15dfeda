"""The replay server: each request answered by the recorded call whose
request it is, strict and lenient matching, recorded failures, the official
client in another process, the CLI command."""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import openai
import pytest

from logist.store.session import JobFiles
from logist import Status
from logist.engine.create import create_job
from logist.engine.decide import user_action
from logist.engine.loop import run_job
from logist.engine.step import step_once
from logist.store.jobsdir import JobsDir
from logist.replay.fixtures import create_from_fixture, load_fixture
from logist.replay.apply import ReplayDivergedError, replay_history
from logist.replay.matching import canonical_request, digest, first_difference, recorded_body, request_digest
from logist.replay.server import ReplayLLMServer
from logist.replay.scripted import NO_RETRY, Reply, ScriptedLLMServer
from logist.replay.scripted import answer

from conftest import REPO_ROOT, same_conversation, write_config

WORDCOUNT = REPO_ROOT / "fixtures" / "wordcount"


_ENTRIES: dict[int, dict] = {}


def recorded_calls(history):
    """The recorded calls; each remembers its history, which a request that
    continues an earlier one is rebuilt from."""
    by_number = {e.sequence: e.dump() for e in history.interactions}
    calls = [e for e in history.interactions if e.kind == "llm_call"]
    for call in calls:
        _ENTRIES[id(call)] = by_number
    return calls


def body_of(entry) -> dict:
    """The request body the recorded call sent (model, messages, parameters)."""
    return {k: v for k, v in recorded_body(entry, _ENTRIES.get(id(entry))).items() if v is not None}


def client(server, retries: int = 2) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=retries)


# 1. Matching by the request itself ---------------------------------------------------------------


def test_each_request_gets_the_answer_recorded_for_it_in_any_order(replay_llm):
    server = replay_llm(WORDCOUNT)
    calls = recorded_calls(server.history)
    assert [c.role for c in calls] == ["Worker", "Supervisor", "Worker", "Supervisor"]
    assert server.summary() == "4 recorded calls (Worker: 2, Supervisor: 2)"
    llm = client(server)

    # The Supervisor's first call is answered before any Worker call: the
    # request alone says which recorded call it is.
    supervisor = llm.chat.completions.create(**body_of(calls[1]))
    assert supervisor.choices[0].message.content == calls[1].response.raw_response
    assert (supervisor.usage.prompt_tokens, supervisor.usage.completion_tokens) == (
        calls[1].usage.prompt_tokens, calls[1].usage.completion_tokens,
    )
    worker = llm.chat.completions.create(**body_of(calls[0]))
    assert worker.choices[0].message.content == calls[0].response.raw_response
    assert [c.entry.sequence for c in server.served] == [3, 2]
    assert server.remaining == 2

    # The same request again has no unserved call: refused, naming the
    # nearest unserved one (the Worker's second call) and the served one.
    with pytest.raises(openai.BadRequestError) as refused:
        llm.chat.completions.create(**body_of(calls[0]))
    text = str(refused.value)
    assert "replay mismatch at step 4 (Worker call 2 of 2): message 1 (user) differs" in text
    assert "(the request is that of step 2 (Worker call 1 of 2), already answered)" in text
    assert len(server.requests) == 3, "a refusal is not retried"
    assert server.remaining == 2


def test_identical_requests_get_their_recorded_answers_in_recorded_order(jobs, llm, replay_llm):
    """A rewound step asks again exactly what it asked: the earliest unserved call answers first."""
    from logist.engine.rewind import rewind

    job = create_job(jobs, "again", "Say hello")
    llm.add(answer("MESSAGE", message="first try"))
    step_once(job, endpoints=llm.endpoints)
    rewind(job, baseline=True)
    llm.add(answer("MESSAGE", message="second try"))
    step_once(job, endpoints=llm.endpoints)
    assert llm.requests[0] == llm.requests[1]

    server = replay_llm(JobFiles(job.dir).load_history())
    # Asked plainly (the step streamed): a recording answers either way.
    plain = {key: value for key, value in llm.requests[0].items() if key not in ("stream", "stream_options")}
    contents = [client(server).chat.completions.create(**plain).choices[0].message.content for _ in range(2)]
    assert contents == [answer("MESSAGE", message="first try"), answer("MESSAGE", message="second try")]
    with pytest.raises(openai.BadRequestError, match="the recording has no call left: all 2 were answered"):
        client(server).chat.completions.create(**plain)


@pytest.mark.parametrize("given", ["folder", "history", "file copied alone"])
def test_a_server_told_to_keep_no_request_serves_and_counts_them_all(jobs, llm, given, tmp_path):
    """``logist replay-server`` keeps no request (each is the whole turn so far): it
    answers, numbers and lists every call all the same. Given the job's folder, it
    knows each request by its bytes (the recorded body rebuilt, its response_format
    read from the folder) and parses none; given the history alone, in memory or
    as a file copied without its folder's response_formats/, it parses each."""
    job = create_job(jobs, "kept", "Say hello")
    llm.add(answer("MESSAGE", message="one"), answer("MESSAGE", message="two"))
    step_once(job, endpoints=llm.endpoints)
    step_once(job, endpoints=llm.endpoints)
    assert all(request["response_format"] for request in llm.requests)  # what the folder holds is needed
    history = JobFiles(job.dir).load_history()
    replayed = create_job(jobs, "replayed", "Say hello")
    alone = tmp_path / "alone" / "jobHistory.json"
    alone.parent.mkdir()
    shutil.copy(JobFiles(job.dir).history_path, alone)
    recording = {"folder": job.dir, "history": history, "file copied alone": alone}[given]
    with ReplayLLMServer(recording, keep_requests=False) as server:
        for _ in range(2):
            step_once(replayed, base_url=server.base_url)
    assert server.requests == [] and server.headers == [] and server.received == 2
    assert [row["sequence"] for row in server.ledger] == [2, 3] and server.mismatches == []
    assert server.known_requests == (2 if given == "folder" else 0)
    assert not (alone.parent / "response_formats").exists()
    assert [e.response.raw_response for e in JobFiles(replayed.dir).load_history().interactions if e.response] == \
        [answer("MESSAGE", message="one"), answer("MESSAGE", message="two")]


def test_canonical_request_keeps_model_messages_and_parameters():
    body = {
        "model": "m", "temperature": 0.2, "response_format": {"type": "json_object"}, "stream": False,
        "messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "ran in /w/ws and /w/ws/sub"}],
    }
    assert canonical_request(body, ("/w/ws",)) == {
        "model": "m", "temperature": 0.2, "max_tokens": None,
        # By its digest: a recording keeps it in response_formats/, and a history copied alone still matches.
        "response_format": hashlib.sha256(b'{"type":"json_object"}').hexdigest()[:32],
        "messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "ran in <workspace> and <workspace>/sub"}],
    }
    # Exact values only: a path that is not the workspace stays.
    assert canonical_request(body, ("/w/other",))["messages"][1]["content"] == "ran in /w/ws and /w/ws/sub"


def test_a_requests_digest_is_that_of_its_canonical_request_whatever_its_messages():
    """The server matches by request_digest, found without building the canonical request where it
    can: it must be the digest of the canonical request in every case, or a recording stops matching."""
    plain = [{"role": "system", "content": "S"}, {"role": "user", "content": "caf\u00e9 ran in /w/ws and /w/ws/sub"}]
    bodies = [
        {"model": "m", "temperature": 0.2, "response_format": {"type": "json_object"}, "messages": plain},
        {"model": "m", "messages": plain[:1], "stream": True, "max_tokens": 9},
        {"model": "m", "messages": plain + [{"role": "user", "content": "x", "name": "extra key"}]},
        {"model": "m", "messages": [{"role": "user", "content": [{"type": "text", "text": "parts"}]}]},
        {"model": "m", "messages": [{"role": "assistant", "content": None, "tool_calls": []}]},
    ]
    for body in bodies:
        for workspaces in ((), ("/w/ws",), ("/w/other",), ("", "/w/ws/sub", "/w/ws")):
            assert request_digest(body, workspaces) == digest(canonical_request(body, workspaces)), (body, workspaces)
    # The workspace path is replaced before the digest: the same request from another job's workspace matches.
    moved = {"model": "m", "messages": [plain[0], {"role": "user", "content": "caf\u00e9 ran in /v/ws and /v/ws/sub"}]}
    assert request_digest(moved, ("/v/ws",)) == request_digest({"model": "m", "messages": plain}, ("/w/ws",))
    assert request_digest(moved, ()) != request_digest({"model": "m", "messages": plain}, ())


def test_first_difference_names_the_place_and_shows_both_texts():
    task = "## Objective\nCount the words in the text.\n\n[Step 1 of 100]"
    recorded = canonical_request(
        {"model": "m", "temperature": 0.2, "messages": [{"role": "system", "content": "S"}, {"role": "user", "content": task}]}
    )
    assert first_difference(recorded, dict(recorded)) is None
    assert first_difference(recorded, {**recorded, "model": "other"}) == 'the model is "other", the recording used "m"'
    changed = {**recorded, "messages": [recorded["messages"][0], {"role": "user", "content": task.replace("words", "lines")}]}
    assert first_difference(recorded, changed) == (
        'message 1 (user) differs at character 23: recorded ..."Count the words in the text.\\n\\n[Step 1 of"..., '
        'received ..."Count the lines in the text.\\n\\n[Step 1 of"...'
    )
    shorter = {**recorded, "messages": recorded["messages"][:1]}
    assert first_difference(recorded, shorter) == "the request has 1 messages, the recording 2"
    swapped = {**recorded, "messages": [recorded["messages"][0], {"role": "assistant", "content": task}]}
    assert first_difference(recorded, swapped) == 'message 1 has role "assistant", the recording "user"'
    assert first_difference(recorded, {**recorded, "temperature": 0.7}) == "temperature is 0.7, the recording used 0.2"


def test_the_workspace_path_stands_for_the_new_jobs_path(tmp_path, llm, replay_llm):
    """A command's output names the workspace; told where the replaying job
    lives, the replay elsewhere still matches."""
    spec = dict(allowed_commands=["pwd"])
    here = create_job(JobsDir(tmp_path / "here"), "where", "Say where you are", **spec)
    llm.add(answer("CMD", command="pwd"), answer("COMPLETED", "I am in the workspace."), answer("COMPLETED", "ok"))
    run_job(here, endpoints=llm.endpoints)
    recorded = JobFiles(here.dir).load_history()
    # The output is recorded once, by the entry that ran the command; the next request names it.
    cmd, then = recorded_calls(recorded)[:2]
    assert str(here.workspace) in cmd.command.output and then.request.added[-1].output_of == cmd.sequence

    there = create_job(JobsDir(tmp_path / "elsewhere" / "deeper"), "moved", "Say where you are", **spec)
    server = replay_llm(recorded)
    server.workspace = str(there.workspace)
    replay_history(there, recorded, base_url=server.base_url)
    assert server.mismatches == [] and server.remaining == 0
    assert there.manifest().status == Status.APPROVAL_REQUIRED
    assert str(there.workspace) in recorded_calls(JobFiles(there.dir).load_history())[0].command.output

    # Not told, the path is just a difference, shown where it is.
    unknown = create_job(JobsDir(tmp_path / "unknown"), "lost", "Say where you are", **spec)
    with pytest.raises(ReplayDivergedError, match=r"message 3 \(user\) differs at character \d+: recorded .*<workspace>"):
        replay_history(unknown, recorded, base_url=replay_llm(recorded).base_url)


def test_a_moved_job_keeps_working_and_its_recording_still_replays(tmp_path, llm, replay_llm):
    """The job's files name no absolute path; each command records where it
    ran (what its output may name), and a replay recognises each."""
    spec = dict(allowed_commands=["pwd"])
    job = create_job(JobsDir(tmp_path / "first"), "where", "Say where you are", **spec)
    created_in = str(job.workspace)
    llm.add(answer("CMD", command="pwd"))
    step_once(job, endpoints=llm.endpoints)
    shutil.move(str(tmp_path / "first"), str(tmp_path / "second"))
    job = JobsDir(tmp_path / "second").job("where")
    llm.add(answer("CMD", command="pwd"), answer("COMPLETED", "I was moved."), answer("COMPLETED", "ok"))
    run_job(job, endpoints=llm.endpoints)

    recorded = JobFiles(job.dir).load_history()
    before, after = recorded_calls(recorded)[:2]
    assert recorded.workspace_path is None and created_in != str(job.workspace)
    assert before.workspace_path == "workspace" and before.command.cwd == created_in and created_in in before.command.output
    assert after.workspace_path == "workspace" and after.command.cwd == str(job.workspace) in after.command.output

    there = create_job(JobsDir(tmp_path / "third"), "copy", "Say where you are", **spec)
    server = replay_llm(recorded)
    server.workspace = str(there.workspace)
    replay_history(there, recorded, base_url=server.base_url)
    assert server.mismatches == [] and server.remaining == 0


# 2. A step that diverges (acceptance 3) --------------------------------------------------------


def test_a_diverging_step_gets_the_strict_error_and_the_job_stays_consistent(jobs, replay_llm):
    server = replay_llm(WORDCOUNT)
    # Under another job id than the recording's: prompts do not name the job.
    job = create_from_fixture(jobs, WORDCOUNT, "wc")
    history = load_fixture(WORDCOUNT).history()
    first = step_once(job, base_url=server.base_url, model="gpt-4o-mini")
    assert (first.role, first.status) == ("Worker", Status.REVIEWING)

    # A person changes the Worker's file before the review: the Supervisor
    # is shown the file, so its request is not the recorded one.
    (job.workspace / "wordcount.py").write_text("def count_words(text):\n    return {}\n")
    refused = step_once(job, base_url=server.base_url, model="gpt-4o-mini")

    assert (refused.role, refused.action, refused.status) == ("Supervisor", "ERROR", Status.INTERVENTION_REQUIRED)
    reason = job.manifest().reason
    assert reason == refused.error
    assert "HTTP 400: replay mismatch at step 3 (Supervisor call 1 of 2): message 1 (user) differs" in reason
    assert 'received ..."nt.py\\n```\\ndef count_words(text):\\n    ret"...' in reason, "the excerpt shows what was received"
    assert "failed after 1 attempt" in reason, "the refusal is not retried"
    assert server.base_url not in reason, "the endpoint is not in what the model may be shown"
    assert len(server.requests) == 2

    # Consistent: the failed call is on record, the person's edit is kept and
    # nothing was committed for the refused step; the recording is untouched.
    entries = JobFiles(job.dir).load_history().interactions
    assert (entries[-1].kind, entries[-1].response.status, entries[-1].response.error) == ("llm_call", "FAILED", reason)
    assert entries[-1].state.status == "INTERVENTION_REQUIRED"
    assert job.manifest().workspace_commit == entries[-2].workspace_commit
    assert (job.workspace / "wordcount.py").read_text() == "def count_words(text):\n    return {}\n"
    assert server.remaining == 3 and server.mismatches == [reason.split("HTTP 400: ", 1)[1]]

    # A live replay of a job that asks for something else stops at once,
    # naming the history entry and the difference.
    # (It names the recording's file, so that the protocol's example, which writes it, is the same.)
    other = create_job(jobs, "wc2", "Count the words of a text in wordcount.py")
    with pytest.raises(ReplayDivergedError) as diverged:
        replay_history(other, history, base_url=replay_llm(WORDCOUNT).base_url)
    assert str(diverged.value).startswith(
        "the replay diverged at history entry 2: the recorded step went to REVIEWING, this one to INTERVENTION_REQUIRED: "
    )
    assert "replay mismatch at step 2 (Worker call 1 of 2): message 1 (user) differs" in str(diverged.value)
    assert other.manifest().status == Status.INTERVENTION_REQUIRED


def test_lenient_answers_the_nearest_call_and_logs_the_difference(jobs, replay_llm, caplog):
    server = replay_llm(WORDCOUNT, strict=False)
    job = create_job(jobs, "wc", "Count words differently in wordcount.py")  # the example writes the same file
    with caplog.at_level(logging.WARNING, logger="logist.replay.server"):
        result = step_once(job, base_url=server.base_url, model="gpt-4o-mini")
    assert (result.action, result.status) == ("COMPLETED", Status.REVIEWING)
    assert (job.workspace / "wordcount.py").is_file()
    assert len(server.mismatches) == 1
    assert server.mismatches[0].startswith("replay mismatch at step 2 (Worker call 1 of 2): message 1 (user)")
    assert any(server.mismatches[0] in r.getMessage() and "answered with the recorded answer anyway" in r.getMessage()
               for r in caplog.records)
    assert [c.entry.sequence for c in server.served] == [2] and server.remaining == 3


def test_a_request_after_the_recording_is_used_up_is_refused(replay_llm):
    server = replay_llm(WORDCOUNT)
    llm = client(server)
    for call in recorded_calls(server.history):
        llm.chat.completions.create(**body_of(call))
    assert server.remaining == 0
    with pytest.raises(openai.BadRequestError, match="the recording has no call left: all 4 were answered"):
        llm.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "more?"}])
    with pytest.raises(openai.BadRequestError, match="the request has no list of messages"):
        llm.chat.completions.create(model="gpt-4o-mini", messages="hello")


# 3. Recorded failures replay as the same failure ---------------------------------------------------


@pytest.mark.parametrize(
    "failure, config, stops",
    [
        (Reply(status=503, error_message="the model is overloaded"), {"max_retries": 1}, False),
        (Reply(status=400, error_message="the request is too large"), {"max_retries": 1}, True),
        (Reply(content=answer("MESSAGE", message="late"), delay=5), {"max_retries": 0, "request_timeout": 0.5}, False),
    ],
    ids=["503", "400", "timeout"],
)
@pytest.mark.wire  # failures replayed by the replay server
def test_a_recorded_failure_replays_as_the_same_failure(jobs, llm, replay_llm, failure, config, stops):
    write_config(jobs, **config)
    recorded_job = create_job(jobs, "rec", "Write hello.py")
    retries = [failure] * (config["max_retries"] + 1 if failure.status != 400 else 1)
    llm.add(*retries)
    failed = step_once(recorded_job, base_url=llm.base_url)
    if stops:  # a failure that stops the job: a person resubmits it
        assert failed.status == Status.INTERVENTION_REQUIRED
        user_action(recorded_job, "resubmit", "try again")
    else:  # a transient one keeps the turn: the next step goes on with it
        assert failed.status == Status.PENDING and failed.interrupted
    llm.add(answer("COMPLETED", "wrote it", file_changes=[{"path": "hello.py", "content": "print('Hello')\n"}]))
    step_once(recorded_job, base_url=llm.base_url)
    recorded = JobFiles(recorded_job.dir).load_history()
    if stops:
        # The resubmitted request shows the model why the job stopped, but not where it was served from.
        assert "LLM call failed after" in llm.requests[-1]["messages"][-1]["content"]
    else:
        assert same_conversation(llm.requests[-1], llm.requests[0]), "the same conversation, asked again"
    assert llm.base_url not in json.dumps(llm.requests[-1])

    replayed_job = create_job(jobs, "rep", "Write hello.py")
    server = replay_llm(recorded)
    replay_history(replayed_job, recorded, base_url=server.base_url)
    assert server.mismatches == [] and server.remaining == 0

    def errors(job):
        return [e.response.error for e in recorded_calls(JobFiles(job.dir).load_history()) if e.response.error]

    assert errors(replayed_job) == errors(recorded_job)
    assert len(errors(recorded_job)) == 1
    assert replayed_job.manifest().status == Status.REVIEWING
    assert (replayed_job.workspace / "hello.py").read_text() == "print('Hello')\n"


@pytest.mark.parametrize("kept", [True, False], ids=["parsed", "known"])
def test_a_retry_of_a_failed_request_gets_the_same_failure(jobs, llm, kept):
    """Known by its bytes or parsed, a request that failed gets the same failure
    when sent again; the call is served once."""
    write_config(jobs, max_retries=0)
    job = create_job(jobs, "rec", "Write hello.py")
    llm.add(Reply(status=503, error_message="the model is overloaded"))
    step_once(job, endpoints=llm.endpoints)
    with ReplayLLMServer(job.dir, keep_requests=kept) as server:
        for _ in range(3):
            with pytest.raises(openai.InternalServerError, match="the model is overloaded"):
                sent_as_the_job_sent(server, llm.requests[0])
        assert len(server.served) == 1 and server.mismatches == []
        assert server.known_requests == (0 if kept else 1)


def sent_as_the_job_sent(server, body: dict) -> str:
    """``body`` posted as a step sends it (``client.post``, the SDK's encoding), with no
    retries: the answer's text."""
    if not body.get("stream"):
        return client(server, retries=0).post("/chat/completions", body=body, cast_to=object)["choices"][0][
            "message"]["content"]
    chunks = client(server, retries=0).post("/chat/completions", body=body, cast_to=object, stream=True,
                                            stream_cls=openai.Stream[object])
    return "".join(chunk["choices"][0]["delta"].get("content") or "" for chunk in chunks if chunk["choices"])


def test_requests_known_by_their_bytes_are_answered_in_recorded_order_then_refused(jobs, llm):
    """Two recorded calls that sent the same bytes answer in recorded order,
    known by their bytes; the same bytes once more are parsed and refused as
    a strict replay refuses them, naming the calls already answered."""
    from logist.engine.rewind import rewind

    job = create_job(jobs, "again", "Say hello")
    for text in ("first try", "second try"):
        llm.add(answer("MESSAGE", message=text))
        step_once(job, endpoints=llm.endpoints)
        if text == "first try":
            rewind(job, baseline=True)
    assert llm.requests[0] == llm.requests[1]
    with ReplayLLMServer(job.dir, keep_requests=False) as server:
        assert [sent_as_the_job_sent(server, llm.requests[0]) for _ in range(2)] == \
            [answer("MESSAGE", message="first try"), answer("MESSAGE", message="second try")]
        assert server.known_requests == 2
        with pytest.raises(openai.BadRequestError, match="the recording has no call left: all 2 were answered"):
            sent_as_the_job_sent(server, llm.requests[0])
        assert server.known_requests == 2 and server.received == 3


def test_a_request_body_is_the_bytes_the_sdk_sends():
    """The replay server knows a request by the bytes its recorded body makes
    (:func:`logist.store.atomic.compact_json`), so they must be the bytes the
    openai SDK sends a body as (its ``openapi_dumps``, which ``client.post``
    encodes ``body`` with). Should the SDK move or change it, this fails, and
    the replay server would parse every request again."""
    from openai._utils._json import openapi_dumps

    from logist.store.atomic import compact_json

    body = {"model": "m", "messages": [{"role": "user", "content": "naïve — “quoted” \\ \"x\"\n\t😀"}],
            "temperature": 0.3, "max_tokens": 2048, "response_format": {"type": "json_object", "strict": True},
            "stream": True, "stream_options": {"include_usage": True}, "none": None, "list": [1, 2.5, -0.0, 1e100]}
    assert compact_json(body) == openapi_dumps(body)


# 4. The official client in another process (acceptance 4) ---------------------------------------------

CLIENT = textwrap.dedent(
    """
    import json, sys
    import openai

    base_url = sys.argv[1]
    body = json.loads(sys.stdin.read())
    client = openai.OpenAI(base_url=base_url, api_key="sk-test", max_retries=2)
    try:
        completion = client.chat.completions.create(**body)
        print(json.dumps({"completion": completion.model_dump(mode="json")}))
    except openai.APIStatusError as exc:
        print(json.dumps({"error": type(exc).__name__, "status": exc.status_code, "body": exc.body}))
    """
)


def client_in_a_process(base_url: str, body: dict) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", CLIENT, base_url], input=json.dumps(body),
        capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_official_client_in_another_process_sees_what_the_scripted_server_sends(replay_llm):
    server = replay_llm(WORDCOUNT)
    call = recorded_calls(server.history)[0]
    body = body_of(call)
    usage = {"prompt_tokens": call.usage.prompt_tokens, "completion_tokens": call.usage.completion_tokens}

    replayed = client_in_a_process(server.base_url, body)
    with ScriptedLLMServer([Reply(content=call.response.raw_response, usage=usage)]) as scripted:
        expected = client_in_a_process(scripted.base_url, body)
    assert replayed == expected
    assert replayed["completion"]["choices"][0]["message"]["content"] == call.response.raw_response
    assert replayed["completion"]["usage"]["prompt_tokens"] == call.usage.prompt_tokens

    # A refusal reaches the client as the scripted server's HTTP error does, once.
    other = {**body, "messages": [body["messages"][0], {"role": "user", "content": "something else"}]}
    refused = client_in_a_process(server.base_url, other)
    assert refused["error"] == "BadRequestError" and refused["status"] == 400
    text = refused["body"]["message"]
    assert text.startswith("replay mismatch at step 4 (Worker call 2 of 2): message 1 (user) differs")
    with ScriptedLLMServer([Reply(status=400, error_message=text, error_type="replay_mismatch", headers=NO_RETRY)]) as scripted:
        assert client_in_a_process(scripted.base_url, other) == refused
    assert len(server.requests) == 2, "the client did not retry the refusal"


# 5. ``logist replay-server`` as a child process --------------------------------------------------------


def test_the_cli_replay_server_serves_a_recording_until_stopped(tmp_path):
    history = WORDCOUNT / "jobHistory.json"
    child = subprocess.Popen(
        [sys.executable, "-m", "logist", "replay-server", str(history)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        first_line = []
        reader = threading.Thread(target=lambda: first_line.append(child.stdout.readline()), daemon=True)
        reader.start()
        reader.join(60)
        base_url = first_line[0].strip() if first_line else ""
        assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1"), base_url

        call = recorded_calls(load_fixture(WORDCOUNT).history())[0]
        llm = openai.OpenAI(base_url=base_url, api_key="sk-test", max_retries=0)
        completion = llm.chat.completions.create(**body_of(call))
        assert completion.choices[0].message.content == call.response.raw_response
        with pytest.raises(openai.BadRequestError, match="replay mismatch at step 4"):
            llm.chat.completions.create(**body_of(call))
    finally:
        child.send_signal(signal.SIGTERM)
        out, err = child.communicate(timeout=60)
    assert child.returncode == 0, err
    assert "Traceback" not in err
    assert "Replaying 4 recorded calls (Worker: 2, Supervisor: 2)" in err and "(strict)" in err
    assert "step 2 (Worker call 1 of 2): answered as recorded (SUCCESS)" in err
    assert "replay mismatch at step 4 (Worker call 2 of 2)" in err
    assert "Stopped: answered 1 of 4 recorded calls; 1 request(s) differed from the recording." in err
    assert out == "", "only the URL goes to stdout"


def test_the_cli_replay_server_refuses_what_it_cannot_serve():
    missing = subprocess.run(
        [sys.executable, "-m", "logist", "replay-server", "no-such-history.json"], capture_output=True, text=True, timeout=60,
    )
    assert missing.returncode == 1
    assert missing.stderr.strip() == "Error: no history file no-such-history.json"


def test_replay_server_help_imports_neither_openai_nor_git():
    probe = textwrap.dedent(
        """
        import sys
        from logist.cli import main
        try:
            main(["replay-server", "--help"])
        except SystemExit:
            pass
        print("openai" in sys.modules, "git" in sys.modules, "pytest" in sys.modules, file=sys.stderr)
        """
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert "Usage: logist replay-server [OPTIONS] HISTORY" in done.stdout
    assert "--strict / --lenient" in done.stdout
    assert done.stderr.strip().splitlines()[-1] == "False False False"


# 6. The pytest fixtures offered to people who write roles -------------------------------------------------


def test_scripted_llm_fixture_is_a_running_server(scripted_llm, jobs):
    job = create_job(jobs, "hello", "Write hello.py")
    scripted_llm.add(answer("COMPLETED", "done"), answer("COMPLETED", "fine"))
    results = run_job(job, base_url=scripted_llm.base_url)
    assert [r.status for r in results] == [Status.REVIEWING, Status.APPROVAL_REQUIRED]
    assert len(scripted_llm.requests) == 2


def test_scripted_model_fixture_answers_in_memory(scripted_model, jobs):
    job = create_job(jobs, "hello", "Write hello.py")
    scripted_model.add(answer("COMPLETED", "done"), answer("COMPLETED", "fine"))
    results = run_job(job, endpoints=scripted_model.endpoints)
    assert [r.status for r in results] == [Status.REVIEWING, Status.APPROVAL_REQUIRED]
    assert len(scripted_model.requests) == 2 and scripted_model.remaining == 0


def test_replay_llm_fixture_takes_a_bundled_fixture_name(replay_llm, jobs):
    server = replay_llm("wordcount")
    assert server.history.job_id == "wordcount"
    assert Path(server.base_url).name == "v1"
    job = create_from_fixture(jobs, "wordcount")
    results = run_job(job, base_url=server.base_url, model="gpt-4o-mini")
    assert results[-1].status == Status.APPROVAL_REQUIRED and server.remaining == 0
