"""Object stores (S3 and S3-compatible, GCS, Azure) as a `Storage` backend, through obstore.

obstore is the Python face of the Rust `object_store` crate that hudi-rs and
delta-rs use.  lsm_lab maps its operations one to one:

    list(prefix)           LIST  ?prefix=<root>/<prefix>/&delimiter=/   (one request per 1,000 keys)
    read / read_range      GET   (Range: bytes=a-b)
    read_suffix            GET   (Range: bytes=-n; on Azure, which refuses suffix ranges: HEAD, then bytes=a-b)
    head                   HEAD
    write                  PUT
    create                 PUT   If-None-Match: *          → 412 means another writer won
    replace                PUT   If-Match: "<etag>"         → 412 means the object changed
    delete                 DELETE
    delete_many            DELETE ?delete   (S3's DeleteObjects, 1,000 keys per request)
    delete_prefix          LIST, then delete_many

A PUT is atomic on every one of these stores (readers see the old object or the
new one), so no temp files are needed and `create` is the commit primitive: the
completed instant file of a commit is created once, by exactly one writer.

Every request has a bounded retry (a few attempts, seconds, not minutes: the
library default of ten retries over three minutes would look like a hang) and
every failure becomes one `StorageError` naming the URI and the cause.

Parquet goes through `pyarrow.fs` (S3FileSystem, GcsFileSystem,
AzureFileSystem) built from the same resolved options, so data files are read
with ranged GETs of only the footer and the row groups a query needs.

Simplified compared with Apache Hudi: Hudi reaches object stores through Hadoop
file systems (s3a, gs, abfs) with their own retry and consistency settings;
lsm_lab relies on the strong read-after-write consistency all three stores now
give.

Taught in: notebooks/12_object_storage.ipynb
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

import obstore
import obstore.exceptions as obx
import pyarrow.fs

from lsm_lab.storage import scope as scopes
from lsm_lab.storage.base import (
    NO_CREDENTIALS,
    AlreadyExistsError,
    ConflictError,
    ObjectInfo,
    RequestCounts,
    Storage,
    StorageError,
    VersionMismatchError,
    clean_key,
)
from lsm_lab.storage.scope import ABSENT

T = TypeVar("T")
LIST_PAGE = 1000  # keys per LIST response (S3, GCS and Azure all use 1,000 by default)
BULK_DELETE = 1000  # keys per S3 DeleteObjects request (its limit)


#: the store's error code in an XML error body (S3's `<Code>NoSuchBucket</Code>`, Azure's `ContainerNotFound`)
_ERROR_CODE = re.compile(r"<Code>([^<]+)</Code>(?:\s*<Message>([^<\n]*))?")
#: a missing bucket (S3, GCS) or container (Azure), whatever request found it missing
MISSING_BUCKET = ("NoSuchBucket", "ContainerNotFound")
#: addresses of the cloud instance-metadata services object_store asks for credentials when it was given none
_METADATA_PROBE = ("169.254.169.254", "/latest/api/token", "/latest/meta-data/", "metadata.google.internal",
                   "/metadata/identity/")


def _error_code(exc: BaseException) -> str | None:
    """The error code of the store's XML error body, if the error carries one."""
    found = _ERROR_CODE.search(str(exc))
    return found.group(1) if found else None


def _short(exc: BaseException) -> str:
    """The first line of an obstore error (its Debug dump follows on later lines), with the store's error
    code and message from the XML body when the first line stops at the body's `<?xml ...?>` declaration."""
    text = str(exc).strip()
    lines = text.splitlines()
    first = lines[0] if lines else type(exc).__name__
    found = _ERROR_CODE.search(text)
    if found and found.group(1) not in first:
        first = re.sub(r"\s*<\?xml[^>]*\?>\s*$", "", first).rstrip(": ")
        first += f": {found.group(1)}" + (f" ({found.group(2).strip()})" if found.group(2) else "")
    return first


class ObjectStorage(Storage):
    """A prefix in a bucket (or container) of an object store."""

    def __init__(self, uri: str, store: Any, arrow_fs: Callable[[], tuple[pyarrow.fs.FileSystem, str]],
                 *, counts: RequestCounts | None = None, prefix: str = "", suffix_ranges: bool = True) -> None:
        self.uri = uri.rstrip("/")
        self.store = store  # obstore store rooted at the bucket
        self.prefix = clean_key(prefix)  # the table's prefix inside the bucket
        self._arrow_fs = arrow_fs
        self._arrow: tuple[pyarrow.fs.FileSystem, str] | None = None
        self.counts = counts if counts is not None else RequestCounts()
        #: whether the store answers `Range: bytes=-n` (S3 and GCS do; Azure Blob Storage does not, so a
        #: tail read there is a HEAD for the size, then a ranged GET)
        self.suffix_ranges = suffix_ranges
        #: (open_storage, (URI, resolved options)), set by `open_storage`: how a pickled copy reopens this root
        self.reopen: tuple[Callable[..., Any], tuple[str, dict[str, Any]]] | None = None

    def __repr__(self) -> str:
        return f"ObjectStorage({self.uri!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle as "open this URI with these options again" (Spark ships a table's storage to its tasks);
        the copy counts its own requests."""
        if self.reopen is None:
            raise StorageError("this object storage was not made by open_storage and cannot be pickled", path=self.uri)
        return self.reopen

    def child(self, key: str) -> ObjectStorage:
        key = clean_key(key)
        sub = ObjectStorage(self.url(key), self.store, self._arrow_fs, counts=self.counts,
                            prefix=f"{self.prefix}/{key}" if self.prefix else key, suffix_ranges=self.suffix_ranges)
        sub._arrow = self._arrow
        if self.reopen is not None:
            opener, (_, options) = self.reopen
            sub.reopen = (opener, (sub.uri, options))
        return sub

    def _key(self, key: str) -> str:
        key = clean_key(key)
        return f"{self.prefix}/{key}" if self.prefix and key else (self.prefix or key)

    def _rel(self, full: str) -> str:
        if self.prefix:
            return full[len(self.prefix) + 1:] if full.startswith(self.prefix + "/") else full
        return full

    def _call(self, kind: str, key: str, fn: Callable[[], T]) -> T:
        """Send one request, counting it and turning store errors into typed ones."""
        self.counts.add(kind, key=self._key(key))
        try:
            return fn()
        except (obx.BaseError, OSError, ValueError) as exc:  # obstore raises the builtin for a missing object
            raise self._typed(kind, key, exc) from None

    def _typed(self, kind: str, key: str, exc: BaseException) -> BaseException:
        """The typed error (one line, naming the URI) for an error of the store."""
        said = str(exc)
        if _error_code(exc) in MISSING_BUCKET:  # any request, a GET, PUT or LIST, can find the bucket missing
            return StorageError(f"bucket not found: {_short(exc)}; create it first", path=self.uri)
        if isinstance(exc, (obx.NotFoundError, FileNotFoundError)):
            if kind == "LIST":  # listing a missing prefix is empty, so a 404 means the bucket is missing
                return StorageError(f"bucket not found: {_short(exc)}", path=self.uri)
            return FileNotFoundError(self.url(key))
        if isinstance(exc, obx.AlreadyExistsError):
            return AlreadyExistsError("already exists; another writer created it first", path=self.url(key))
        if isinstance(exc, obx.PreconditionError):
            return VersionMismatchError("was changed by another writer since it was read", path=self.url(key))
        if NO_CREDENTIALS in said:  # lsm_lab's provider refused to look further (storage.location): say so
            reason = said[said.index(NO_CREDENTIALS):].splitlines()[0]
            return StorageError(f"{kind} not sent, {reason}", path=self.url(key))
        if any(probe in said for probe in _METADATA_PROBE):  # no keys given, and the instance had none either
            return StorageError(f"{kind} not sent, {NO_CREDENTIALS} no access key was given (storage_options "
                                "access_key_id and secret_access_key, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY; "
                                "GOOGLE_*/AZURE_STORAGE_* for the others), and the cloud instance-metadata service "
                                f"gave none: {_short(exc)}", path=self.url(key))
        if isinstance(exc, (obx.PermissionDeniedError, obx.UnauthenticatedError)):
            return StorageError(f"{kind} refused, access denied: check the credentials (storage_options or the "
                                f"AWS_*/GOOGLE_*/AZURE_* variables) and their rights on this bucket; "
                                f"{_short(exc)}", path=self.url(key))
        return StorageError(f"{kind} failed: {_short(exc)}", path=self.url(key))

    def _info(self, meta: Any) -> ObjectInfo:
        return ObjectInfo(self._rel(str(meta["path"])), int(meta["size"]), str(meta.get("e_tag") or ""),
                          meta.get("last_modified"))

    # -- reads -----------------------------------------------------------------------------
    def _sid(self) -> int:
        return id(self.store)

    def _tree(self, prefix: str) -> list[Any]:
        """Metadata of every object below `prefix` (one LIST per 1,000 keys; kept in a request scope)."""
        full = self._key(prefix)
        scope = scopes.current()
        kept = scope.get_list(self._sid(), "tree", full) if scope is not None else None
        if kept is None and scope is not None:
            kept = scope.tree_from_tree(self._sid(), full)
        if kept is not None:
            return list(kept)
        metas = self._call("LIST", prefix, lambda: [dict(m) for page in obstore.list(self.store, full + "/" if full else None)
                                                    for m in page])
        extra_pages = (len(metas) - 1) // LIST_PAGE  # the store answers LIST with pages of 1,000 keys
        if extra_pages > 0:
            self.counts.add("LIST", extra_pages, key=full)
        if scope is not None:
            scope.put_list(self._sid(), "tree", full, metas)
        return list(metas)

    def _dir(self, prefix: str) -> tuple[list[Any], list[str]]:
        """(metadata of the objects, full folder keys) directly below `prefix`: one LIST, kept in a request scope."""
        full = self._key(prefix)
        scope = scopes.current()
        kept = scope.get_list(self._sid(), "dir", full) if scope is not None else None
        if kept is None and scope is not None:
            kept = scope.dir_from_tree(self._sid(), full)
        if kept is None:
            result = self._call("LIST", prefix, lambda: obstore.list_with_delimiter(self.store, full or None))
            kept = ([dict(m) for m in result["objects"]], [str(p).rstrip("/") for p in result["common_prefixes"]])
            if scope is not None:
                scope.put_list(self._sid(), "dir", full, kept)
        return list(kept[0]), list(kept[1])

    def prefetch(self, prefix: str) -> bool:
        """In a request scope, one recursive LIST of the folder `prefix` answers every later LIST of a folder
        below it (and HEADs and GETs of absent keys); a folder of 1,000 keys or more is left to its LISTs.
        True when the folder is kept."""
        full = self._key(prefix)
        scope = scopes.current()
        if scope is None or (self._sid(), full) in scope.too_big:
            return False
        if scope.get_list(self._sid(), "tree", full) is not None or scope.dir_from_tree(self._sid(), full):
            return True

        def run() -> list[dict[str, Any]]:
            out: list[dict[str, Any]] = []
            for page in obstore.list(self.store, full + "/" if full else None, chunk_size=LIST_PAGE):
                out.extend(dict(m) for m in page)
                if len(out) >= LIST_PAGE:  # more than one response: not worth it, stop reading
                    break
            return out

        metas = self._call("LIST", prefix, run)
        if len(metas) >= LIST_PAGE:
            scope.too_big.add((self._sid(), full))
            return False
        scope.put_list(self._sid(), "tree", full, metas)
        return True

    def list_files(self, prefix: str = "", *, recursive: bool = False) -> list[ObjectInfo]:
        infos = [self._info(m) for m in (self._tree(prefix) if recursive else self._dir(prefix)[0])]
        # folder markers ("p/" objects that some tools create, pyarrow's create_dir among them) are not files
        base = clean_key(prefix)
        return sorted((i for i in infos if i.key and i.key != base and not i.key.endswith("/")), key=lambda i: i.key)

    def list_folders(self, prefix: str = "") -> list[str]:
        return sorted(self._rel(p) for p in self._dir(prefix)[1])

    def list_dir(self, prefix: str = "") -> tuple[list[ObjectInfo], list[str]]:
        metas, folders = self._dir(prefix)
        base = clean_key(prefix)
        files = sorted((i for i in (self._info(m) for m in metas)
                        if i.key and i.key != base and not i.key.endswith("/")), key=lambda i: i.key)
        return files, sorted(self._rel(p) for p in folders)

    def read(self, key: str) -> bytes:
        full = self._key(key)
        scope = scopes.current()
        if scope is not None:
            kept = scope.get_object(self._sid(), full)
            if kept is ABSENT:
                raise FileNotFoundError(self.url(key))
            if kept is not None:
                return bytes(kept)
            if not scopes.is_liveness(full):
                listed = scope.covering(self._sid(), full)
                if listed is not None and not any(str(m["path"]) == full for m in listed):
                    raise FileNotFoundError(self.url(key))  # a kept listing of its folder says it is absent
        try:
            data = self._call("GET", key, lambda: bytes(obstore.get(self.store, full).bytes()))
        except FileNotFoundError:
            if scope is not None:
                scope.put_object(self._sid(), full, ABSENT)  # this GET's answer, until our write or the lock
            raise
        if scope is not None:
            scope.put_object(self._sid(), full, data)
        return data

    def read_versioned(self, key: str) -> tuple[bytes, ObjectInfo]:
        full = self._key(key)

        def run() -> tuple[bytes, ObjectInfo]:
            result = obstore.get(self.store, full)
            return bytes(result.bytes()), self._info(dict(result.meta))

        return self._call("GET", key, run)

    def read_range(self, key: str, start: int, end: int) -> bytes:
        full = self._key(key)
        if end <= start:
            return b""
        return self._call("GET", key, lambda: bytes(obstore.get_range(self.store, full, start=start, end=end)))

    def read_suffix(self, key: str, n: int) -> tuple[bytes, int]:
        if not self.suffix_ranges:
            return super().read_suffix(key, n)  # HEAD, then GET of the last n bytes
        full = self._key(key)

        def run() -> tuple[bytes, int]:  # Range: bytes=-n — the tail without knowing the size first
            result = obstore.get(self.store, full, options={"range": {"suffix": max(1, n)}})
            return bytes(result.bytes()), int(result.meta["size"])

        return self._call("GET", key, run)

    def head(self, key: str) -> ObjectInfo | None:
        full = self._key(key)
        scope = scopes.current()
        listed = scope.covering(self._sid(), full) if scope is not None else None
        if listed is not None:  # a kept listing of an enclosing folder answers (our own writes dropped it)
            found = [m for m in listed if str(m["path"]) == full]
            return self._info(found[0]) if found else None
        try:
            meta = self._call("HEAD", key, lambda: obstore.head(self.store, full))
        except FileNotFoundError:
            return None
        return self._info(dict(meta))

    # -- writes ----------------------------------------------------------------------------
    def _put(self, key: str, data: bytes, mode: Any) -> ObjectInfo:
        full = self._key(key)
        try:
            result = self._call("PUT", key, lambda: obstore.put(self.store, full, data, mode=mode))
        except ConflictError:
            raise  # a conditional PUT refused: nothing changed
        except BaseException:
            scopes.changed(self._sid(), full)  # it may or may not have been written: forget both
            raise
        scopes.changed(self._sid(), full, {"path": full, "size": len(data), "e_tag": result.get("e_tag"),
                                           "last_modified": datetime.now(UTC)})
        return ObjectInfo(clean_key(key), len(data), str(result.get("e_tag") or ""))

    def write(self, key: str, data: bytes) -> ObjectInfo:
        return self._put(key, data, "overwrite")

    def create(self, key: str, data: bytes) -> ObjectInfo:
        return self._put(key, data, "create")

    def replace(self, key: str, data: bytes, *, expected: ObjectInfo) -> ObjectInfo:
        return self._put(key, data, {"e_tag": expected.etag})

    def delete(self, key: str) -> None:
        full = self._key(key)
        try:
            self._call("DELETE", key, lambda: obstore.delete(self.store, full))
        except FileNotFoundError:
            pass
        finally:
            scopes.changed(self._sid(), full)

    def delete_many(self, keys: list[str]) -> None:
        """On S3 one bulk DELETE (`DeleteObjects`) per 1,000 keys; elsewhere one DELETE per key."""
        if type(self.store).__name__ != "S3Store":
            super().delete_many(keys)
            return
        full = [self._key(k) for k in keys]
        for start in range(0, len(full), BULK_DELETE):
            chunk = full[start:start + BULK_DELETE]
            for k in chunk:
                scopes.changed(self._sid(), k)
            self._call("DELETE", keys[start], lambda chunk=chunk: obstore.delete(self.store, chunk))  # type: ignore[misc]
            for k in chunk:
                scopes.changed(self._sid(), k)

    def delete_prefix(self, prefix: str) -> int:
        """Remove every object below the folder `prefix`: one LIST, then `delete_many` (S3: one request
        per 1,000 keys)."""
        infos = self.list_files(prefix, recursive=True)
        self.delete_many([i.key for i in infos])
        return len(infos)

    # -- Parquet ---------------------------------------------------------------------------
    def arrow_filesystem(self) -> tuple[pyarrow.fs.FileSystem, str]:
        if self._arrow is None:
            fs, bucket_root = self._arrow_fs()
            self._arrow = (fs, posixpath.join(bucket_root, self.prefix) if self.prefix else bucket_root)
        return self._arrow
