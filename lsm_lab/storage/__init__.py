"""Storage: one seam for every byte of a table, local or on an object store (see `storage.base`).

Taught in: notebooks/12_object_storage.ipynb
"""

from lsm_lab.storage.base import (
    AlreadyExistsError,
    ObjectInfo,
    RequestCounts,
    Storage,
    StorageError,
    VersionMismatchError,
    clean_key,
)
from lsm_lab.storage.handle import (
    StoragePath,
    TablePath,
    as_path,
    create_bytes,
    file_stamp,
    is_local,
    list_names,
    list_stamped,
    open_read,
    path_of,
    prefetch,
    storage_of,
    temp_leftovers,
    walk_files,
    walk_sized,
)
from lsm_lab.storage.local import LocalStorage
from lsm_lab.storage.location import default_options, is_remote, open_storage, resolve_options
from lsm_lab.storage.lock import StorageLock
from lsm_lab.storage.scope import at_end as at_scope_end
from lsm_lab.storage.scope import forget as forget_kept
from lsm_lab.storage.scope import recall as recall_kept
from lsm_lab.storage.scope import remember as remember_kept
from lsm_lab.storage.scope import request_scope

__all__ = [
    "AlreadyExistsError",
    "LocalStorage",
    "ObjectInfo",
    "RequestCounts",
    "Storage",
    "StorageError",
    "StorageLock",
    "StoragePath",
    "TablePath",
    "VersionMismatchError",
    "as_path",
    "at_scope_end",
    "clean_key",
    "create_bytes",
    "default_options",
    "file_stamp",
    "forget_kept",
    "is_local",
    "is_remote",
    "list_names",
    "list_stamped",
    "open_read",
    "open_storage",
    "path_of",
    "prefetch",
    "recall_kept",
    "remember_kept",
    "request_scope",
    "resolve_options",
    "storage_of",
    "temp_leftovers",
    "walk_files",
    "walk_sized",
]
