"""The base of the store's pydantic models: every file's model, and the
parts it is made of, is a :class:`StoreModel`.

A store model is built when first used (pydantic's ``defer_build``): its
validator and serializer are made the first time it reads, writes or gives
its JSON Schema, not when its module is imported. A command builds the
models of what it reads and no others: ``logist job status`` builds the jobs
index's and the manifest's, not the config's, the step journal's or a
history entry's (measured: about 2.5% of that command's time).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class StoreModel(BaseModel):
    """A model of a job's or a jobs directory's file (or of a part of one),
    built when first used; a subclass's ``model_config`` adds to this one."""

    model_config = ConfigDict(defer_build=True)
