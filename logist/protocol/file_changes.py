"""The file changes an answer carries: write a whole file, replace one exact
text in it, delete it; each a pydantic model, and the path they may name.

Apart from :mod:`logist.protocol.answer`, which makes them a field of the
answer (and re-exports these names), because the workspace applies and
diffs them (:mod:`logist.workspace.changes`, :mod:`logist.workspace.repository`)
and a job's files are read through the workspace: reading a job (``logist
job status``) loads these models and not the answer's. Each is built when
first used (pydantic's ``defer_build``), as the store's models are: the
answer's model builds them when it is built.
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .paths import PATH_MAX

PATH_RULE = "relative to the workspace root; absolute paths, \"..\", symlinks and anything in .git are refused"

#: The path the protocol's examples name, which no real job takes for its own
#: (an answer that copies it is refused: :mod:`logist.protocol.answer`).
PLACEHOLDER_PATH = "RELATIVE/PATH"

WorkspacePath = Annotated[str, Field(min_length=1, max_length=PATH_MAX, description=f"a workspace path, {PATH_RULE}")]


class WriteFile(BaseModel):
    """Write a whole file (created with its directories if needed)."""

    model_config = ConfigDict(extra="forbid", defer_build=True,
                              json_schema_extra={"examples": [{"path": PLACEHOLDER_PATH, "content": "..."}]})
    path: WorkspacePath
    content: str = Field(description="the file's whole new content")


class ReplaceInFile(BaseModel):
    """Replace one exact occurrence ("old" must occur exactly once)."""

    model_config = ConfigDict(
        extra="forbid",
        defer_build=True,
        json_schema_extra={"examples": [{"path": PLACEHOLDER_PATH, "old": "exact text", "new": "replacement"}]},
    )
    path: WorkspacePath
    old: str = Field(min_length=1, description="the exact text to replace; it must occur exactly once in the file")
    new: str = Field(description="the text that replaces it")


class DeleteFile(BaseModel):
    """Delete a file."""

    model_config = ConfigDict(extra="forbid", defer_build=True,
                              json_schema_extra={"examples": [{"path": PLACEHOLDER_PATH, "delete": True}]})
    path: WorkspacePath
    delete: Literal[True] = Field(description="always true")

    @field_validator("delete", mode="before")
    @classmethod
    def _only_true(cls, value):
        # A literal takes what equals it, and 1 == True; the schema's const takes only true.
        if value is not True:
            raise ValueError("must be true")
        return value


FileChange = Union[WriteFile, ReplaceInFile, DeleteFile]
