"""History format 3 (logist.store.forms): what an entry leaves out is put
back exactly; a format 2 history reads as it is and is upgraded, never
appended to in the older form. Real jobs, a real HTTP server, real git."""

from __future__ import annotations

import json

from logist.engine.create import create_job
from logist.engine.step import step_once
from logist.store.history import load_history
from logist.replay.scripted import answer
from logist.store.forms import to_file
from logist.store.history import (TAIL, file_format, history_path, iter_entry_data, iter_written, layout)
from logist.store.seek import entries_since, last_entry, read_entries

from conftest import logist_cli, write_config


def _ok(done):
    assert done.returncode == 0, done.stderr
    return done


def shown(job_id: str, number: int) -> dict:
    return json.loads(_ok(logist_cli("job", "history", job_id, "--entry", str(number), "--json")).stdout)


def _turn(jobs, llm, name: str, rounds: int = 6):
    """A Worker turn of commands and messages (commands run for real)."""
    job = create_job(jobs, name, "Look at the files and report", max_steps=40, command_policy="allow",
                     allowed_commands=["ls *", "pwd", "echo *"])
    for i in range(rounds):
        if i % 3 == 0:
            llm.add(answer("CMD", command="ls -la ."))
        elif i % 3 == 1:
            llm.add(answer("CMD", command="pwd"))
        else:
            llm.add(answer("MESSAGE", message=f"round {i}"))
        result = step_once(job, base_url=llm.base_url)
        assert result.error is None, result.error
    return job


def _write(path, data: bytes) -> None:
    """Replace the file, as every rewrite does (readers cache what they parsed of a file that only grows)."""
    path.with_name("new").write_bytes(data)
    path.with_name("new").replace(path)


def _as_format_2(job) -> bytes:
    """The job's history as format 2 wrote it: every entry as in memory."""
    entries = list(iter_entry_data(job.dir))
    head = ('{\n  "$schema": "job-history.v2.schema.json",\n  "format": 2,\n'
            f'  "job_id": {json.dumps(job.id)},\n  "interactions": [').encode()
    return head + b",".join(layout(e) for e in entries) + TAIL


def test_a_continuing_call_names_the_entry_holding_its_metadata_and_every_body_is_rebuilt(jobs, llm):
    job = _turn(jobs, llm, "named")
    raw = {e["sequence"]: e for e in iter_written(job.dir)}
    calls = [n for n, e in raw.items() if "request" in e]
    first, later = calls[0], calls[1:]
    assert isinstance(raw[first]["request"]["metadata"], dict), "a prompt in full writes its metadata out"
    assert all(raw[n]["request"]["metadata"] == first for n in later), "the rest of the turn names it"
    turn = [raw[n]["state"]["turn"] for n in later]
    assert all("last_call" not in t for t in turn), "a round's last_call is its own number"
    commands = [n for n in later if "command" in raw[n]]
    assert commands and all("pending" not in raw[n]["state"]["turn"] for n in commands)
    assert all("pending_is_command_output" not in e for e in raw.values())
    # Only the command whose output names the workspace records where it ran.
    cwds = {raw[n]["command"]["command"]: raw[n]["command"].get("cwd") for n in commands}
    assert cwds["pwd"] == str(job.workspace.absolute()) and cwds["ls -la ."] is None

    for index, number in enumerate(calls):
        entry = shown(job.id, number)
        assert entry["request_body"] == llm.requests[index], f"entry {number}"
        assert entry["request"]["metadata"]["model"] == llm.requests[index]["model"]
    read = {e["sequence"]: e for e in iter_entry_data(job.dir)}
    assert read[calls[-1]]["state"]["turn"]["last_call"] == calls[-1]
    assert read[commands[-1]]["pending_is_command_output"] is True
    # Every reader puts back the same.
    assert [e.dump() for e in load_history(job.dir).interactions] == list(read.values())
    assert last_entry(job.dir).dump() == read[max(read)]
    assert entries_since(job.dir, calls[2]) == {n: e for n, e in read.items() if n >= calls[2]}
    assert read_entries(job.dir, {calls[-1], calls[1]}) == {n: read[n] for n in (calls[-1], calls[1])}


def test_a_model_changed_mid_turn_breaks_the_inheritance_there(jobs, llm):
    job = _turn(jobs, llm, "changed", rounds=3)
    write_config(jobs, models={"Worker": "gpt-4o"})  # the role's model edited between two steps
    for i in range(3):
        llm.add(answer("MESSAGE", message=f"later {i}"))
        assert step_once(job, base_url=llm.base_url).error is None
    raw = [e for e in iter_written(job.dir) if "request" in e]
    models = [r["model"] for r in llm.requests]
    assert models == ["gpt-4o-mini"] * 3 + ["gpt-4o"] * 3, models
    changed = raw[3]
    assert "continues" in changed["request"], "the same turn goes on"
    assert changed["request"]["metadata"]["model"] == "gpt-4o", "written out where it changed"
    assert [e["request"]["metadata"] for e in raw[4:]] == [changed["sequence"]] * 2
    assert [e["request"]["metadata"] for e in raw[1:3]] == [raw[0]["sequence"]] * 2
    for index, entry in enumerate(raw):
        assert shown(job.id, entry["sequence"])["request_body"] == llm.requests[index]


def test_a_format_2_history_reads_as_it_is_and_is_upgraded_losslessly(jobs, llm):
    job = _turn(jobs, llm, "older")
    before = list(iter_entry_data(job.dir))
    bodies = {e["sequence"]: shown(job.id, e["sequence"])["request_body"] for e in before if "request" in e}
    path = history_path(job.dir)
    _write(path, _as_format_2(job))
    older = path.read_bytes()
    json.loads(older)
    assert file_format(job.dir) == 2

    # Read as it is: nothing rewritten.
    assert list(iter_entry_data(job.dir)) == before
    assert [e.dump() for e in load_history(job.dir).interactions] == before
    assert last_entry(job.dir).dump() == before[-1]
    assert entries_since(job.dir, 3) == {e["sequence"]: e for e in before if e["sequence"] >= 3}
    assert read_entries(job.dir, {4}) == {4: before[3]}
    assert {n: shown(job.id, n)["request_body"] for n in bodies} == bodies
    _ok(logist_cli("job", "transcript", job.id))
    assert path.read_bytes() == older

    done = json.loads(_ok(logist_cli("job", "upgrade", job.id, "--json")).stdout)
    assert done["upgraded"] and done["format"] == 3
    assert file_format(job.dir) == 3 and (job.dir / "jobHistory.json.v2").read_bytes() == older
    assert len(path.read_bytes()) < len(older)
    assert list(iter_entry_data(job.dir)) == before
    assert {n: shown(job.id, n)["request_body"] for n in bodies} == bodies
    written = list(iter_written(job.dir))
    assert [w for w, e in zip(written, before) if "request" not in e] == [to_file(e) for e in before if "request" not in e]
    assert any(isinstance(e.get("request", {}).get("metadata"), int) for e in written)


def test_a_step_on_a_format_2_history_upgrades_it_first(jobs, llm):
    job = _turn(jobs, llm, "appended", rounds=3)
    before = list(iter_entry_data(job.dir))
    path = history_path(job.dir)
    _write(path, _as_format_2(job))
    older = path.read_bytes()
    llm.add(answer("MESSAGE", message="one more"))
    assert step_once(job, base_url=llm.base_url).error is None
    assert file_format(job.dir) == 3, "one format per file"
    assert (job.dir / "jobHistory.json.v2").read_bytes() == older
    after = list(iter_entry_data(job.dir))
    assert after[:-1] == before and len(after) == len(before) + 1
    assert shown(job.id, after[-1]["sequence"])["request_body"] == llm.requests[-1]
    assert json.loads(path.read_bytes())["format"] == 3
