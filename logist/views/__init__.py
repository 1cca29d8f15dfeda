"""What a person reads about a job, derived from its history and manifest.

Data flows one way: the store is read, the engine decides and records under
the job's lock, and only then, with the lock released, are the views
brought up to date (:func:`.refresh.refresh`). Nothing in :mod:`logist.store` or on
the crash-safety path imports this package, so a view that cannot be
written (a full disk, a directory where the file should be, a crash in the
middle of the write) can never fail, slow down or undo a step: it is caught
up by the next command, or rebuilt from the history.

* :mod:`.summary` a job's summary, computed once (rows, states, budgets);
  every view below takes its words from it.
* :mod:`.transcript` ``transcript.md``, kept up to date after every command
  (:mod:`.markdown` renders one entry, :mod:`.prompt_tracker` remembers what
  the reader has already seen).
* :mod:`.report` ``report.html`` and the jobs index, written on demand
  (:mod:`.html` holds the page's pieces, ``assets/`` its style and script).

Since :func:`.refresh.refresh` runs without the job's lock, the view files have a
lock of their own (``<job>/.views.lock``), taken without waiting, so two
processes never interleave their writes. When another process holds it, this
one skips: the holder checks the history again after each update and goes
on until the views end with the last entry, so it takes in what this one
recorded. (Only an entry recorded in the instant between the holder's last
check and its release waits for the next command, or ``job transcript``,
which catches up whatever is behind.)

The package imports none of its modules: a command that only reads (``logist
job status``) loads :mod:`.summary` and not the transcript's writer.

Internal: may change in any release; use :mod:`logist.api` (``logist.open``, and
what its ``Jobs`` and ``Job`` return) and the names in ``logist.__all__``.
"""
