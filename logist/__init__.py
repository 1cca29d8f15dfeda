"""Logist: run LLM agent jobs as plain directories.

The front door for Python is :func:`open` (:mod:`logist.api`): the public
API is :data:`__all__`, what :mod:`logist.api`'s ``Jobs`` and ``Job`` return,
and the testing servers and pytest fixtures of :mod:`logist.replay` that
docs/replay.md documents. Every other module (``logist.engine``,
``logist.store``...) is internal: reachable, but it may change in any
release. openai and git load only when a step or a workspace needs them. This example runs as it is: a
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

from importlib import import_module
from typing import TYPE_CHECKING

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

#: Where each public name lives. They are imported when first used, not
#: with the package: the ``logist`` program imports ``logist`` before it
#: takes the API key out of its environment (:mod:`logist.__main__`), and
#: that must not wait for the whole library to load.
_PUBLIC = {
    "Job": ".api", "Jobs": ".api", "Preview": ".api", "open": ".api",
    "JobSpec": ".engine.create", "StepResult": ".engine.apply", "LogistError": ".errors",
    "HistoryEntry": ".store.entries", "JobManifest": ".store.manifest", "Status": ".store.manifest",
}


def __getattr__(name: str):
    if name in _PUBLIC:
        value = getattr(import_module(_PUBLIC[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'logist' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:  # pragma: no cover - for type checkers and editors
    from .api import Job, Jobs, Preview, open
    from .engine.apply import StepResult
    from .engine.create import JobSpec
    from .errors import LogistError
    from .store.entries import HistoryEntry
    from .store.manifest import JobManifest, Status
