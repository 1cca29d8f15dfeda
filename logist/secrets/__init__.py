"""Secrets kept where they belong: held apart from ``os.environ``
(:mod:`.environment`), out of reach of other processes (:mod:`.process`),
and out of every file, request and terminal (:mod:`.redact`).

Internal: may change in any release; use :mod:`logist.api` (``logist.open``, and
what its ``Jobs`` and ``Job`` return) and the names in ``logist.__all__``.
"""
