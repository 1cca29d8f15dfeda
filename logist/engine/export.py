"""Looking at and taking out a job's work: ``job diff`` and ``job export``.

Both read the workspace's commits only. ``export --branch`` writes one new
branch into the source repository with a push, which adds objects and a ref
and never touches that repository's checked-out branch, index or working
tree; ``export --patch`` writes the job's commits as one patch any
repository at the job's starting commit can apply (``git apply`` or ``git am``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from ..errors import LogistError, UsageError
from ..store.session import JobFiles
from ..store.atomic import atomic_write


def job_diff(job: JobFiles, sequence: Optional[int] = None, stat: bool = False) -> str:
    """The change of history entry ``sequence``, or of the whole job since its baseline."""
    manifest = job.manifest()
    if sequence is None:
        return job.repo.diff(manifest.baseline_commit, manifest.workspace_commit, stat=stat)
    entries = job.load_history().interactions
    previous = None
    for entry in entries:
        if entry.sequence == sequence:
            if previous is None:
                raise UsageError(f"entry {sequence} is the job's creation; it has no change to show")
            return job.repo.diff(previous.workspace_commit, entry.workspace_commit, stat=stat)
        previous = entry
    raise UsageError(f"job '{job.id}' has no history entry {sequence} (it has 1 to {entries[-1].sequence})")


def export_branch(job: JobFiles, branch: str, force: bool = False) -> tuple[str, bool]:
    """Create ``branch`` in the job's source repository at the job's commit.

    Returns the commit and whether an existing branch was replaced (--force).
    """
    manifest = job.manifest()
    if not manifest.source.repo:
        raise UsageError(
            f"job '{job.id}' was not created with --from-repo, so it has no source repository; use --patch FILE"
        )
    source = Path(manifest.source.repo)
    if not source.exists():
        raise LogistError(f"the source repository {source} no longer exists; use --patch FILE")
    replaced = job.repo.push_branch(source, branch, manifest.workspace_commit, force=force)
    return manifest.workspace_commit, replaced


def export_patch(job: JobFiles, path: Path) -> int:
    """Write the job's work since its baseline as one patch (its commits
    combined: ``git apply FILE`` or ``git am FILE`` gives the job's tree, and
    what a commit made and a later one took back, a rejected attempt's work
    say, is not in it); returns the number of the job's commits it holds."""
    manifest = job.manifest()
    base, head = manifest.baseline_commit, manifest.workspace_commit
    subjects = job.repo.subjects(base, head)
    objective = " ".join(manifest.objective.split())
    title = objective if len(objective) <= 72 else objective[:71] + "…"
    body = "\n".join([f"The work of Logist job '{job.id}' ({manifest.status}), its {len(subjects)} "
                      f"commit{'s' if len(subjects) != 1 else ''} combined:", ""] + [f"- {s}" for s in subjects])
    patch = job.repo.combined_patch(base, head, f"{title}\n\n{body}\n") if subjects else ""
    if not patch.strip():
        raise LogistError(f"job '{job.id}' has no commits since its baseline: nothing to export")
    atomic_write(Path(path), patch)
    return len(subjects)
