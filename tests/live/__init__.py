"""Logist against a real inference engine. A package, so that its
conftest.py (the live engine's fixture) is imported as ``live.conftest``
and never stands in for tests/conftest.py, which the tests everywhere
import as ``conftest``."""
