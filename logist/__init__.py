"""Logist: run LLM agent jobs as plain directories.

The library API, importable without the CLI (and without openai or git,
which load only when a step or a workspace needs them). This example runs as
it is: a scripted OpenAI-compatible server on 127.0.0.1 stands in for the
model (give ``run_job`` your endpoint's ``base_url`` instead)::

    from logist import JobsDir, create_job, run_job, user_action
    from logist.replay.scripted import ScriptedLLMServer, answer

    jobs = JobsDir("jobs")
    job = create_job(jobs, "hello", "Write hello.py that prints a greeting")
    worker = answer("COMPLETED", "Wrote hello.py.", ["hello.py"],
                    file_changes=[{"path": "hello.py", "content": "print('Hello')\\n"}])
    supervisor = answer("COMPLETED", "hello.py prints Hello.", ["hello.py"])
    with ScriptedLLMServer([worker, supervisor]) as llm:
        results = run_job(job, base_url=llm.base_url)  # Worker, then Supervisor, until a person is needed
    print(results[-1].status)                          # APPROVAL_REQUIRED
    user_action(job, "approve")                        # SUCCESS; the work is in jobs/hello/workspace
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
    "create_from_fixture": "replay.fixtures",
    "load_fixture": "replay.fixtures",
    "RoleManifest": "store.roles",
    "load_roles": "store.roles",
    "StepResult": "engine.step",
    "post_answer": "engine.step",
    "run_job": "engine.loop",
    "run_to_rest": "engine.loop",
    "JobRun": "engine.loop",
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
    "JobRun",
    "JobsDir",
    "LogistError",
    "RoleManifest",
    "Status",
    "StepResult",
    "create_from_fixture",
    "create_job",
    "load_fixture",
    "load_history",
    "load_roles",
    "parse_answer",
    "post_answer",
    "replay_history",
    "run_job",
    "run_to_rest",
    "step_once",
    "step_turn",
    "user_action",
]
