"""The model: what the engine asks of one (:mod:`.base`: a request in, an
answer out), the client that asks an OpenAI-compatible endpoint
(:mod:`.client`), and the reader of what a model sends back (:mod:`.completions`).

Internal: may change in any release; use :mod:`logist.api` (``logist.open``, and
what its ``Jobs`` and ``Job`` return) and the names in ``logist.__all__``.
"""
