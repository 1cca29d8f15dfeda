"""A part of a job's timeline read from its place in the history (logist serve's pages and live updates).

The rows must be the report's, byte for byte, though only the entries shown
(and what their rows need of the ones before) are read. What is not read is
shown by making it unreadable: the early part of a real history is
overwritten with garbage of the same length, and the late page (and a live
update) still comes out right.
"""

from __future__ import annotations

import re

from logist.store.session import JobFiles
from logist.store.entries import HistoryEntry
from logist.store.history import append_entry, write_canonical
from logist.views.prompt_tracker import OUTPUT_WINDOW
from logist.views.report import timeline
from logist.views.window import CONTEXT_OPEN, Follower, read_window

from conftest import long_job

ROW_ID = re.compile(r'<details class="step[^"]*" id="step-(\d+)"')
DIFF = re.compile(r'<section class="diff">.*?</section>', re.S)


def report_rows(job) -> dict[int, str]:
    _scan, rows = timeline(job)
    return dict(rows)


def page(job, first: int, until: int | None = None) -> tuple[dict[int, str], dict[int, str], object]:
    """The rows a window shows and its hidden rows, each by entry number, and the window."""
    window = read_window(job, first, until)
    try:
        shown = {int(ROW_ID.match(row).group(1)): row for row in window.rows()}
        hidden_part = list(window.continued_rows())
    finally:
        window.close()
    hidden = {int(ROW_ID.match(row).group(1)): row for row in hidden_part[1:-1]}
    assert not hidden_part or hidden_part[0] == CONTEXT_OPEN
    return shown, hidden, window


def chain_before(entries: dict[int, HistoryEntry], shown: list[int], first: int) -> set[int]:
    """The entries before ``first`` the shown entries' conversations continue, back to the prompt sent in full."""
    found, todo = set(), [entries[s].request.continues for s in shown if entries[s].request is not None]
    while todo:
        at = todo.pop()
        if at is None or at in found or at >= first:
            continue
        found.add(at)
        todo.append(entries[at].request.continues)
    return found


def garble(job, first: int, stop: int) -> None:
    """Overwrite the bytes of entries ``first`` to ``stop - 1`` (every byte: their starts too) with garbage, in place."""
    with JobFiles(job.dir).offset_reader() as reader:
        begin, end = reader.locate(first), reader.locate(stop)
    junk = (b'{"garbage": [1, 2 \x00 \xff' * ((end - begin) // 10 + 1))[: end - begin]
    with open(JobFiles(job.dir).history_path, "r+b") as handle:
        handle.seek(begin)
        handle.write(junk)


def test_every_page_shows_the_reports_rows_and_the_turns_it_continues(jobs, llm):
    job = long_job(jobs, llm, rounds=9)
    entries = {e.sequence: e for e in JobFiles(job.dir).load_history().interactions}
    last = max(entries)
    assert last == 1 + 4 * 9 + 3
    report = report_rows(job)
    continued_pages = 0
    for size in (1, 3, 7):
        for first in range(1, last + 1):
            shown, hidden, window = page(job, first, first + size - 1)
            expected = list(range(first, min(last, first + size - 1) + 1))
            assert list(shown) == expected and (window.shown, window.last) == (expected[-1], last)
            assert shown == {s: report[s] for s in expected}, f"page from #{first}: the report's rows, byte for byte"
            # The earlier calls each shown prompt continues, back to its turn's first, are in the page
            # (hidden) for "Show the full prompt": the report's rows, without their diffs.
            assert set(hidden) == chain_before(entries, expected, first), first
            assert hidden == {s: DIFF.sub("", report[s]) for s in hidden}
            continued_pages += bool(hidden)
            # The states the page says it passed through are its own entries'.
            assert window.trail.visits[0].sequence == first
    assert continued_pages > last, "most pages start inside a turn"


def test_a_late_page_reads_nothing_before_what_its_rows_need(jobs, llm):
    job = long_job(jobs, llm, rounds=12)
    entries = {e.sequence: e for e in JobFiles(job.dir).load_history().interactions}
    last = max(entries)
    report = report_rows(job)
    first = last - 2
    chain = chain_before(entries, [first, first + 1, last], first)
    needed = min(chain | {first}) - OUTPUT_WINDOW - 1
    assert needed > 4
    garble(job, 2, needed)
    shown, hidden, window = page(job, first)
    assert shown == {s: report[s] for s in (first, first + 1, last)}
    assert set(hidden) == chain and hidden == {s: DIFF.sub("", report[s]) for s in chain}


def test_a_live_update_reads_only_what_was_appended(jobs, llm):
    job = long_job(jobs, llm, rounds=12)
    whole = JobFiles(job.dir).load_history().interactions
    report = report_rows(job)
    last = whole[-1].sequence
    seen = last - 5
    # The history as it was when the page was read: its entries up to #seen.
    write_canonical(JobFiles(job.dir), job.id, [e.dump() for e in whole if e.sequence <= seen])
    follower = Follower(job, seen - 10, seen)
    try:
        assert follower.update() == []
        # Every entry the follower read is now garbage, and two steps are recorded.
        garble(job, 2, seen + 1)
        for entry in whole[seen:seen + 2]:
            append_entry(JobFiles(job.dir), HistoryEntry.model_validate(entry.dump()))
        assert follower.update() == [(s, report[s]) for s in (seen + 1, seen + 2)]
        for entry in whole[seen + 2:]:
            append_entry(JobFiles(job.dir), HistoryEntry.model_validate(entry.dump()))
        assert follower.update() == [(s, report[s]) for s in range(seen + 3, last + 1)]
        assert follower.update() == []
        assert [v.sequence for v in follower.trail.visits][0] == seen - 10
    finally:
        follower.close()
