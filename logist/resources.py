"""Where the bundled data lives: built-in roles, schemas and fixtures.

In a checkout they sit at the repository root (``roles/``, ``schemas/``,
``fixtures/``); an installed wheel carries copies under ``logist/_data/``.
Looking in both places lets the same code run editable and installed.
"""

from __future__ import annotations

import functools
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


@functools.lru_cache(maxsize=None)
def data_dir(name: str) -> Path:
    """The directory holding bundled data ``name`` (roles, schemas, fixtures):
    a fact of the installation, which does not move while the process runs,
    so it is looked for once (a step asks several times)."""
    for candidate in (_PACKAGE / "_data" / name, _PACKAGE.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"bundled data '{name}' is missing from this installation")

