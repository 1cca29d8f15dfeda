"""Everything on disk: the jobs directory (:mod:`.jobsdir`), a job's manifest
(:mod:`.manifest`) and history (:mod:`.entries`, :mod:`.history`, written
through :mod:`.journal` and :mod:`.atomic`), the upgrades of older files
(:mod:`.upgrade`, :mod:`.upgrading`), repair after an interruption
(:mod:`.recovery`, :mod:`.fsck`), and what a jobs directory configures:
config.json (:mod:`.config`), roles, skills and prompt templates
(:mod:`.roles`, :mod:`.skills`, :mod:`.prompts`).

Internal: may change in any release; use :mod:`logist.api` (``logist.open``, and
what its ``Jobs`` and ``Job`` return) and the names in ``logist.__all__``.
"""
