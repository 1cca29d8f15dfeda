"""A part of a job's timeline, read from its place in the history: ``logist serve``'s job page and its live updates.

``report.html`` reads the whole history (:mod:`logist.views.report`); a
page of ``logist serve`` shows some of its entries (the last 500, say, of
200,000) and reads only those, and what their rows need of the entries
before them, found backward from the first one shown
(:class:`logist.store.seek.OffsetReader`: the entry is found by bisection,
so the cost does not grow with what comes before it):

* the command outputs a prompt may repeat (the tracker's window,
  :data:`logist.views.prompt_tracker.OUTPUT_WINDOW` entries back);
* the last workspace commit before the first entry shown (what its diff compares with);
* for "Show the full prompt", each earlier entry a shown entry's
  conversation continues, back to the call that sent its prompt in full
  (the turn's calls, following ``continues``): their rows are in the page
  too, hidden (:data:`CONTEXT_OPEN`), where the page's script finds them.

Each row is made by :func:`logist.views.report.timeline_rows`, the one
that makes ``report.html``'s, from the same entries and context: byte for
byte the row the report shows. What the page says before its timeline
(the states passed through) is of the entries it shows; the states before
them are on the earlier pages (:func:`logist.views.html.states_html`'s ``before``).

A live update (:class:`Follower`) holds where it stopped (the offset of
the next entry, the tracker, the last commit, the states) and reads only
what was appended since. Nothing is kept once the request that made it ends.
A history that is not a canonical current-format file (an older format,
edited by hand) is read whole, as the report reads it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, Optional

from ..store.entries import HistoryEntry
from ..store.session import JobFiles
from ..store.seek import OffsetReader
from .html import DIFF_LIMIT
from .prompt_tracker import OUTPUT_WINDOW, PromptTracker
from .report import STATES_SHOWN, diff_pair, timeline_rows
from .summary import StateTrail

#: Where the hidden rows of the earlier entries the shown prompts continue begin (and :data:`CONTEXT_CLOSE` end).
CONTEXT_OPEN = '<div class="continued" hidden>'
CONTEXT_CLOSE = "</div>"
#: Entries before a shown one its row may need (the tracker's window, and the one it prunes last).
CONTEXT = OUTPUT_WINDOW + 1


class _Entries:
    """The history's entries by position: an :class:`OffsetReader`'s offsets,
    or, for a file it cannot read in parts, the whole history in memory."""

    def __init__(self, job: JobFiles):
        self.job = job
        self.reader: Optional[OffsetReader] = job.offset_reader()
        self.whole: list[dict] = [] if self.reader is not None else list(job.entry_data())

    def close(self) -> None:
        if self.reader is not None:
            self.reader.close()

    @property
    def end(self) -> int:
        return self.reader.end if self.reader is not None else len(self.whole)

    def locate(self, sequence: int) -> int:
        """The position of entry ``sequence`` (or of the first after it; :attr:`end`: none)."""
        if self.reader is not None:
            return self.reader.locate(sequence)
        return next((i for i, e in enumerate(self.whole) if e["sequence"] >= sequence), len(self.whole))

    def forward(self, position: int) -> Iterator[tuple[int, dict]]:
        if self.reader is not None:
            for offset, text in self.reader.forward(position):
                yield offset, self.reader.parse(text)
        else:
            yield from enumerate(self.whole[position:], position)

    def backward(self, position: int) -> Iterator[tuple[int, dict]]:
        if self.reader is not None:
            for offset, text in self.reader.backward(position):
                yield offset, self.reader.parse(text)
        else:
            for i in range(position - 1, -1, -1):
                yield i, self.whole[i]

    def last(self) -> int:
        """The number of the last entry (0: none)."""
        return next((data["sequence"] for _, data in self.backward(self.end)), 0)

    def refresh(self) -> bool:
        """Take in what was appended; False when the file is no longer the one read (start again)."""
        return self.reader.refresh() if self.reader is not None else False


def _continues(data: dict) -> Optional[int]:
    request = data.get("request")
    return request.get("continues") if isinstance(request, dict) else None


@dataclass
class _Before:
    """What the rows from entry ``first`` on need of the entries before it."""

    tracker: PromptTracker
    #: The earlier entries the shown conversations continue, oldest first.
    continued: list[HistoryEntry] = field(default_factory=list)
    #: Those and the entries their rows need before them, oldest first.
    context: list[HistoryEntry] = field(default_factory=list)


def _before(entries: _Entries, position: int, first: int, continued: set[int]) -> _Before:
    """Walk back from ``position`` (entry ``first``'s) until the tracker's
    window and every entry of ``continued`` (and the ones they continue,
    each with the tracker's window before it) are found."""
    wanted, chain, near = set(continued), {}, {}
    low = first - CONTEXT
    for _, data in entries.backward(position):
        sequence = data["sequence"]
        if sequence in wanted:
            wanted.discard(sequence)
            chain[sequence] = data
            earlier = _continues(data)
            if earlier is not None:
                wanted.add(earlier)
            low = min(low, sequence - CONTEXT)
        if sequence >= low:
            near[sequence] = data
        if not wanted and sequence <= low:
            break
    tracker = PromptTracker()
    for sequence in sorted(s for s in near if s >= first - CONTEXT):
        tracker.remember(HistoryEntry.model_validate(near[sequence]))
    return _Before(tracker, [HistoryEntry.model_validate(chain[s]) for s in sorted(chain)],
                   [HistoryEntry.model_validate(near[s]) for s in sorted(near)])


def _continued_rows(job: JobFiles, before: _Before) -> Iterator[str]:
    """The hidden rows of the earlier entries the shown prompts continue (no diff: only their prompts and answers are read)."""
    if not before.continued:
        return
    shown = {e.sequence for e in before.continued}
    tracker = PromptTracker()
    yield CONTEXT_OPEN
    for entry in before.context:
        if entry.sequence in shown:
            yield from (row for _, row in timeline_rows(job, [entry], tracker, None, None))
        else:
            tracker.remember(entry)
    yield CONTEXT_CLOSE


@dataclass
class Window:
    """Entries ``first`` to ``shown`` of a history whose last entry is ``last``
    (the number of entries too: they are numbered from 1), the states they
    passed through, and their rows (read when iterated: :meth:`rows`)."""

    job: JobFiles
    first: int
    shown: int
    last: int
    trail: StateTrail
    entries: _Entries
    position: int
    #: The last workspace commit before entry ``first`` (what its diff compares with).
    previous: Optional[str]
    pairs: list[tuple[str, str]]
    continued: set[int]
    _before: Optional[_Before] = None

    def rows(self) -> Iterator[str]:
        """The rows of the entries shown."""
        self._before = _before(self.entries, self.position, self.first, self.continued)
        diffs = self.job.repo.iter_diffs(self.pairs, DIFF_LIMIT) if self.job.repo.exists() else None
        tracker = self._before.tracker
        yield from (row for _, row in timeline_rows(self.job, self._shown(), tracker, self.previous, diffs))

    def continued_rows(self) -> Iterator[str]:
        """After :meth:`rows`: the hidden rows of the earlier entries their prompts continue."""
        if self._before is not None:
            yield from _continued_rows(self.job, self._before)

    def close(self) -> None:
        self.entries.close()

    def _shown(self) -> Iterator[HistoryEntry]:
        for _, data in self.entries.forward(self.position):
            if data["sequence"] > self.shown:
                return
            yield HistoryEntry.model_validate(data)


def read_window(job: JobFiles, first: int, until: Optional[int] = None) -> Window:
    """The entries from ``first`` to ``until`` (default: the last), read
    once here for what the page says before them; :meth:`Window.rows` reads them again."""
    entries = _Entries(job)
    try:
        last = entries.last()
        shown = last if until is None else min(until, last)
        position = entries.locate(first)
        trail, pairs, continued = StateTrail(STATES_SHOWN), [], set()
        previous = before = _commit_before(entries, position)
        for _, data in entries.forward(position):
            if data["sequence"] > shown:
                break
            trail.add(data["sequence"], data["timestamp"], data["state_before"], data["state_after"])
            pair, previous = diff_pair(previous, data.get("workspace_commit"))
            if pair is not None:
                pairs.append(pair)
            earlier = _continues(data)
            if earlier is not None and earlier < first:
                continued.add(earlier)
        return Window(job, first, shown, last, trail, entries, position, before, pairs, continued)
    except BaseException:
        entries.close()
        raise


def _commit_before(entries: _Entries, position: int) -> Optional[str]:
    """The last workspace commit an entry before ``position`` recorded."""
    for _, data in entries.backward(position):
        if data.get("workspace_commit"):
            return data["workspace_commit"]
    return None


class Follower:
    """A job page's live updates: the rows of the entries after the last one
    sent, each update reading only what was appended since the one before,
    and the states passed through since the page's first entry. Held by
    the request (the event stream) that made it; :meth:`close` it."""

    def __init__(self, job: JobFiles, first: int, after: int):
        self.job = job
        self.first = first
        self.after = after
        self._start()

    def _start(self) -> None:
        """Read up to entry ``after``: the states from ``first``, and what the rows after it need."""
        self.entries = _Entries(self.job)
        self.trail = StateTrail(STATES_SHOWN)
        self.last = self.after
        start = min(self.first, self.after + 1)
        position = self.entries.locate(start)
        self.tracker = _before(self.entries, position, start, set()).tracker
        self.previous = _commit_before(self.entries, position)
        self.position = self.entries.end
        for offset, data in self.entries.forward(position):
            if data["sequence"] > self.after:
                self.position = offset
                break
            self._take(HistoryEntry.model_validate(data))
        self.last = self.after

    def _take(self, entry: HistoryEntry) -> None:
        if entry.sequence >= self.first:
            self.trail.add(entry.sequence, entry.timestamp, entry.state_before, entry.state_after)
        self.tracker.remember(entry)
        self.previous = diff_pair(self.previous, entry.workspace_commit)[1]
        self.last = entry.sequence

    def update(self) -> list[tuple[int, str]]:
        """The rows of the entries appended since the last update."""
        if not self.entries.refresh():
            self.close()
            self.after = self.last
            self._start()
        fresh: list[HistoryEntry] = []
        for offset, data in self.entries.forward(self.position):
            if data["sequence"] > self.last:
                fresh.append(HistoryEntry.model_validate(data))
        if not fresh:
            return []
        pairs, previous = [], self.previous
        for entry in fresh:
            pair, previous = diff_pair(previous, entry.workspace_commit)
            if pair is not None:
                pairs.append(pair)
        diffs = self.job.repo.iter_diffs(pairs, DIFF_LIMIT) if self.job.repo.exists() else None
        rows = list(timeline_rows(self.job, fresh, self.tracker, self.previous, diffs))
        for entry in fresh:
            if entry.sequence >= self.first:
                self.trail.add(entry.sequence, entry.timestamp, entry.state_before, entry.state_after)
            self.last = entry.sequence
        self.previous = previous
        self.position = self.entries.end
        return rows

    def close(self) -> None:
        self.entries.close()
