"""Secrets kept where they belong: held apart from ``os.environ``
(:mod:`.environment`), out of reach of other processes (:mod:`.process`),
and out of every file, request and terminal (:mod:`.redact`).
"""
