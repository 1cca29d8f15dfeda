"""The job's workspace: the git repository and its commits (:mod:`.repository`),
git run safely (:mod:`.git`), file changes (:mod:`.changes`), diffs
(:mod:`.diffs`) and the sandbox a model's command runs in (:mod:`.sandbox`).

Internal: may change in any release; use :mod:`logist.api` (``logist.open``, and
what its ``Jobs`` and ``Job`` return) and the names in ``logist.__all__``.
"""
