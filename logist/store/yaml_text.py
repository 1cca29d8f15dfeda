"""YAML as the files people write in it are read: role manifests, a
skill's ``SKILL.md`` frontmatter and prompt files (:mod:`.roles`,
:mod:`.skills`, :mod:`.prompts`), through :func:`parse`.

This is the one module that uses PyYAML, and it imports it when a YAML text
is first parsed, not at start-up (the rule for heavy third-party modules):
most commands read no YAML at all (``logist job status`` reads JSON files
only), and PyYAML's import costs more than a small command's own work. Its
errors come out as :class:`YAMLSyntaxError`, which carries what the readers
word their messages from, so they need not import PyYAML either.
"""

from __future__ import annotations

from typing import Any


class YAMLSyntaxError(Exception):
    """Text that is not valid YAML: PyYAML's ``YAMLError``, its message, its
    problem and where it is (``problem_mark``, ``context_mark``: a ``line``
    and a ``column``, from 0; either may be None)."""

    def __init__(self, error: Exception):
        super().__init__(str(error))
        self.problem = getattr(error, "problem", None)
        self.problem_mark = getattr(error, "problem_mark", None)
        self.context_mark = getattr(error, "context_mark", None)


def parse(text: str) -> Any:
    """``text`` read as YAML (``yaml.safe_load``: plain data, no tags that build objects)."""
    import yaml  # here and only here: see the module's docstring

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise YAMLSyntaxError(exc) from None
