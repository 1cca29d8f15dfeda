"""Where the bundled data lives: built-in roles, schemas and fixtures.

In a checkout they sit at the repository root (``roles/``, ``schemas/``,
``fixtures/``); an installed wheel carries copies under ``logist/_data/``.
Looking in both places lets the same code run editable and installed.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


#: Where each bundled data folder was found: the installation does not move
#: while the process runs, so it is looked for once (a step asks several times).
_FOUND: dict[str, Path] = {}


def data_dir(name: str) -> Path:
    """The directory holding bundled data ``name`` (roles, schemas, fixtures)."""
    found = _FOUND.get(name)
    if found is not None:
        return found
    for candidate in (_PACKAGE / "_data" / name, _PACKAGE.parent / name):
        if candidate.is_dir():
            _FOUND[name] = candidate
            return candidate
    raise FileNotFoundError(f"bundled data '{name}' is missing from this installation")

