"""Going back and taking work out: restep, rerun, diff, export."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import click

from ..app import Application, pass_app
from ..common import entry_option, job_argument, json_option, wait_option


@click.command()
@job_argument
@entry_option("Return to the end of history entry N, as 'job history' numbers them (default: the entry before "
              "the last).", "--to")
@wait_option
@json_option
@pass_app
def restep(app: Application, job_id: Optional[str], entry: Optional[int], lock_timeout: float, as_json: bool) -> None:
    """Rewind workspace and state to an earlier history entry.

    \b
    Example:
      logist job restep hello              # undo the last entry
      logist job restep hello --entry 3    # back to the end of history entry 3
    """
    job = app.open(lock_timeout=lock_timeout).job(job_id)
    manifest = job.restep(entry)
    app.job_changed(as_json, job.id, manifest, f"Job '{job.id}' rewound: {manifest.status}, {manifest.turn.role}'s turn, "
                    f"workspace at {(manifest.workspace_commit or '')[:12]}.")


@click.command()
@job_argument
@wait_option
@json_option
@pass_app
def rerun(app: Application, job_id: Optional[str], lock_timeout: float, as_json: bool) -> None:
    """Rewind the job to its baseline (right after create).

    \b
    Example:
      logist job rerun hello
    """
    job = app.open(lock_timeout=lock_timeout).job(job_id)
    manifest = job.rerun()
    app.job_changed(as_json, job.id, manifest, f"Job '{job.id}' is back at its baseline: {manifest.status}.")


@click.command()
@job_argument
@entry_option("Only the change of history entry N, as 'job history' numbers them.", "--step")
@click.option("--stat", is_flag=True, help="Only the list of files changed.")
@json_option
@pass_app
def diff(app: Application, job_id: Optional[str], entry: Optional[int], stat: bool, as_json: bool) -> None:
    """Show what one history entry, or the whole job, changed.

    \b
    Example:
      logist job diff hello --entry 2
    """
    job = app.job(job_id)
    patch = job.diff(entry, stat=stat)
    app.display(as_json, {"job_id": job.id, "entry": entry, "step": entry, "diff": patch},
                lambda: app.echo(patch, nl=False))


@click.command()
@job_argument
@click.option("--branch", help="Create this branch in the source repository (--from-repo jobs).")
@click.option("--patch", "patch", type=click.Path(dir_okay=False),
              help="Write the job's commits, combined, to this patch file (git apply FILE or git am FILE).")
@click.option("--force", is_flag=True, help="With --branch: replace an existing branch of that name.")
@json_option
@pass_app
def export(app: Application, job_id: Optional[str], branch: Optional[str], patch: Optional[str], force: bool,
           as_json: bool) -> None:
    """Export the work as a branch or a patch file.

    A branch goes into the source repository of a --from-repo job; that
    repository's checked-out branch, index and working tree are not touched.
    A patch holds the job's commits combined into one, to apply where the
    job started (git apply FILE, or git am FILE to commit it). A job not yet
    approved is exported with a warning.

    \b
    Example:
      logist job export hello --branch feature/hello
      logist job export hello --patch hello.patch && git apply hello.patch
    """
    if (branch is None) == (patch is None):
        raise click.UsageError("give exactly one of --branch NAME or --patch FILE")
    job = app.job(job_id)
    if branch:
        sha, replaced = job.export_branch(branch, force=force)
        _warn_unapproved(app, job)
        source = job.manifest().source.repo
        app.display(as_json, {"job_id": job.id, "branch": branch, "commit": sha, "replaced": replaced, "repository": source},
                    lambda: app.info(f"{'Moved' if replaced else 'Created'} branch '{branch}' "
                                     f"{'to' if replaced else 'at'} {sha[:12]} in {source}."))
    else:
        count = job.export_patch(Path(patch))
        _warn_unapproved(app, job)
        app.display(as_json, {"job_id": job.id, "patch": patch, "commits": count},
                    lambda: app.info(f"Wrote the job's {count} commit{'s' if count != 1 else ''}, combined into one "
                                     f"patch, to {patch} (git apply {patch}, or git am {patch}, where the job started)."))


def _warn_unapproved(app: Application, job) -> None:
    """One line on stderr when the work exported is not approved (the job is not SUCCESS)."""
    status = str(job.status)
    if status != "SUCCESS":
        app.info(f"Warning: job '{job.id}' is {status}, not approved: its work was exported as it stands "
                 f"(logist job approve {job.id} first to export approved work).")
