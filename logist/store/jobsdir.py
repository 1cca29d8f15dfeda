"""A jobs directory and the jobs in it (each a :class:`~logist.store.session.JobFiles`).

``jobs_index.json`` lists the jobs, the current one and the queue; each job is
a folder with its manifest, history, workspace and lock. The index has its
own lock, so two ``job create`` at once cannot lose each other's entry.

Like git finds its repository, a jobs directory not named (``--jobs-dir``,
``LOGIST_JOBS_DIR``) is found upward from the current directory: the first
folder that holds a ``jobs_index.json``, or a ``jobs/`` folder that does, so
commands work from inside a job or its workspace; inside a job's folder that
job is the one commands that name none act on. The search never stops
inside a job (a model writes its workspace: :func:`find_jobs_dir`), and a
job's folder is never reached through a symbolic link (:meth:`JobsDir.job`).
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import Optional

from pydantic import ConfigDict, Field, ValidationError, field_validator

from .model import StoreModel
from ..errors import ConfigError, CorruptFileError, LogistError, NoSuchNameError, UsageError
from .atomic import atomic_write_json, move_aside
from .config import LogistConfig, load_config
from .locks import hold_lock
from .manifest import utc_now
from .session import MANIFEST_NAME, JobFiles

#: A job id: it names the job's folder and its git branch (``logist/<id>``),
#: so it is also a name git takes for a branch: no ``..``, no final ``.`` or
#: ``.lock`` (``git check-ref-format``). The fixtures' JSON Schema carries
#: this pattern; :func:`is_job_id` matches it against the whole text.
JOB_ID_RE = re.compile(r"^(?!.*\.\.)(?!.*\.$)(?!.*\.lock$)[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
INDEX_NAME = "jobs_index.json"
DEFAULT_JOBS_DIR = "jobs"
log = logging.getLogger("logist")
INDEX_FORMAT = 2
INDEX_SCHEMA = "jobs-index.v2.schema.json"


class JobsIndex(StoreModel):
    """``jobs_index.json``: the jobs of a jobs directory, the current one and the queue.

    An index written before it named its format (format 1: no ``$schema``,
    no ``format``) reads the same; it is written back in format 2."""

    # Fields a newer version adds are kept when the index is written back.
    model_config = ConfigDict(extra="allow", populate_by_name=True)
    schema_: str = Field(default=INDEX_SCHEMA, alias="$schema")
    """The JSON Schema of this file (in Logist's schemas/ folder)."""
    format: int = INDEX_FORMAT
    """The file's format version."""
    current_job_id: Optional[str] = None
    """The job commands act on when none is named (job select changes it)."""
    jobs: dict[str, str] = {}
    """Job id -> its folder, relative to the jobs directory (a folder inside it: not absolute, no '..')."""
    queue: list[str] = []
    """Job ids in the order job run --all takes them (job create --rank places a job)."""

    @field_validator("jobs")
    @classmethod
    def _folders_inside(cls, jobs: dict[str, str]) -> dict[str, str]:
        """Each job's folder is inside the jobs directory: an index naming
        ``../elsewhere`` or ``/elsewhere`` is corrupt (and rebuilt from the
        job folders), never followed."""
        for job_id, rel in jobs.items():
            parts = PurePosixPath(rel.replace("\\", "/")).parts
            if not rel or "\0" in rel or PurePosixPath(rel).is_absolute() or Path(rel).is_absolute() \
                    or ".." in parts or parts in ((), (".",)):
                raise ValueError(f"job {job_id!r} names {rel!r}, not a folder inside the jobs directory")
        return jobs

    def dump(self) -> dict:
        return self.model_dump(mode="json", by_alias=True)


def resolve_jobs_dir(option: Optional[str | Path] = None) -> Path:
    """``--jobs-dir``, else ``LOGIST_JOBS_DIR``, else the nearest jobs
    directory upward from here (:func:`find_jobs_dir`), else ``./jobs``."""
    chosen = option or os.environ.get("LOGIST_JOBS_DIR")
    if chosen:
        return Path(chosen).absolute()
    return find_jobs_dir(Path.cwd()) or Path(DEFAULT_JOBS_DIR).absolute()


def find_jobs_dir(start: Path) -> Optional[Path]:
    """The jobs directory ``start`` is in, or the ``jobs/`` of the nearest
    folder above it that has one, like git finds ``.git``; None if none.

    Never a folder inside a job: a job's workspace is the model's to write,
    and a ``jobs_index.json`` and ``config.json`` (its own ``base_url``)
    planted there would otherwise be taken for the jobs directory by a
    command run from inside the workspace, with the key sent where that
    config says. So the search starts above the outermost job folder (one
    holding a ``job_manifest.json``) that ``start`` is in."""
    start = start.absolute()
    chain = (start, *start.parents)
    outermost_job = max((at for at, folder in enumerate(chain) if (folder / MANIFEST_NAME).is_file()), default=-1)
    for folder in chain[outermost_job + 1:]:
        if (folder / INDEX_NAME).is_file():
            return folder
        if (folder / DEFAULT_JOBS_DIR / INDEX_NAME).is_file():
            return folder / DEFAULT_JOBS_DIR
    return None


def is_job_id(text: str) -> bool:
    """Whether ``text`` is a job id (:data:`JOB_ID_RE`, the whole text: ``$``
    alone would let a final newline through)."""
    return JOB_ID_RE.fullmatch(text or "") is not None


def check_job_id(job_id: str) -> str:
    if not is_job_id(job_id):
        raise UsageError(
            f"invalid job id {job_id!r}: use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit, "
            "with no '..' and not ending in '.' or '.lock' (it names a git branch too)"
        )
    return job_id


class JobsDir:
    def __init__(self, path: Optional[str | Path] = None):
        self.path = resolve_jobs_dir(path)
        self._index_holder: Optional[int] = None

    @property
    def index_path(self) -> Path:
        return self.path / INDEX_NAME

    def exists(self) -> bool:
        return self.index_path.exists()

    def init(self) -> bool:
        """Create the directory layout; returns False when it already existed."""
        created = not self.exists()
        self.path.mkdir(parents=True, exist_ok=True)
        (self.path / "roles").mkdir(exist_ok=True)
        (self.path / "skills").mkdir(exist_ok=True)
        if created:
            atomic_write_json(self.index_path, JobsIndex().dump())
        return created

    def config(self) -> LogistConfig:
        return load_config(self.path)

    @contextmanager
    def index_lock(self):
        if self._index_holder == threading.get_ident():  # held already (a rebuild while registering)
            yield
            return
        self.path.mkdir(parents=True, exist_ok=True)
        with hold_lock(self.path / ".index.lock", f"jobs index {self.index_path}", timeout=30):
            self._index_holder = threading.get_ident()
            try:
                yield
            finally:
                self._index_holder = None

    def _parse_index(self) -> JobsIndex:
        data = self.index_path.read_bytes()
        try:
            return JobsIndex.model_validate(json.loads(data))
        except (ValueError, ValidationError, RecursionError) as exc:
            if isinstance(exc, RecursionError):
                first = "it is nested too deeply to be an index"
            elif not data.strip():
                first = "it is empty"
            elif isinstance(exc, ValidationError):
                error = exc.errors()[0]
                first = f"{'.'.join(map(str, error['loc'])) or 'the file'}: {error['msg'].removeprefix('Value error, ')}"
            else:
                first = str(exc).strip().splitlines()[0]
            raise CorruptFileError(f"{self.index_path} is corrupt: {first}") from None

    def read_index(self) -> JobsIndex:
        """The index; an empty or corrupt one is rebuilt from the job folders
        (moved aside, one warning: the current job is forgotten and the queue
        follows the jobs' creation times)."""
        if not self.index_path.exists():
            return JobsIndex()
        try:
            return self._parse_index()
        except CorruptFileError as exc:
            with self.index_lock():
                try:
                    return self._parse_index()  # another command rebuilt it meanwhile
                except CorruptFileError:
                    return self._rebuild_index(str(exc))

    def _rebuild_index(self, why: str) -> JobsIndex:
        found: list[tuple[str, str]] = []
        for folder in sorted(self.path.iterdir()):
            if folder.is_symlink():
                continue  # a job's folder is never reached through a link (job())
            files = JobFiles(folder)
            if not files.manifest_path.is_file() or not is_job_id(folder.name):
                continue
            try:
                created = files.read_manifest().created_at
            except (CorruptFileError, ConfigError, OSError):
                created = ""  # still a job: recovery rebuilds its manifest from the history
            found.append((created, folder.name))
        found.sort()
        index = JobsIndex(jobs={name: name for _, name in found}, queue=[name for _, name in found])
        aside = move_aside(self.index_path, utc_now().replace(":", ""))
        self.write_index(index)
        log.warning("%s; moved it to %s and rebuilt it from the %d job folders (no current job is selected)",
                    why, aside.name, len(found))
        return index

    def write_index(self, index: JobsIndex) -> None:
        atomic_write_json(self.index_path, index.dump())

    def job(self, job_id: str, index: Optional[JobsIndex] = None) -> JobFiles:
        """The job ``job_id``; ``index``: the index already read, so that a
        command going through every job reads it once, not once per job."""
        check_job_id(job_id)
        index = index if index is not None else self.read_index()
        rel = index.jobs.get(job_id, job_id)
        # Never through a link: one planted where a job is looked for would
        # show another folder's files as this job's.
        folder = self.path
        for part in Path(rel).parts:
            folder = folder / part
            if folder.is_symlink():
                raise NoSuchNameError(f"job '{job_id}' in {self.path}: {folder} is a symbolic link; "
                                      "a job's folder is never reached through one")
        path = (self.path / rel).resolve()
        job = JobFiles(path, job_id, self)
        if not job.is_job():
            raise NoSuchNameError(f"no job '{job_id}' in {self.path}")
        return job

    def resolve(self, job_id: Optional[str] = None) -> JobFiles:
        """The job from the argument, else ``LOGIST_JOB_ID``, else the job
        whose folder the current directory is in, else the index's current job."""
        chosen = job_id or os.environ.get("LOGIST_JOB_ID") or self.job_here() or self.read_index().current_job_id
        if not chosen:
            raise NoSuchNameError(
                f"no job given and no current job in {self.path} (name one, or run 'logist job select JOB')"
            )
        return self.job(chosen)

    def job_here(self, where: Optional[Path] = None) -> Optional[str]:
        """The id of the job whose folder ``where`` (default: the current
        directory) is in, or None."""
        try:
            inside = Path(where or Path.cwd()).resolve().relative_to(self.path.resolve())
        except ValueError:
            return None
        if not inside.parts:
            return None
        folders = {Path(rel).parts[0]: job_id for job_id, rel in self.read_index().jobs.items() if Path(rel).parts}
        return folders.get(inside.parts[0])

    def job_ids(self) -> list[str]:
        return list(self.read_index().jobs)

    def register(self, job_id: str, *, make_current: bool = True, rank: Optional[int] = None) -> None:
        with self.index_lock():
            index = self.read_index()
            index.jobs[job_id] = job_id
            if job_id not in index.queue:
                if rank is None:
                    index.queue.append(job_id)
                else:
                    index.queue.insert(max(rank, 0), job_id)
            if make_current:
                index.current_job_id = job_id
            self.write_index(index)

    def select(self, job_id: str) -> JobFiles:
        job = self.job(job_id)
        with self.index_lock():
            index = self.read_index()
            index.current_job_id = job_id
            self.write_index(index)
        return job

    def new_job(self, job_id: str) -> JobFiles:
        """The files of a job to be made (its folder does not exist yet)."""
        check_job_id(job_id)
        path = self.path / job_id
        if path.exists() or job_id in self.read_index().jobs:
            raise LogistError(f"job '{job_id}' already exists in {self.path}")
        return JobFiles(path, job_id, self)
