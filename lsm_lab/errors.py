"""The `LsmLabError` hierarchy: every mistake a user can make gets a typed error.

A user mistake (a path that is not a table, a column that is missing, a corrupt
footer) must never surface as a deep traceback from pyarrow or os: the library
catches it where it knows *which file* and *what* was wrong and raises one of
the classes below with both in the message.

    LsmLabError
    ├── TableNotFoundError        path has no .hoodie/hoodie.properties (also a FileNotFoundError)
    ├── TableConfigError          hoodie.properties missing a key, bad value, unknown version
    ├── SchemaError               missing key/ordering/partition column, type change, null key
    ├── PartitionValueError       a partition value that would escape the table folder
    ├── CorruptFileError          a footer/block/instant file that cannot be decoded
    ├── CorruptTableError         table metadata that is inconsistent or names a path outside the table
    │   ├── UnsafePathError       a symbolic link in the table that a write or delete would follow out of it
    │   └── LostCommitError       a write that looks committed has lost its completed instant file
    ├── UnsupportedFeatureError   a real Hudi feature lsm_lab does not read (HFile, Lance, ...)
    │   └── MissingDependencyError  a feature whose optional extra is not installed (also an ImportError)
    ├── InputError                bad user input to a command (unsorted runs, bad option; also a ValueError)
    │   ├── RetentionError        a read that reaches past what the cleaner kept
    │   └── TimeTravelError       time travel to an instant time a still-pending commit covers
    ├── TimelineError             an instant transition that is not allowed, unknown instant
    ├── ConflictError             optimistic concurrency: another writer won
    └── StorageError              a storage request failed (unknown scheme, missing bucket, no answer)

Simplified compared with Apache Hudi: Hudi has dozens of exception classes spread
over modules (HoodieIOException, HoodieCorruptedDataException, ...); lsm_lab keeps
one small tree so that callers can catch `LsmLabError` and show the message. Three of
them are also the built-in a Python user would catch: `TableNotFoundError` is a
`FileNotFoundError`, `InputError` a `ValueError`, `MissingDependencyError` an `ImportError`.

Taught in: notebooks/13_change_data_capture.ipynb
"""

from __future__ import annotations

from os import PathLike


class LsmLabError(Exception):
    """Base class of every error lsm_lab raises on purpose.

    `path` (when given) names the file or folder the problem is about; it is
    prefixed to the message so that a user always sees *where*.
    """

    def __init__(self, message: str, *, path: str | PathLike[str] | object | None = None) -> None:
        self.path = None if path is None else str(path)
        self.message = message
        super().__init__(f"{self.path}: {message}" if self.path else message)


class TableNotFoundError(LsmLabError, FileNotFoundError):
    """The path is not an lsm_lab/Hudi table (no `.hoodie/hoodie.properties`)."""


class TableConfigError(LsmLabError):
    """`hoodie.properties` is missing, incomplete, invalid or of an unknown version."""


class SchemaError(LsmLabError):
    """Data does not fit the table: missing columns, type changes, null record keys."""


class PartitionValueError(LsmLabError):
    """A partition value is empty or contains `/`, `\\` or `..` (it would escape the table folder)."""


class CorruptFileError(LsmLabError):
    """A data, log or timeline file cannot be decoded (bad footer, truncated block, bad JSON/Avro)."""


class CorruptTableError(LsmLabError):
    """Table metadata contradicts itself or the disk: a plan, commit metadata, properties or marker naming a
    path outside the table, a committed file that is missing, a completion time before its begin time.

    `field` (when given) names the metadata field that was wrong.
    """

    def __init__(self, message: str, *, path: str | PathLike[str] | object | None = None,
                 field: str | None = None) -> None:
        self.field = field
        super().__init__(f"{field}: {message}" if field else message, path=path)


class UnsafePathError(CorruptTableError):
    """A write, create, rename or delete inside a local table would follow a symbolic link out of the table.

    `path` names the link (or the file the operation was about); the message
    says where the link points.  Nothing was written or deleted through it.
    """


class LostCommitError(CorruptTableError):
    """A write looks committed — its data files exist and it left no markers, which a crashed writer always
    leaves — but its completed instant file is missing (deleted by hand, lost by the storage).

    Rolling it back would delete committed data for good, and reading without it would bring back what it
    deleted, so both refuse.  `instant` is the begin time of the write.
    """

    def __init__(self, message: str, *, instant: str, path: str | PathLike[str] | object | None = None) -> None:
        self.instant = instant
        super().__init__(message, path=path)

class UnsupportedFeatureError(LsmLabError):
    """The table uses a Hudi feature that lsm_lab does not implement (HFile blocks, Lance files, ...)."""


class MissingDependencyError(UnsupportedFeatureError, ImportError):
    """A feature needs an optional extra that is not installed (lsm_lab/extras.py names the pip line)."""


class InputError(LsmLabError, ValueError):
    """Bad input to a command or function: unsorted runs, mismatched schemas, bad options."""


class RetentionError(InputError):
    """A read reaches past what the cleaner kept: time travel, `read_cdc` or a rollback needs a file version
    that a completed clean deleted.  `file` names it, `clean` is the clean's begin time, `policy` its policy."""

    def __init__(self, message: str, *, file: str, clean: str, policy: str,
                 path: str | PathLike[str] | object | None = None) -> None:
        self.file, self.clean, self.policy = file, clean, policy
        super().__init__(message, path=path)


class TimeTravelError(InputError):
    """A time-travel read as of an instant time T that a still-pending commit (requested or inflight, begun at
    or before T) covers: its rows may still appear in that snapshot, so the read is refused, as upstream's
    `TimelineUtils.validateTimestampAsOf` refuses it (`HoodieTimeTravelException`, apache/hudi PR #9280).
    `pending` is the begin time of the first such commit."""

    def __init__(self, message: str, *, pending: str, path: str | PathLike[str] | object | None = None) -> None:
        self.pending = pending
        super().__init__(message, path=path)


class TimelineError(LsmLabError):
    """A timeline operation that is not allowed (unknown instant, illegal transition, clock problem)."""


class ConflictError(LsmLabError):
    """Optimistic concurrency control: a concurrent writer committed to the same file groups first."""


class StorageError(LsmLabError):
    """A storage request failed: unknown scheme, missing bucket, bad credentials, an endpoint that does not answer."""


__all__ = [
    "ConflictError",
    "CorruptFileError",
    "CorruptTableError",
    "InputError",
    "LostCommitError",
    "LsmLabError",
    "MissingDependencyError",
    "PartitionValueError",
    "SchemaError",
    "StorageError",
    "TableConfigError",
    "TableNotFoundError",
    "TimeTravelError",
    "TimelineError",
    "UnsafePathError",
    "UnsupportedFeatureError",
]
