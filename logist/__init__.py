"""Logist: run LLM agent jobs as plain directories.

The library API, importable without the CLI (and without openai or git,
which load only when a step or a workspace needs them)::

    from logist import JobsDir, create_job, step_once, run_job, user_action

    jobs = JobsDir("jobs")
    job = create_job(jobs, "hello", "Write hello.py that prints a greeting")
    run_job(job)                     # Worker, then Supervisor, until a person is needed
    user_action(job, "approve")
"""

# Names resolve on first use (PEP 562), so that importing the package, as the
# CLI does for every command, costs nothing until a command needs the core.
_EXPORTS = {
    "user_action": "engine.decide",
    "create_job": "engine.create",
    "LogistError": "errors",
    "HistoryEntry": "store.history",
    "JobHistory": "store.history",
    "load_history": "store.history",
    "Job": "store.jobsdir",
    "JobsDir": "store.jobsdir",
    "JobManifest": "store.manifest",
    "Answer": "protocol",
    "InvalidAnswer": "protocol",
    "parse_answer": "protocol",
    "replay_history": "replay.apply",
    "RoleManifest": "store.roles",
    "load_roles": "store.roles",
    "StepResult": "engine.step",
    "post_answer": "engine.step",
    "run_job": "engine.loop",
    "step_once": "engine.step",
    "step_turn": "engine.loop",
    "Status": "store.manifest",
}


def __getattr__(name: str):
    if name in _EXPORTS:
        import importlib

        value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'logist' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(list(globals()) + list(_EXPORTS))


__version__ = "0.1.0"

__all__ = [
    "Answer",
    "HistoryEntry",
    "InvalidAnswer",
    "Job",
    "JobHistory",
    "JobManifest",
    "JobsDir",
    "LogistError",
    "RoleManifest",
    "Status",
    "StepResult",
    "create_job",
    "load_history",
    "load_roles",
    "parse_answer",
    "post_answer",
    "replay_history",
    "run_job",
    "step_once",
    "step_turn",
    "user_action",
]
