"""The engines' names and defaults, said once.

:func:`logist.engine.engines.make_engine` builds them and ``logist job run
--engine`` offers them; this module imports nothing, so the CLI reads it at
start-up without loading the engine.
"""

ENGINES = ("serial", "threads", "ray")
DEFAULT_ENGINE = "threads"
DEFAULT_CONCURRENCY = 4
