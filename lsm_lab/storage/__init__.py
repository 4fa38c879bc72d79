"""Storage: one seam for every byte of a table, local or on an object store (see `storage.base`)."""

from lsm_lab.storage.base import (
    AlreadyExistsError,
    ObjectInfo,
    RequestCounts,
    Storage,
    StorageError,
    VersionMismatchError,
    clean_key,
)
from lsm_lab.storage.local import LocalStorage
from lsm_lab.storage.location import is_remote, open_storage, resolve_options
from lsm_lab.storage.lock import StorageLock

__all__ = [
    "AlreadyExistsError",
    "LocalStorage",
    "ObjectInfo",
    "RequestCounts",
    "Storage",
    "StorageError",
    "StorageLock",
    "VersionMismatchError",
    "clean_key",
    "is_remote",
    "open_storage",
    "resolve_options",
]
