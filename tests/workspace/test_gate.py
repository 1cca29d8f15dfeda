"""The gate of a command (:data:`logist.workspace.sandbox._GATE`): the
command's own shell waits until Logist has recorded its group, then reads
the command's text as ``sh -c`` would, under every sandbox."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from logist.workspace import sandbox


def run(tmp_path: Path, command: str, kind: str, recorded=None) -> sandbox.Contained:
    return sandbox.run_contained(command, tmp_path, sandbox.command_env(), 60,
                                 lambda handle: sandbox.read_head_and_tail(handle, 10_000), sandbox=kind,
                                 recorded=recorded)


@pytest.mark.parametrize("kind", ["auto", "none"])
def test_the_command_is_read_as_sh_c_reads_it(tmp_path, kind):
    ran = run(tmp_path, 'echo "[$0] [$#] [$*]"\nnot-a-command-here', kind)
    assert ran.exit_code == 127, ran
    assert ran.stdout == "[/bin/sh] [0] []\n", ran
    assert ran.stderr == "/bin/sh: 2: not-a-command-here: not found\n", ran


@pytest.mark.parametrize("kind", ["auto", "none"])
def test_a_syntax_error_on_the_first_line_runs_nothing_and_is_no_error(tmp_path, kind):
    """The shell ends at once, before the gate's line is written to it: what
    the launcher never read is no error of Logist's."""
    def ended(pgid, started):  # the gate's line is written once the launcher is over
        deadline = time.monotonic() + 30
        while sandbox.running(pgid) and time.monotonic() < deadline:
            time.sleep(0.005)

    ran = run(tmp_path, "touch ran; if", kind, recorded=ended)
    assert ran.exit_code == 2 and "Syntax error" in ran.stderr, ran
    assert not (tmp_path / "ran").exists()


def test_a_failed_record_runs_nothing(tmp_path):
    def refuse(pgid, started):
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        run(tmp_path, "touch ran", "auto", recorded=refuse)
    assert not (tmp_path / "ran").exists()
