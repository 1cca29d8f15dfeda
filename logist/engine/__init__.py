"""Deciding and doing: a job's next request built (:mod:`.prepare`,
:mod:`.prompt`, :mod:`.context`), the call made and journalled (:mod:`.call`),
the answer applied to the workflow's table (:mod:`.transition`,
:mod:`.workflow`) and to the workspace, one step at a time (:mod:`.step`)
or until something happens (:mod:`.loop`, :mod:`.engines` for batches); a
person's decisions (:mod:`.decide`), going back (:mod:`.rewind`), budgets
(:mod:`.budget`), commands (:mod:`.commands`), compaction (:mod:`.compaction`)
and a job's creation (:mod:`.create`). :mod:`.session` opens a job under its
lock for all of it.

Internal: may change in any release; use :mod:`logist.api` (``logist.open``, and
what its ``Jobs`` and ``Job`` return) and the names in ``logist.__all__``.
"""
