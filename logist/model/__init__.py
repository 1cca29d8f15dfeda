"""The endpoint: the client that talks to the model (:mod:`.client`) and the
reader of what it sends back (:mod:`.completions`).

Internal: may change in any release; use :mod:`logist.api` (``logist.open``, and
what its ``Jobs`` and ``Job`` return) and the names in ``logist.__all__``.
"""
