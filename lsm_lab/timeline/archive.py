"""The LSM timeline: archived instants as levels of Parquet files under `.hoodie/timeline/history/`.

The active timeline is one small file per instant state; a table that lives
long would list thousands of them on every read.  Hudi 1.x therefore moves old
completed instants into an LSM tree of Parquet files — the same idea as the
data layout, applied to the timeline itself:

    .hoodie/timeline/history/
      _version_                          "7"        the current manifest (replaced atomically)
      manifest_7                         {"files": [{"fileName": "2026…001_2026…300_1.parquet", "fileLen": 9120},
                                                    {"fileName": "2026…301_2026…355_0.parquet", "fileLen": 2210}]}
      2026…001_2026…300_1.parquet        level 1: ten level-0 files compacted into one
      2026…301_2026…355_0.parquet        level 0: one archival run
        rows: instantTime | completionTime | action | metadata (bytes) | plan (bytes, optional) | version

A reader reads `_version_`, then that manifest, then the Parquet files it lists
(only three string columns for the list of instants; the metadata bytes of one
instant are read when asked for).  A writer never changes a file: it writes new
Parquet files and a new manifest, and the commit point is the atomic
replacement of `_version_`.  Files no manifest names any more are deleted
afterwards; a reader that raced with that deletion simply reads again.

    archive run:  new L0 file ─► manifest_{N+1} = manifest_N + file ─► _version_ := N+1
    compaction:   level L holds 10 files ─► merge them into one level L+1 file
                  ─► manifest_{N+1} without them, with it ─► _version_ := N+1 ─► delete the 10 files

`metadata` holds the bytes of the instant's completed file and `plan` the plan
upstream archives with it (`PLAN_STATES`, after `MetadataConversionUtils.createLSMTimelineInstant`:
clean, (log) compaction, clustering and replacecommit only), so both are upstream's
Avro records wherever the instant files are.  `rewrite` re-encodes rows crash-safely
(one new file, one new manifest) for `lsm-lab upgrade --instants-only`.

Archived instants keep their completion times, so time travel, incremental
reads and the file-system view (which needs the completion time of every
instant that wrote a file) work across the archive: `Table.completed_writes()`
merges the two timelines.

Simplified compared with Apache Hudi: no per-file min/max instant pruning on
read (every listed file's instant columns are read, then cached per manifest
version), the `version` column is lsm_lab's row format version (1), and
table version 6's `.hoodie/archived` Avro log format is not read here.

Taught in: notebooks/02_timeline.ipynb
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, cast

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lsm_lab.errors import CorruptFileError, CorruptTableError, TimelineError
from lsm_lab.storage import StoragePath, TablePath, as_path, atomic, list_names, paths
from lsm_lab.timeline.config import TableConfig
from lsm_lab.timeline.instant import (
    CLEAN,
    CLUSTERING,
    COMPACTION,
    LOG_COMPACTION,
    REPLACE_COMMIT,
    Instant,
    State,
    normalize_time,
)
from lsm_lab.timeline.metadata import check_paths, decode_instant_content

VERSION_FILE = "_version_"
MANIFEST_PREFIX = "manifest_"
ROW_VERSION = 1
DEFAULT_BATCH = 10  # files per level before the level is compacted into the next (Hudi's default)
ARCHIVED_PREFIX = "archived:"

SCHEMA = pa.schema([
    pa.field("instantTime", pa.string(), nullable=False),
    pa.field("completionTime", pa.string()),
    pa.field("action", pa.string()),
    pa.field("metadata", pa.binary()),
    pa.field("plan", pa.binary()),
    pa.field("version", pa.int32()),
])
# actions whose plan upstream keeps in the history's `plan` column, and the states it is read from (the last
# non-empty one wins: an insert overwrite's inflight commit metadata over its requested file), as
# `MetadataConversionUtils.createLSMTimelineInstant` does; other actions archive no plan
PLAN_STATES = {CLEAN: (State.REQUESTED,), COMPACTION: (State.REQUESTED,), LOG_COMPACTION: (State.REQUESTED,),
               CLUSTERING: (State.REQUESTED,), REPLACE_COMMIT: (State.REQUESTED, State.INFLIGHT)}


_FILE = re.compile(r"^(\d{14,17})_(\d{14,17})_(\d+)\.parquet$")

_cache: dict[tuple[str, int, int], list[ArchivedRow]] = {}
_cache_guard = threading.Lock()


def _read_parquet(path: TablePath, **options: Any) -> pa.Table:
    """Read an LSM timeline file, page checksums verified; a damaged file is a `CorruptFileError`."""
    try:
        data = path.read_bytes()  # the whole (small) file: one read, or one GET on an object store
        return pq.read_table(pa.BufferReader(data), page_checksum_verification=True, **options)
    except FileNotFoundError:
        raise
    except (pa.ArrowException, ValueError, OSError) as exc:
        raise CorruptFileError(f"cannot read LSM timeline file: {exc}", path=path) from None


@dataclass(frozen=True)
class ArchivedRow:
    """One archived instant as listed (its bytes stay in the file until asked for)."""

    begin_time: str
    completion_time: str | None
    action: str
    file: str

    def instant(self) -> Instant:
        return Instant.make(self.begin_time, self.action, State.COMPLETED, self.completion_time,
                            ARCHIVED_PREFIX + self.file)


def parse_file_name(name: str) -> tuple[str, str, int] | None:
    """(min instant, max instant, level) of an LSM timeline file name, or None."""
    m = _FILE.match(name)
    return (m.group(1), m.group(2), int(m.group(3))) if m else None


def is_archived(instant: Instant) -> bool:
    return instant.file_name.startswith(ARCHIVED_PREFIX)


class ArchivedTimeline:
    """Read and write one table's LSM timeline (callers hold the table lock to write)."""

    def __init__(self, base_path: str | os.PathLike[str] | StoragePath, config: TableConfig) -> None:
        self.base_path = as_path(base_path)
        self.config = config
        meta = self.base_path / ".hoodie"
        timeline = meta / config.props.get("hoodie.timeline.path", "timeline")
        self.folder = timeline / config.props.get("hoodie.timeline.history.path", "history")
        paths.inside(self.base_path, self.folder, field="hoodie.timeline.history.path",  # no symlink out
                     file=meta / "hoodie.properties")
        self.supported = config.timeline_layout >= 2

    # ------------------------------------------------------------------ manifests
    def current_version(self) -> int:
        """The manifest version `_version_` names (0: nothing archived yet)."""
        path = self.folder / VERSION_FILE
        try:
            text = path.read_text(encoding="utf-8").strip()
        except (FileNotFoundError, NotADirectoryError):  # (NotADirectoryError: a file where the folder belongs)
            return self._latest_manifest_on_disk()
        try:
            return int(text)
        except ValueError:
            raise CorruptFileError(f"{VERSION_FILE} holds {text!r}, not a version number", path=path) from None

    def _latest_manifest_on_disk(self) -> int:
        versions = [int(n[len(MANIFEST_PREFIX):]) for n in list_names(self.folder)
                    if n.startswith(MANIFEST_PREFIX) and n[len(MANIFEST_PREFIX):].isdigit()]
        return max(versions, default=0)

    def manifest(self, version: int | None = None) -> list[dict[str, Any]]:
        """The `files` entries of a manifest (`[{"fileName": ..., "fileLen": ...}]`)."""
        version = self.current_version() if version is None else version
        if version == 0:
            return []
        path = self.folder / f"{MANIFEST_PREFIX}{version}"
        try:
            content = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise TimelineError(f"manifest version {version} is missing", path=path) from None
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:  # JSONDecodeError is a ValueError
            raise CorruptFileError(f"manifest is not JSON: {str(exc)[:200]}", path=path) from None
        files = content.get("files") if isinstance(content, dict) else None
        if not isinstance(files, list):
            raise CorruptFileError("manifest has no 'files' list", path=path)
        for i, entry in enumerate(files):  # the path guard: names of LSM timeline files in this folder only
            name = entry.get("fileName") if isinstance(entry, dict) else None
            if not isinstance(name, str) or parse_file_name(name) is None:
                raise CorruptTableError(f"{name!r} is not an LSM timeline file name", path=path,
                                        field=f"files[{i}].fileName")
        return files

    def files(self) -> list[str]:
        return [str(f["fileName"]) for f in self.manifest()]

    # ------------------------------------------------------------------ reading
    def rows(self) -> list[ArchivedRow]:
        """Every archived instant, in reader order (completion time, then begin time)."""
        if not self.supported:
            return []  # (a missing folder: no `_version_` and an empty listing say it, see current_version)
        for attempt in range(5):
            version = self.current_version()
            if version == 0:
                return []
            try:
                stamp = (self.folder / VERSION_FILE).stat().st_mtime_ns
            except FileNotFoundError:
                stamp = 0
            key = (str(self.folder), version, stamp)
            with _cache_guard:
                hit = _cache.get(key)
            if hit is not None:
                return hit
            try:
                rows = self._read_rows(version)
            except FileNotFoundError:
                if attempt == 4:
                    raise
                continue  # a compaction removed a file after a newer manifest named its replacement
            with _cache_guard:
                if len(_cache) > 64:
                    _cache.clear()
                _cache[key] = rows
            return rows
        return []  # pragma: no cover

    def _read_rows(self, version: int) -> list[ArchivedRow]:
        seen: dict[str, ArchivedRow] = {}
        for entry in self.manifest(version):
            name = str(entry["fileName"])
            path = self.folder / name
            table = _read_parquet(path, columns=["instantTime", "completionTime", "action"])
            for begin, done, action in zip(*(table.column(c).to_pylist()
                                             for c in ("instantTime", "completionTime", "action"))):
                if not paths.is_instant_time(begin) or (done is not None and not paths.is_instant_time(done)):
                    raise CorruptTableError(f"instant {begin!r} completed at {done!r}: not instant times",
                                            path=path, field="instantTime")
                if done is not None and normalize_time(done) < normalize_time(begin):
                    raise CorruptTableError(f"completion time {done} is before begin time {begin}", path=path,
                                            field="completionTime")
                seen[begin] = ArchivedRow(begin, done, action, name)
        return sorted(seen.values(), key=lambda r: (normalize_time(r.completion_time or r.begin_time),
                                                    normalize_time(r.begin_time)))

    def instants(self) -> list[Instant]:
        return [r.instant() for r in self.rows()]

    def _bytes(self, begin_time: str, column: str) -> bytes | None:
        for row in self.rows():
            if row.begin_time == begin_time:
                table = _read_parquet(self.folder / row.file, columns=["instantTime", column],
                                      filters=pc.field("instantTime") == begin_time)
                if table.num_rows == 0:
                    break
                value = table.column(column)[table.num_rows - 1].as_py()
                return cast("bytes | None", value)
        return None

    def read_metadata(self, begin_time: str) -> dict[str, Any]:
        """The completed metadata of an archived instant, decoded (JSON or Avro)."""
        if not any(r.begin_time == begin_time for r in self.rows()):
            raise TimelineError(f"no archived instant {begin_time}", path=self.folder)
        data = self._bytes(begin_time, "metadata") or b""
        content = decode_instant_content(data, path=str(self.folder))
        action = next(r.action for r in self.rows() if r.begin_time == begin_time)
        check_paths(content, action=action, requested=False, path=str(self.folder))  # the path guard
        return content

    def read_metadata_many(self, begin_times: Iterable[str]) -> dict[str, dict[str, Any]]:
        """Completed metadata of many archived instants, reading each Parquet file once."""
        wanted = set(begin_times)
        by_file: dict[str, set[str]] = {}
        for row in self.rows():
            if row.begin_time in wanted:
                by_file.setdefault(row.file, set()).add(row.begin_time)
        out: dict[str, dict[str, Any]] = {}
        actions = {r.begin_time: r.action for r in self.rows()}
        for name, times in by_file.items():
            table = _read_parquet(self.folder / name, columns=["instantTime", "metadata"])
            for begin, data in zip(table.column("instantTime").to_pylist(), table.column("metadata").to_pylist()):
                if begin in times:
                    out[begin] = decode_instant_content(data or b"", path=str(self.folder / name))
                    check_paths(out[begin], action=actions[begin], requested=False, path=str(self.folder / name))
        return out

    def read_plan(self, begin_time: str) -> dict[str, Any] | None:
        data = self._bytes(begin_time, "plan")
        return decode_instant_content(data, path=str(self.folder)) if data else None

    # ------------------------------------------------------------------ writing (table lock held)
    def _write_parquet(self, rows: list[dict[str, Any]], level: int) -> dict[str, Any]:
        rows = sorted(rows, key=lambda r: normalize_time(r["instantTime"]))
        name = f"{rows[0]['instantTime']}_{rows[-1]['instantTime']}_{level}.parquet"
        table = pa.Table.from_pylist(rows, schema=SCHEMA)
        target = self.folder / name
        sink = pa.BufferOutputStream()  # an archive file is small: built in memory, written in one go
        pq.write_table(table, sink, compression="snappy", write_page_checksum=True)
        data = sink.getvalue().to_pybytes()
        atomic.replace_file(target, data)  # a retry after a crash rewrites the same name
        return {"fileName": name, "fileLen": len(data)}

    def _commit(self, files: list[dict[str, Any]]) -> int:
        """Write manifest N+1 and point `_version_` at it (the commit point)."""
        version = self.current_version() + 1
        manifest = self.folder / f"{MANIFEST_PREFIX}{version}"
        atomic.replace_file(manifest, json.dumps({"files": files}, indent=2).encode("utf-8"), fsync=False)
        atomic.replace_file(self.folder / VERSION_FILE, str(version).encode("utf-8"), fsync=False)
        return version

    def append(self, rows: Iterable[Mapping[str, Any]]) -> list[str]:
        """Archive `rows` (schema `SCHEMA`) as one new level-0 file; instants already archived are skipped."""
        if not self.supported:
            raise TimelineError("table version 6 keeps its archive in .hoodie/archived, which lsm_lab does not "
                                "write", path=self.folder)
        known = {r.begin_time for r in self.rows()}
        fresh = [dict(r) for r in rows if r["instantTime"] not in known]
        if not fresh:
            return []
        paths.make_folders(self.folder)  # never through a link out of the table
        for r in fresh:
            r.setdefault("version", ROW_VERSION)
        entry = self._write_parquet(fresh, 0)
        self._commit([*self.manifest(), entry])
        return [r["instantTime"] for r in fresh]

    def compact(self, batch_size: int = DEFAULT_BATCH) -> int:
        """Merge every level holding `batch_size` files into one file of the next level; returns merges done."""
        if batch_size < 2:
            raise TimelineError("the LSM timeline compaction batch size must be at least 2")
        merges = 0
        while True:
            entries = self.manifest()
            by_level: dict[int, list[dict[str, Any]]] = {}
            for e in entries:
                parsed = parse_file_name(str(e["fileName"]))
                if parsed is not None:
                    by_level.setdefault(parsed[2], []).append(e)
            full = sorted(lvl for lvl, es in by_level.items() if len(es) >= batch_size)
            if not full:
                break
            level = full[0]
            group = sorted(by_level[level], key=lambda e: parse_file_name(str(e["fileName"])) or ("", "", 0))[:batch_size]
            tables = [_read_parquet(self.folder / str(e["fileName"])) for e in group]
            merged = pa.concat_tables([t.cast(SCHEMA) for t in tables])
            # one row per instant (a crash may have archived an instant twice)
            latest: dict[str, dict[str, Any]] = {}
            for row in merged.to_pylist():
                latest[row["instantTime"]] = row
            entry = self._write_parquet(list(latest.values()), level + 1)
            names = {str(e["fileName"]) for e in group}
            self._commit([e for e in entries if str(e["fileName"]) not in names] + [entry])
            merges += 1
        self.clean()
        return merges

    def rewrite(self, change: Callable[[dict[str, Any]], dict[str, Any] | None]) -> int:
        """Re-encode rows in place of meaning (`change(row)`: the new row, or None to keep it); returns rows changed.

        Crash-safe as every other history change: when any row changes, all rows go into one new file a
        level above the highest (a name no live file has), then one new manifest lists only that file (the
        commit point), then the old files are deleted.  A kill before the manifest leaves an unlisted file
        that `clean` removes; the table lock is the caller's.
        """
        entries = self.manifest()
        if not entries:
            return 0
        rows: list[dict[str, Any]] = []
        changed = 0
        for e in entries:
            for row in _read_parquet(self.folder / str(e["fileName"])).cast(SCHEMA).to_pylist():
                new = change(dict(row))
                changed += new is not None
                rows.append(row if new is None else new)
        if not changed:
            return 0
        latest: dict[str, dict[str, Any]] = {r["instantTime"]: r for r in rows}  # one row per instant
        top = max((parse_file_name(str(e["fileName"])) or ("", "", 0))[2] for e in entries)
        entry = self._write_parquet(list(latest.values()), top + 1)
        self._commit([entry])
        self.clean()
        return changed

    def clean(self, keep_manifests: int = 3) -> None:
        """Delete Parquet files no manifest names and all but the last few manifests."""
        names = list_names(self.folder)
        if not names:
            return
        version = self.current_version()
        live = set(self.files())
        for name in names:
            if parse_file_name(name) is not None and name not in live:
                paths.unlink(self.folder / name)
            elif name.startswith(MANIFEST_PREFIX) and name[len(MANIFEST_PREFIX):].isdigit():
                if int(name[len(MANIFEST_PREFIX):]) <= version - keep_manifests:
                    paths.unlink(self.folder / name)


__all__ = ["PLAN_STATES", "SCHEMA", "ArchivedRow", "ArchivedTimeline", "is_archived", "parse_file_name"]
