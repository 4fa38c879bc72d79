"""`read_cdc`: the change stream of a table — op, before and after image of every changed record.

    read_cdc(start, end)       instants completed in (start, end], in completion order
      │  per instant I (prev = the completed instant just before I):
      │
      ├─ I wrote CDC logs (every write stat of I has `cdcStats`)          HoodieCDCInferenceCase.AS_IS
      │     DATA_BEFORE_AFTER  op, before, after read as they are
      │     DATA_BEFORE        after of "i"/"u" = the row in the snapshot as of I
      │     OP_KEY_ONLY        and before of "u"/"d" = the row in the snapshot as of prev
      │
      └─ no CDC logs (CDC off, a real Hudi table, v1 logs): inferred from the two snapshots,
         limited to the file groups I wrote (its write stats, and for a replacecommit the
         file groups it replaced):
              rows written by I (commit time = I), key absent before   → "i"  BASE_FILE_INSERT
              rows written by I, key present before                    → "u"  LOG_FILE (MOR) / base rewrite (COW)
              key present before, absent after                         → "d"  BASE_FILE_DELETE / REPLACE_COMMIT
         a record is (partition, key); equal values rewritten still count as "u", as upstream's
         LOG_FILE case does.
      │
      ▼
    op · ts_ms (I's completion time) · commit_time (I) · record_key · before · after · inferred
    sorted by completion order, then key;  schema metadata lsm_lab.cdc.inferred_instants = [...]

Compactions, log compactions and clusterings change no record (upstream's
REPLACE_COMMIT case for clustering yields nothing): they are skipped, as is an
upgrade's rewrite.  Time bounds are those of `read_incremental`, archived
instants included (their metadata is read from the LSM timeline).

A snapshot the cleaner has removed cannot be read: an instant whose before or
after image is needed from such a snapshot raises `InputError` saying that the
window reaches past what the cleaner kept, the first start that is readable, and
how to keep more (`clean(retained=...)`, Hudi's `hoodie.cleaner.commits.retained`,
a savepoint); with KEEP_LATEST_FILE_VERSIONS, which records no retained instant,
the file a clean deleted is recognised from the clean's metadata.  A CDC log that is missing from the
folder (cleaned with its slice) is not trusted: that instant is inferred, which
raises the same error when its snapshots are gone too.  A damaged CDC log is a
`CorruptFileError` naming the file.

`Table.scan_cdc` (`ChangeScan`) hands the same rows out as a stream, instant by
instant (`to_reader()`, the Arrow stream protocol, `to_polars()`, ...): memory holds one
instant's changes, not the window's.

**Schema evolution.**  Every image is given in the table's latest schema (or `columns` of it):
a before image of a row written under an older schema — from a CDC log or a snapshot — is cast by
Hudi's evolution rules (merge/evolution.py `cast_to`: promotions, nested fields added, columns added
later null), as a snapshot read casts older files.

Simplified compared with Apache Hudi: images are Arrow structs (upstream's
Spark reader gives JSON strings); `ts_ms` is the completion time (upstream
stores the instant time in the log and reports it); no Spark streaming source.

Taught in: notebooks/13_change_data_capture.ipynb
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lsm_lab import checks
from lsm_lab.errors import CorruptFileError, CorruptTableError, InputError, RetentionError
from lsm_lab.filegroup.fsview import FileSlice
from lsm_lab.filegroup.read import ReadContext
from lsm_lab.format import cdc, naming
from lsm_lab.merge import evolution, records
from lsm_lab.merge.records import COMMIT_TIME, PARTITION_PATH, RECORD_KEY
from lsm_lab.storage import paths
from lsm_lab.table import scan
from lsm_lab.table.state import TableState
from lsm_lab.table.stream import ArrowStream, check_batch_size
from lsm_lab.timeline.instant import CLEAN, CLUSTERING, COMPACTION, LOG_COMPACTION, Instant, normalize_time
from lsm_lab.timeline.instanttime import TimeLike, completion_time
from lsm_lab.timeline.metadata import iter_write_stats

INFERRED_KEY = "lsm_lab.cdc.inferred_instants"
NOT_CHANGES = frozenset({"COMPACT", "LOG_COMPACT", "CLUSTER", "UPGRADE_TO_V10"})  # operationType of rewrites
_SEP = "\x00"


def result_schema(image: pa.Schema) -> pa.Schema:
    """The columns of `read_cdc` for images of `image`'s columns."""
    img = pa.struct([pa.field(f.name, f.type, True) for f in image])
    return pa.schema([pa.field("op", pa.string(), False), pa.field("ts_ms", pa.string(), False),
                      pa.field("commit_time", pa.string(), False), pa.field("record_key", pa.string(), False),
                      pa.field("before", img), pa.field("after", img), pa.field("inferred", pa.bool_(), False)])


def is_change(state: TableState, instant: Instant) -> bool:
    """Whether a completed write instant may change records (not a compaction, clustering or upgrade)."""
    if instant.action in (COMPACTION, LOG_COMPACTION, CLUSTERING):
        return False
    op = str(state.instant_metadata(instant).get("operationType") or "").upper()
    return op not in NOT_CHANGES


def read_cdc(state: TableState, start: TimeLike | None, end: TimeLike | None = None, *, columns: Sequence[str] | None = None) -> pa.Table:
    """The change stream of instants completed in (start, end]; see the module docstring."""
    return ChangeScan(state, start, end, columns=columns).to_table()


class ChangeScan(ArrowStream):
    """`Table.scan_cdc`: the change stream handed out instant by instant (`read_cdc` is its `to_table()`).

    The bounds and columns are checked when it is made; the instants are read when it is consumed,
    one at a time, so memory holds one instant's changes (and the snapshots of the file groups that
    instant wrote), whatever the window.  Batches hold at most `batch_size` rows.  Which instants were
    inferred is known only as they are read: `inferred` after a consumption (and the `inferred`
    column of every row; `to_table()` also puts it in the schema metadata, as `read_cdc`)."""

    def __init__(self, state: TableState, start: TimeLike | None, end: TimeLike | None = None, *,
                 columns: Sequence[str] | None = None, batch_size: int = 65_536) -> None:
        self.batch_size = check_batch_size(batch_size)
        columns = checks.columns_arg(columns)
        self.state = state
        self.lo = state.resolve_time(start)
        self.hi = state.resolve_time(end) or state.latest_completion()
        schema = state.schema or pa.schema([])
        full = state.read_context().full_schema
        if columns is None:
            self.image = schema
        else:
            unknown = [c for c in columns if c not in full.names]
            if unknown:
                raise InputError(f"unknown column{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}; "
                                 f"the table has {', '.join(full.names)}")
            self.image = pa.schema([full.field(c) for c in columns])
        self.inferred: list[str] = []

    def __repr__(self) -> str:
        return f"ChangeScan(start={self.lo!r}, end={self.hi!r}, columns={self.image.names})"

    @property
    def schema(self) -> pa.Schema:
        """The schema of every batch (`result_schema` of the image columns)."""
        return result_schema(self.image)

    def instant_tables(self) -> Iterator[pa.Table]:
        """The changes of each instant in (start, end], in completion order (instants with none skipped)."""
        state, lo, hi, image = self.state, self.lo, self.hi, self.image
        self.inferred = []
        prev: Instant | None = None
        snap = _Snapshots(state)  # the snapshot after one instant is the one before the next: read once
        for inst in state.completed_writes():
            done = normalize_time(inst.completion_time or inst.begin_time)
            if hi is not None and done > normalize_time(hi):
                break
            if (lo is None or done > normalize_time(lo)) and is_change(state, inst):
                snap.keep({prev.completion_time if prev is not None else None, inst.completion_time})
                try:
                    rows, was_inferred = _instant_changes(state, inst, prev, image, snap)
                except (CorruptTableError, RetentionError) as exc:
                    raise _past_cleaner(state, inst, exc) or exc from None
                if was_inferred:
                    self.inferred.append(inst.begin_time)
                if rows.num_rows:
                    yield rows
            prev = inst

    def batches(self) -> Iterator[pa.RecordBatch]:
        """The change rows in `read_cdc`'s order, at most `batch_size` per batch."""
        schema = self.schema
        for rows in self.instant_tables():
            for batch in rows.cast(schema).to_batches(max_chunksize=self.batch_size):
                if batch.num_rows:
                    yield batch

    def to_table(self) -> pa.Table:
        """Every change in one `pyarrow.Table`: `read_cdc`."""
        pieces = list(self.instant_tables())
        out = pa.concat_tables(pieces) if pieces else self.schema.empty_table()
        return out.replace_schema_metadata({INFERRED_KEY: json.dumps(self.inferred)})


# --------------------------------------------------------------------------- one instant
def _instant_changes(state: TableState, inst: Instant, prev: Instant | None, image: pa.Schema,
                     snap: _Snapshots) -> tuple[pa.Table, bool]:
    meta = state.instant_metadata(inst)
    stats = iter_write_stats(meta)
    if not stats and not meta.get("partitionToReplaceFileIds"):
        return result_schema(image).empty_table(), False  # wrote and replaced no file: changed nothing
    logs = _cdc_logs(state, stats)
    if logs is None:
        return _inferred(state, inst, prev, image, meta, stats, snap), True
    return _from_logs(state, inst, prev, image, logs, snap), False


def _cdc_logs(state: TableState, stats: list[dict[str, Any]]) -> list[tuple[str, str, Any]] | None:
    """(partition, file id, path) of the instant's CDC logs; None when it has none to trust (infer instead).

    Trusted: every write stat has `cdcStats`, each names a native Parquet CDC log, and each is on disk."""
    if not stats or not all(isinstance(s.get("cdcStats"), dict) for s in stats):
        return None
    out = []
    for s in stats:
        for rel in s["cdcStats"]:
            partition, name = paths.data_file(rel, field="partitionToWriteStats.cdcStats")
            parsed = naming.parse(name)
            if parsed is None or parsed.content != "cdc" or parsed.log_format != 2 or parsed.ext != "parquet":
                return None  # upstream's v1 CDC logs (Avro blocks): not read, the instant is inferred
            path = state.path / partition / name if partition else state.path / name
            if not path.exists():
                return None  # cleaned with its slice (or lost): infer, which needs the snapshots
            out.append((partition, str(s.get("fileId") or ""), path))
    return out


def _images(arr: pa.ChunkedArray | pa.Array, image: pa.Schema) -> pa.Array:
    """Struct images (any fields) → structs of `image`'s fields (absent fields null, null structs kept)."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks else pa.array([], arr.type)
    target = pa.struct([pa.field(f.name, f.type, True) for f in image])
    names = [arr.type.field(i).name for i in range(arr.type.num_fields)] if pa.types.is_struct(arr.type) else []
    children = []
    for f in image:
        if f.name in names:
            child = pc.struct_field(arr, [names.index(f.name)])
            # written under an older schema: read in the latest one by Hudi's evolution rules (a long beyond
            # 2^53 as a double rounds as Java's readers do, a struct gains fields, ...: merge/evolution.py)
            children.append(evolution.cast_to(child, f.type) if child.type != f.type else child)
        else:
            children.append(pa.nulls(len(arr), f.type))
    if not children:
        return pa.array([None if v else {} for v in arr.is_null().to_pylist()], target) if len(arr) else \
            pa.array([], target)
    return pa.StructArray.from_arrays(children, fields=list(target), mask=arr.is_null())


def _rows_to_images(rows: pa.Table, image: pa.Schema) -> pa.Array:
    struct = pa.StructArray.from_arrays([c.combine_chunks() for c in rows.columns], fields=list(rows.schema)) \
        if rows.num_rows and rows.num_columns else pa.array([{}] * rows.num_rows, pa.struct([]))
    return _images(struct, image)


def _finish(inst: Instant, ops: pa.Array, keys: pa.Array, before: pa.Array, after: pa.Array, image: pa.Schema,
            inferred: bool, order: pa.Array | None = None) -> pa.Table:
    n = len(ops)
    table = pa.table({
        "op": ops, "ts_ms": pa.repeat(pa.scalar(inst.completion_time or inst.begin_time, pa.string()), n),
        "commit_time": pa.repeat(pa.scalar(inst.begin_time, pa.string()), n), "record_key": keys,
        "before": before, "after": after, "inferred": pa.repeat(pa.scalar(inferred), n),
        "_order": order if order is not None else pa.repeat(pa.scalar("", pa.string()), n),
    })
    return table.cast(_with_order(result_schema(image)))


def _with_order(schema: pa.Schema) -> pa.Schema:
    return schema.append(pa.field("_order", pa.string(), False))


def _sorted(pieces: list[pa.Table], image: pa.Schema) -> pa.Table:
    """One instant's rows by key (then partition), without the helper column."""
    if not pieces:
        return result_schema(image).empty_table()
    out = pa.concat_tables(pieces).sort_by([("record_key", "ascending"), ("_order", "ascending")])
    return out.drop_columns(["_order"])


class _Snapshots:
    """Rows of one file group as of a time (the snapshots that fill images and that inference compares).

    Kept for the read times of the instant at hand only (`keep`): the snapshot
    after one instant is the one before the next, so each is read once."""

    def __init__(self, state: TableState) -> None:
        self.state = state
        self._slices: dict[tuple[str | None, str], dict[str, FileSlice]] = {}
        self._ctx: dict[str | None, ReadContext] = {}
        self._rows: dict[tuple[str | None, str, str], pa.Table] = {}

    def keep(self, read_times: set[str | None]) -> None:
        """Forget every snapshot not as of one of `read_times`."""
        self._slices = {k: v for k, v in self._slices.items() if k[0] in read_times}
        self._ctx = {k: v for k, v in self._ctx.items() if k in read_times}
        self._rows = {k: v for k, v in self._rows.items() if k[0] in read_times}

    def rows(self, read_time: str | None, partition: str, file_id: str) -> pa.Table:
        if read_time is None:
            return self.ctx(None).full_schema.empty_table()
        key = (read_time, partition)
        if key not in self._slices:
            self._slices[key] = {fs.file_id: fs for fs in self.state.latest_slices(completion_time(read_time),
                                                                                   partitions=[partition])}
        fs = self._slices[key].get(file_id)
        ctx = self.ctx(read_time)
        if fs is None:
            return ctx.full_schema.empty_table()
        if (read_time, partition, file_id) not in self._rows:
            self._rows[(read_time, partition, file_id)] = scan.snapshot(ctx, [fs])
        return self._rows[(read_time, partition, file_id)]

    def ctx(self, read_time: str | None) -> ReadContext:
        if read_time not in self._ctx:
            self._ctx[read_time] = self.state.read_context(completion_time(read_time))  # the snapshot after an instant
        return self._ctx[read_time]


_KEEP_MORE = ("keep more history before the next clean: clean(retained=N) with a larger N (Hudi: "
              "hoodie.cleaner.commits.retained; hoodie.cleaner.fileversions.retained for KEEP_LATEST_FILE_VERSIONS), "
              "or savepoint() an instant to keep its snapshot")


def _retained(state: TableState, inst: Instant, read_time: str | None, what: str) -> None:
    try:
        state.check_retained(completion_time(read_time))
    except InputError as exc:
        kept = re.search(r"snapshots from (\d+) on", exc.message)
        since = f"from {kept.group(1)} on" if kept else "from a later time on"
        raise InputError(f"read_cdc: the window reaches past what the cleaner kept: the changes of instant "
                         f"{inst.begin_time} need its {what} image, the snapshot as of {read_time}, but the cleaner "
                         f"kept only the snapshots {since}. Start the window later (a start at or after "
                         f"{kept.group(1) if kept else 'the first retained snapshot'} is readable), or {_KEEP_MORE}") from None


def _past_cleaner(state: TableState, inst: Instant, exc: CorruptTableError | RetentionError) -> RetentionError | None:
    """The error to raise when the changes of `inst` needed a file that a completed clean deleted (None: not so).

    A clean that keeps file versions (KEEP_LATEST_FILE_VERSIONS) records no earliest retained
    instant, so `check_retained` cannot refuse the window beforehand: the snapshot read finds a
    committed file gone, and `TableState.cleaned_by` names the clean that deleted it."""
    if isinstance(exc, RetentionError):
        name, clean_time, policy = exc.file, exc.clean, exc.policy
        clean = next((c for c in state.active_timeline.completed([CLEAN]) if c.begin_time == clean_time), None)
    else:
        found = state.cleaned_by(exc.path)
        if found is None:
            return None
        clean, policy = found
        name = posixpath.basename(str(exc.path or "").replace("\\", "/"))
    since = (clean.completion_time or clean.begin_time) if clean is not None else "the clean"
    return RetentionError(f"read_cdc: the window reaches past what the cleaner kept: the changes of instant "
                          f"{inst.begin_time} need the file {name}, which the clean "
                          f"{clean.begin_time if clean is not None else ''} deleted ({policy}). Start the window "
                          f"later (a start at or after {since} is readable), or {_KEEP_MORE}",
                          file=name, clean=clean.begin_time if clean is not None else "", policy=policy)


def _lookup(snap: _Snapshots, read_time: str | None, partition: str, file_id: str, keys: pa.Array,
            image: pa.Schema) -> pa.Array:
    """Images of `keys` in one file group's snapshot (null where the key is absent)."""
    rows = snap.rows(read_time, partition, file_id)
    rows = rows.filter(pc.is_in(rows.column(RECORD_KEY), value_set=keys))  # images of these rows only
    pos = pc.index_in(keys, value_set=rows.column(RECORD_KEY).combine_chunks())
    return _rows_to_images(rows, image).take(pos)


def _from_logs(state: TableState, inst: Instant, prev: Instant | None, image: pa.Schema,
               logs: list[tuple[str, str, Any]], snap: _Snapshots) -> pa.Table:
    after_time = inst.completion_time
    before_time = prev.completion_time if prev is not None else None
    pieces = []
    for partition, file_id, path in logs:
        mode, rows, _ = cdc.read_cdc_log(path)
        ops = rows.column(cdc.OP).combine_chunks()
        if mode == cdc.DATA_BEFORE_AFTER:
            keys = pc.coalesce(_key_of(rows.column(cdc.AFTER)), _key_of(rows.column(cdc.BEFORE)))
            if keys.null_count:
                raise CorruptFileError("damaged CDC log: a DATA_BEFORE_AFTER row has no _hoodie_record_key in "
                                       "either image", path=path)
            before = _images(rows.column(cdc.BEFORE), image)
            after = _images(rows.column(cdc.AFTER), image)
        else:
            keys = rows.column(cdc.RECORD_KEY).combine_chunks()
            if mode == cdc.DATA_BEFORE:
                before = _images(rows.column(cdc.BEFORE), image)
            else:
                _retained(state, inst, before_time, "before")
                found = _lookup(snap, before_time, partition, file_id, keys, image)
                before = pc.if_else(pc.equal(ops, cdc.INSERT), pa.nulls(len(keys), found.type), found)
            _retained(state, inst, after_time, "after")
            found = _lookup(snap, after_time, partition, file_id, keys, image)
            after = pc.if_else(pc.equal(ops, cdc.DELETE), pa.nulls(len(keys), found.type), found)
        order = pa.repeat(pa.scalar(partition, pa.string()), len(keys))
        pieces.append(_finish(inst, ops, keys, before, after, image, False, order))
    return _sorted(pieces, image)


def _key_of(col: pa.ChunkedArray) -> pa.Array:
    """The `_hoodie_record_key` field of a column of images (nulls when the images have none)."""
    arr = col.combine_chunks() if col.num_chunks else pa.array([], col.type)
    t = arr.type
    for i in range(t.num_fields):
        if t.field(i).name == RECORD_KEY and pa.types.is_string(t.field(i).type):
            return pc.if_else(arr.is_null(), pa.scalar(None, pa.string()), pc.struct_field(arr, [i]))
    return pa.nulls(len(arr), pa.string())


def _inferred(state: TableState, inst: Instant, prev: Instant | None, image: pa.Schema, meta: dict[str, Any],
              stats: list[dict[str, Any]], snap: _Snapshots) -> pa.Table:
    groups = {(str(s.get("partitionPath") or ""), str(s.get("fileId") or "")) for s in stats}
    for partition, ids in (meta.get("partitionToReplaceFileIds") or {}).items():
        groups |= {(partition, str(fid)) for fid in ids or []}
    if not groups:
        return result_schema(image).empty_table()
    before_time = prev.completion_time if prev is not None else None
    after_time = inst.completion_time
    _retained(state, inst, before_time, "before")
    _retained(state, inst, after_time, "after")
    olds, news = [], []
    for partition, file_id in sorted(groups):
        olds.append(snap.rows(before_time, partition, file_id))
        news.append(snap.rows(after_time, partition, file_id))
    old = _concat(olds, snap.ctx(before_time).full_schema)
    new = _concat(news, snap.ctx(after_time).full_schema)
    old_id = _identity(old)
    new_id = _identity(new)
    written = pc.equal(new.column(COMMIT_TIME), inst.begin_time)
    if new.column(COMMIT_TIME).null_count:  # a table without meta fields: changed values tell
        at = pc.index_in(new_id, value_set=old_id)
        users = [c for c in new.column_names if not c.startswith("_hoodie_") and c in old.column_names]
        differs = pc.or_(pc.is_null(at), _differ(new, old.take(pc.fill_null(at, 0)) if old.num_rows else new, users))
        written = pc.if_else(pc.is_null(new.column(COMMIT_TIME)), differs, written)
    changed = new.filter(written)
    changed_id = new_id.filter(written)
    touched = old.filter(pc.is_in(old_id, value_set=changed_id))  # the before images of updates only
    pos = pc.index_in(changed_id, value_set=_identity(touched))
    ops_up = pc.if_else(pc.is_valid(pos), pa.scalar(cdc.UPDATE), pa.scalar(cdc.INSERT))
    up = _finish(inst, ops_up, changed.column(RECORD_KEY).combine_chunks(), _rows_to_images(touched, image).take(pos),
                 _rows_to_images(changed, image), image, True, changed.column(PARTITION_PATH).combine_chunks())
    removed = old.filter(pc.invert(pc.is_in(old_id, value_set=new_id)))
    removed_images = _rows_to_images(removed, image)
    down = _finish(inst, pa.repeat(pa.scalar(cdc.DELETE), removed.num_rows),
                   removed.column(RECORD_KEY).combine_chunks(), removed_images,
                   pa.nulls(removed.num_rows, removed_images.type), image, True,
                   removed.column(PARTITION_PATH).combine_chunks())
    return _sorted([up, down], image)


def _differ(a: pa.Table, b: pa.Table, names: list[str]) -> pa.ChunkedArray | pa.Array:
    """Row by row: whether any of `names` differs between `a` and `b` (two nulls are equal)."""
    out = pa.repeat(pa.scalar(False), a.num_rows)
    for name in names:
        x, y = a.column(name), b.column(name)
        try:
            same = pc.fill_null(pc.equal(x, y), False)
        except pa.ArrowNotImplementedError:  # nested values have no comparison kernel: counted as changed
            same = pa.repeat(pa.scalar(False), a.num_rows)
        same = pc.or_(same, pc.and_(pc.is_null(x), pc.is_null(y)))
        out = pc.or_(out, pc.invert(same))
    return out


def _concat(tables: list[pa.Table], schema: pa.Schema) -> pa.Table:
    return pa.concat_tables([records.conform(t, schema) for t in tables]) if tables else schema.empty_table()


def _identity(rows: pa.Table) -> pa.Array:
    """partition + NUL + key: what makes a record one record across file groups."""
    return pc.binary_join_element_wise(rows.column(PARTITION_PATH).combine_chunks().fill_null(""),
                                       rows.column(RECORD_KEY).combine_chunks(), _SEP)


__all__ = ["INFERRED_KEY", "ChangeScan", "is_change", "read_cdc", "result_schema"]
