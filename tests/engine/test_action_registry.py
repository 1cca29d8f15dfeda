"""An action added through the registry alone (logist.protocol.actions):
the toy NOTE, a note recorded while the turn goes on, taken end to end by a
scripted model, then taken away again with nothing of it left behind."""

from __future__ import annotations

import json

import pytest

from logist import Status
from logist.engine import workflow
from logist.engine.create import create_job
from logist.engine.step import step_once
from logist.protocol import answer as protocol
from logist.protocol.actions import Action, Event, Row
from logist.protocol.answer import InvalidAnswer, parse_answer, registered
from logist.protocol.decoding import decoding_schema
from logist.protocol.prompt_text import protocol_text
from logist.replay.scripted import ScriptedModel, answer


class Note(Action):
    """A note for the record; the role goes on right away, told it was noted."""

    name = "NOTE"
    meaning = "record a note for the person reading the history; you continue right away."
    required = ("message",)
    tag, tag_field = "NOTE", "message"
    rows = (Row(states="STEPPABLE", who="ROLES", to="WORKING", turn="continue"),)

    def continue_with(self, step) -> str:
        return f"Noted: {step.answer.message}"


NOTE = json.dumps({"action": "NOTE", "message": "hello.py will print Hello"})
DONE = answer("COMPLETED", "Wrote hello.py.", ["hello.py"], file_changes=[{"path": "hello.py", "content": "print('Hello')\n"}])


@pytest.fixture
def note():
    before = (protocol.ACTIONS, protocol_text("json"), workflow.table(), json.dumps(protocol.response_schema()))
    with registered(Note()) as action:
        yield action
    # Nothing of it is left for the next test.
    assert (protocol.ACTIONS, protocol_text("json"), workflow.table(), json.dumps(protocol.response_schema())) == before
    with pytest.raises(InvalidAnswer):
        parse_answer(NOTE)


def test_a_registered_action_runs_end_to_end(jobs, note):
    job = create_job(jobs, "noted", "Write hello.py that prints a greeting")
    model = ScriptedModel([NOTE, DONE])  # the in-memory model: the action's path is the point, not the wire
    noted = step_once(job, endpoints=model.endpoints)
    assert (noted.action, noted.status, noted.turn) == ("NOTE", Status.RUNNING, "continue")
    done = step_once(job, endpoints=model.endpoints)
    assert (done.action, done.status) == ("COMPLETED", Status.REVIEWING)
    first, second = model.requests

    # What the model was sent: the prompt's line for NOTE, NOTE's object in
    # the decoding schema, and after the note, the action's own next message.
    system = first["messages"][0]["content"]
    assert '- "NOTE": record a note for the person reading the history; you continue right away.' in system
    schema = first["response_format"]["json_schema"]["schema"]["properties"]["response"]["anyOf"]
    assert ["NOTE"] in [variant["properties"]["action"]["enum"] for variant in schema]
    last = second["messages"][-1]
    assert last["role"] == "user" and last["content"].startswith("Noted: hello.py will print Hello\n")

    entries = job.load_history().interactions
    recorded = entries[1]
    assert recorded.response.actions == ["NOTE"]
    assert json.loads(recorded.response.raw_response) == json.loads(NOTE)
    assert (recorded.state_before, recorded.state_after) == ("PENDING", "RUNNING")
    assert entries[2].state_after == "REVIEWING"
    assert job.manifest().turn.role == "Supervisor"


def test_a_registered_action_speaks_both_protocols(note):
    assert parse_answer("[NOTE] remember the tests", "tags").message == "remember the tests"
    assert parse_answer(NOTE).action == "NOTE"
    assert workflow.find_rule(Status.RUNNING, Event("NOTE"), workflow.WORKER).turn == "continue"
    assert "NOTE" in [v["properties"]["action"]["enum"][0] for v in decoding_schema()["anyOf"]]


def test_an_action_whose_field_the_answer_lacks_is_refused():
    class Bad(Action):
        name, meaning, required = "BAD", "nothing.", ("no_such_field",)

    with pytest.raises(ValueError, match="no_such_field is not a field of an answer"):
        protocol.register_action(Bad())
    assert "BAD" not in protocol.ACTIONS
    with pytest.raises(ValueError, match="built-in"):
        protocol.unregister_action("CMD")
