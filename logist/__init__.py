"""Logist: run LLM agent jobs as plain directories.

The front door for Python is :func:`open` (:mod:`logist.api`); everything
else is reachable through its module (``logist.engine.step``,
``logist.store.history``, ``logist.replay.scripted``...). openai and git load
only when a step or a workspace needs them. This example runs as it is: a
scripted OpenAI-compatible server on 127.0.0.1 stands in for the model (give
``open`` your endpoint's ``base_url`` instead)::

    import logist
    from logist.replay.scripted import ScriptedLLMServer, answer

    worker = answer("COMPLETED", "Wrote hello.py.", ["hello.py"],
                    file_changes=[{"path": "hello.py", "content": "print('Hello')\\n"}])
    supervisor = answer("COMPLETED", "hello.py prints Hello.", ["hello.py"])
    with ScriptedLLMServer([worker, supervisor]) as llm, logist.open("jobs", base_url=llm.base_url) as jobs:
        job = jobs.create("hello", objective="Write hello.py that prints a greeting")
        job.run()                   # Worker, then Supervisor, until a person is needed
    print(job.status)               # APPROVAL_REQUIRED
    job.approve()                   # SUCCESS; the work is in jobs/hello/workspace

docs/python-api.md tells the rest.
"""

__version__ = "0.2.0"

from .api import Job, Jobs, Preview, open
from .engine.create import JobSpec
from .engine.apply import StepResult
from .errors import LogistError
from .store.entries import HistoryEntry
from .store.manifest import JobManifest, Status

__all__ = [
    "HistoryEntry",
    "Job",
    "JobManifest",
    "JobSpec",
    "Jobs",
    "LogistError",
    "Preview",
    "Status",
    "StepResult",
    "open",
]
