"""Going back: ``job restep`` (to an earlier step) and ``job rerun`` (to the
baseline).

Every history entry keeps the job's state as it was after it, and the
workspace commit, so returning to the end of any entry is: put the workspace
back at that commit and the manifest's state back to that entry's. Nothing is erased: the
history keeps every entry and gains a ``rewind`` entry saying what was done,
and the abandoned commits stay reachable under ``refs/logist/rewound/<seq>``
in the workspace. Totals are not rewound: the calls were made and paid for.
A canceled job is not rewound: canceling is final.
"""

from __future__ import annotations

from typing import Optional

from ..errors import LogistError, TransitionError, UsageError
from ..store.entries import ANSWER_KINDS, HistoryEntry
from ..store.session import JobFiles
from ..store.manifest import JobManifest, Status
from .session import open_locked


def _target_entry(job: JobFiles, to: Optional[int], baseline: bool, last: int) -> HistoryEntry:
    if baseline:
        return next(job.entries())
    if to is not None:
        if not 1 <= to <= last:
            raise UsageError(f"job '{job.id}' has no history entry {to} (it has 1 to {last})")
        entry = job.entry(to)
        if entry.kind == "rewind":
            raise UsageError(f"entry {to} is itself a rewind; name the step you want to return to")
        return entry
    # The live steps: the answers whose effect the current state still
    # includes. A rewind cuts back to the entry it restored.
    chain: list[HistoryEntry] = []
    for entry in job.entries():
        if entry.kind == "rewind" and entry.rewound_to is not None:
            chain = [e for e in chain if e.sequence <= entry.rewound_to]
        elif entry.kind in ANSWER_KINDS and not entry.unknown_outcome:
            chain.append(entry)
    live = chain
    if len(live) < 2:
        raise LogistError(
            f"job '{job.id}' has no earlier step to return to"
            + (" (use 'logist job rerun' to go back to the baseline)" if live else "")
        )
    return live[-2]


def rewind(job: JobFiles, *, to: Optional[int] = None, baseline: bool = False, lock_timeout: float = 0,
           at: Optional[int] = None) -> JobManifest:
    """Return the job to the end of history entry ``to`` (default: the step
    before the last one; ``baseline``: right after create). ``at``: as for
    :func:`logist.engine.session.open_locked`."""
    with open_locked(job, lock_timeout, at) as session:
        manifest = session.manifest
        if manifest.status == Status.CANCELED:
            raise TransitionError(
                f"job '{job.id}' was canceled, and canceling is final: it cannot be "
                f"{'rerun' if baseline else 'restepped'} (create a new job to start again)"
            )
        target = _target_entry(job, to, baseline, manifest.last_sequence)
        restored = manifest.with_state(target.state)
        sequence = manifest.last_sequence + 1
        head = job.repo.head()
        if job.repo.is_dirty():
            head = job.repo.commit_all(f"logist: {job.id} changes made by hand before rewind {sequence}") or head
        job.repo.keep_ref(f"refs/logist/rewound/{sequence}", head)
        job.repo.check_resettable(target.workspace_commit or restored.workspace_commit)  # before the journal
        job.session.journal.begin_applying(sequence, head, None, doing="a rerun" if baseline else "a restep")
        job.repo.reset_to(target.workspace_commit or restored.workspace_commit)
        restored.totals = manifest.totals
        restored.workspace_commit = target.workspace_commit or restored.workspace_commit
        what = "the baseline" if baseline else f"the end of entry {target.sequence}"
        entry = job.session.new_entry(manifest, restored, kind="rewind", role=restored.turn.role,
            note=(
                f"rewound to {what} ({target.state_after}); the workspace was at {head}, "
                f"kept as refs/logist/rewound/{sequence}"
            ),
            workspace_commit=restored.workspace_commit,
            rewound_to=target.sequence,
        )
        job.session.record(entry, restored)
        return restored
