"""``logist serve``: a live local web view of the jobs, with the person's decisions a click away.

* :mod:`.pages` the HTML: the list of jobs and a job's page, made of the
  same pieces as ``index.html`` and ``report.html``
  (:mod:`logist.views.report`), plus the decisions a job waits for as forms.
* :mod:`.app` the Starlette application: its guard (Host, token, cross-site
  requests, headers), the pages, the decisions (each through the method of
  :class:`logist.api.Job` the CLI's command calls) and the live updates
  (Server-Sent Events driven by the files' size and mtime).
* :mod:`.server` binds the socket, makes the run's token, and runs uvicorn.
* :mod:`.static` the style and script, served under names made from their
  content and cached for good; :mod:`.compression` gzip for pages, assets
  and event streams.

The server keeps no state of its own: every page and every event is read
from the job files when asked for, and every decision is written by the
engine under the job's lock, as the CLI writes it.

``logist serve`` and its pages are the product; these modules are internal:
they may change in any release; from Python use :mod:`logist.api` (``logist.open``, and
what its ``Jobs`` and ``Job`` return) and the names in ``logist.__all__``.
"""
