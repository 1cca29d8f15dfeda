"""``logist job fsck``: check every file of a job (:meth:`logist.api.Job.fsck`)."""

from typing import Optional

import click

from ..app import EXIT_ERROR, Application, pass_app
from ..common import job_argument, json_option, wait_option


@click.command()
@job_argument
@click.option("--rebuild-manifest", is_flag=True,
              help="Rebuild job_manifest.json from the history even though it reads (a hand edit left a field "
                   "invalid): the old file is kept beside it, and every edit made to it is dropped.")
@wait_option
@json_option
@pass_app
def fsck(app: Application, job_id: Optional[str], rebuild_manifest: bool, lock_timeout: float, as_json: bool) -> None:
    """Check every file of a job; repair what can be repaired.

    Does what any command that changes the job does first (repair what an
    interrupted command or a damaged file left, recorded in the history),
    then checks what that does not: entries numbered 1, 2, 3... in order (a
    duplicate or out-of-order entry pasted in by hand), each entry readable,
    the manifest at the last entry, the workspace's git repository, and
    every name in the job's folder. Says what it repaired and what a person
    must do. Exit 0: nothing left to do; 1: a problem a person must fix.

    A manifest with a field of a wrong type or value (a hand edit) is a
    problem to fix by hand; ``--rebuild-manifest`` rebuilds it from the
    history instead.

    \b
    Example:
      logist job fsck hello
      logist job fsck hello --rebuild-manifest
    """
    job = app.open(lock_timeout=lock_timeout).job(job_id)
    report = job.fsck(rebuild_manifest=rebuild_manifest)

    def text() -> None:
        if not report.findings:
            app.echo(f"Job '{job.id}': every file checked, nothing to repair.")
            return
        counts = {kind: sum(1 for f in report.findings if f.kind == kind) for kind in ("repaired", "problem", "note")}
        app.echo(f"Job '{job.id}': " + ", ".join(f"{n} {kind}{'' if n == 1 else 's'}" for kind, n in counts.items() if n)
                 + ".")
        for finding in report.findings:
            app.echo(f"  {finding.kind:<8}  {finding.file}: {finding.what}")

    app.display(as_json, report.as_dict(), text)
    app.exit(EXIT_ERROR if report.problems else 0)
