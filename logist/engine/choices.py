"""The engines there are: those registered in the entry-point group
``logist.engines``, Logist's own three included.

An engine is registered as a third party's would be, in its package's
``pyproject.toml``::

    [project.entry-points."logist.engines"]
    serial = "logist.engine.engines:SerialEngine"

The entry point names a class with ``create(concurrency, address)`` that
returns an :class:`~logist.engine.engines.Engine`; ``logist job run --all
--engine NAME`` and :func:`logist.engine.engines.make_engine` find it here
by its name. This module loads no engine, and the CLI reads the names only
when it checks or shows ``--engine``.
"""

from __future__ import annotations

from importlib.metadata import EntryPoint, entry_points

GROUP = "logist.engines"
DEFAULT_ENGINE = "threads"
DEFAULT_CONCURRENCY = 4


def registered() -> dict[str, EntryPoint]:
    """The engines installed, by name, in the order they were found (a name
    registered twice: the first). Read anew each time (a few ms): a batch
    asks twice, --engine once."""
    found: dict[str, EntryPoint] = {}
    for entry in entry_points(group=GROUP):
        found.setdefault(entry.name, entry)
    return found


def engine_names() -> tuple[str, ...]:
    return tuple(registered())
