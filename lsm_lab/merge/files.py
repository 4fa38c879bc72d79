"""Merging sorted Parquet runs into one sorted Parquet file (``lsm-lab merge``).

This is the merge engine applied to files, as a compaction would do it:

    run 0.parquet ─iter_batches─┐
    run 1.parquet ─iter_batches─┼─▶ merge_sources(engine) ─▶ parquet_write.ParquetFileWriter ─▶ out.parquet
    run 2.parquet ─iter_batches─┘     (source index = argument order: later runs win ties)

Two pyarrow defaults would break the O(k x batch) memory bound, so they are
overridden (see the performance notes): ``ParquetFile`` is opened with
``pre_buffer=False`` and a small ``buffer_size`` (the default pre-buffers a
whole row group per input on the first batch), and output rows are buffered
into row groups of ``row_group_size`` rows by the one data-file writer
(`lsm_lab.format.parquet_write`: page checksums, key range and `sorting_columns`
in the footer, temp file then rename), which encodes on its own thread (Arrow
releases the GIL while encoding), up to `parquet_write.ENCODE_QUEUE` row groups queued.

**The first batch on the reader thread.** Each input goes to the engine as a
``RecordBatchReader`` whose schema is the footer's, so the merge never reads a
first batch of each file on the caller's thread to learn it. That peek used to
put every file's reader state for its first row group (dictionaries, page and
decompression buffers) in the main thread's malloc arena and the state for all
later row groups in the reader thread's: glibc's arenas do not lend each other
free memory, so from a file's second row group on that state was held twice
(16M rows, k = 8: peak RSS 357-380 MiB before, 297-337 after; docs/PERFORMANCE.md,
"Stop 41: merge memory").

Errors a user can make are caught up front and name the file: a missing file,
a missing key/ordering/delete column, schemas that differ, an input that is
also the output; an unsorted input is detected while streaming and reported
with the file's name.

Simplified compared with Apache Hudi: a Hudi compaction writes a new base file
for one file group from its slice, through the table's write path (file
naming, commit metadata, bloom filters); this function only merges files.

Taught in: notebooks/10_sorted_vs_hash_on_spark.ipynb
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from lsm_lab.errors import CorruptFileError, InputError, LsmLabError
from lsm_lab.format import parquet_read, parquet_write
from lsm_lab.merge import ENGINES, open_merge
from lsm_lab.merge.semantics import MergeMode, MergeSpec
from lsm_lab.progress import new_bar

_NO_DELETE = "__lsm_lab_delete__"
#: rows per batch read from each input.  The merge holds a few batches per input (the one merged, the one read
#: ahead, the rounds in flight), so its peak memory is O(k x batch), not O(rows): 65,536 until issue 33, when
#: 32,768 merged 16M rows (k = 8) with a peak RSS of 353 MiB instead of 509 MiB at the same speed (+-4%, within
#: the noise; 16,384: 273 MiB, ~10% more CPU).  benchmarks/merge_memory.py, docs/PERFORMANCE.md.
MERGE_BATCH_ROWS = 32_768
#: while merging files, Arrow's memory pool can give its freed pages back to the system (`release_unused()`;
#: on the C library's allocator, the `lsm-lab` command's (lsm_lab.allocator), that is `malloc_trim(0)`)
#: whenever the process's RSS has grown by `release_mib` MiB since the last time (RSS read every
#: `RELEASE_CHECK` output batches from /proc/self/statm; elsewhere nothing is done).  glibc keeps the pages of
#: freed batches resident in the heaps of the reader, resolver and encoder threads, so without it the peak
#: RSS creeps up with N (k = 8, 32,768-row batches: ~250 MiB at 1M rows, 370-384 at 16M, 1.5x; since stop 41,
#: which reads every input batch on the reader thread, ~240 and 297-337, 1.26-1.39x); with 32 MiB it was
#: 1.16-1.23x (281-293 MiB) but cost 1.2-1.3x the CPU: the pages given back are faulted in again (58
#: trims of ~32 MiB at 16M rows).  Off by default (the CPU bar was 1.1x); `LSM_LAB_MERGE_RELEASE_MIB` or
#: `release_mib=` turn it on.  benchmarks/merge_memory.py, docs/PERFORMANCE.md.
RELEASE_MIB = 0
RELEASE_CHECK = 8
_SOURCE_RE = re.compile(r"^source (\d+): ")


def _release_mib() -> int:
    text = os.environ.get("LSM_LAB_MERGE_RELEASE_MIB")
    try:
        return max(0, int(text)) if text else RELEASE_MIB
    except ValueError:
        raise InputError(f"LSM_LAB_MERGE_RELEASE_MIB must be a whole number of MiB, not {text!r}") from None


class _Releaser:
    """Calls `pool.release_unused()` when the RSS has grown `slack` bytes since the last call (see RELEASE_MIB)."""

    def __init__(self, slack: int) -> None:
        self.pool = pa.default_memory_pool()
        self.slack = slack
        self.page = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
        self.fd: int | None = None
        if slack > 0:
            try:
                self.fd = os.open("/proc/self/statm", os.O_RDONLY)
            except OSError:
                self.fd = None  # not Linux: nothing to read, nothing done
        self.floor = self._rss()
        self.releases = 0

    def _rss(self) -> int:
        if self.fd is None:
            return 0
        return int(os.pread(self.fd, 128, 0).split()[1]) * self.page

    def check(self) -> None:
        if self.fd is not None and self._rss() > self.floor + self.slack:
            self.pool.release_unused()
            self.releases += 1
            self.floor = self._rss()

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _open(path: Path, buffer_size: int) -> pq.ParquetFile:
    if not path.is_file():
        raise InputError("input file does not exist", path=path)
    try:
        return parquet_read.open_parquet(path, pre_buffer=False, buffer_size=buffer_size)
    except CorruptFileError as exc:
        raise InputError(f"cannot read as Parquet: {exc.message}", path=path) from None


def _check_schemas(paths: Sequence[Path], files: Sequence[pq.ParquetFile], key: str, ordering: str | None,
                   delete_column: str | None) -> pa.Schema:
    schema = files[0].schema_arrow
    for path, pf in zip(paths, files):
        s = pf.schema_arrow
        names = set(s.names)
        if key not in names:
            raise InputError(f"missing key column {key!r} (columns: {s.names})", path=path)
        ktype = s.field(key).type
        if not (pa.types.is_string(ktype) or pa.types.is_large_string(ktype)):
            raise InputError(f"key column {key!r} must be a string, not {ktype}", path=path)
        if ordering is not None and ordering not in names:
            raise InputError(f"missing ordering column {ordering!r} (columns: {s.names})", path=path)
        if delete_column is not None:
            if delete_column not in names:
                raise InputError(f"missing delete column {delete_column!r} (columns: {s.names})", path=path)
            if not pa.types.is_boolean(s.field(delete_column).type):
                raise InputError(f"delete column {delete_column!r} must be bool", path=path)
        if not s.equals(schema):
            raise InputError(f"schema differs from {paths[0]}:\n{s}\nexpected:\n{schema}", path=path)
    if _NO_DELETE in schema.names:
        raise InputError(f"column name {_NO_DELETE!r} is reserved", path=paths[0])
    return schema


def _falses(n: int) -> pa.Array:
    """n False flags, built from a zeroed bitmap (``pa.array`` would import pandas on its first call)."""
    return pa.Array.from_buffers(pa.bool_(), n, [None, pa.py_buffer(bytes((n + 7) // 8))])


def _batches(pf: pq.ParquetFile, schema: pa.Schema, batch_size: int, add_delete: bool,
             progress: Any) -> Iterator[pa.RecordBatch]:
    falses = _falses(batch_size) if add_delete else None
    for batch in pf.iter_batches(batch_size=batch_size, use_threads=False):
        if progress is not None:
            progress.update(batch.num_rows)
        if falses is not None:
            n = batch.num_rows
            flags = falses.slice(0, n) if n <= len(falses) else _falses(n)
            batch = pa.RecordBatch.from_arrays([*batch.columns, flags], schema=schema)
        yield batch


def _name_file(exc: LsmLabError, paths: Sequence[Path]) -> LsmLabError:
    """Rewrite 'source 3: ...' into an error about the file given as argument 3."""
    m = _SOURCE_RE.match(exc.message)
    if m and int(m.group(1)) < len(paths):
        return type(exc)(exc.message[m.end():], path=paths[int(m.group(1))])
    return exc


def merge_parquet_files(out_path: str | os.PathLike[str], input_paths: Sequence[str | os.PathLike[str]], *,
                        key: str, ordering: str | None = None, engine: str = "sorted",
                        delete_column: str | None = None, row_group_size: int = 131_072,
                        batch_size: int = MERGE_BATCH_ROWS, read_ahead: bool = True, buffer_size: int = 1 << 18,
                        count_comparisons: bool = False, progress: bool = False,
                        release_mib: int | None = None) -> dict[str, Any]:
    """Merge sorted Parquet runs (argument order = source order) into one file, one row per key.

    With `ordering`, event-time ordering decides (greater value wins, ties to
    the later file); without it the later file wins. With `delete_column`,
    rows flagged True are deletes and that column is not written. Returns
    stats: rows in/out, row groups, seconds, engine counters.
    `release_mib`: give freed memory back to the system whenever the RSS grew
    by this many MiB (0: never; default the environment's
    `LSM_LAB_MERGE_RELEASE_MIB`, else `RELEASE_MIB`, off): a flatter peak
    RSS against N for more CPU (see `RELEASE_MIB`).
    """
    if engine not in ENGINES:
        raise InputError(f"unknown merge engine {engine!r}; choose one of: {', '.join(ENGINES)}")
    if not input_paths:
        raise InputError("no input files")
    if row_group_size < 1 or batch_size < 1:
        raise InputError("row_group_size and batch_size must be >= 1")
    out = Path(out_path)
    paths = [Path(p) for p in input_paths]
    for p in paths:
        if p.exists() and out.exists() and os.path.samefile(p, out):
            raise InputError("the output file is also an input", path=p)
    files = [_open(p, buffer_size) for p in paths]
    schema = _check_schemas(paths, files, key, ordering, delete_column)
    rows_in = sum(pf.metadata.num_rows for pf in files)
    add_delete = delete_column is None
    if add_delete:
        schema = schema.append(pa.field(_NO_DELETE, pa.bool_(), nullable=False))
    spec = MergeSpec(MergeMode.EVENT_TIME_ORDERING if ordering else MergeMode.COMMIT_TIME_ORDERING,
                     key=key, ordering=ordering, delete=delete_column or _NO_DELETE)

    bar = new_bar(total=rows_in, unit="row", unit_scale=True, desc=f"merge ({engine})", force=progress or False,
                  min_items=1)
    stats: dict[str, Any] = {}
    started = time.perf_counter()
    writer: parquet_write.ParquetFileWriter | None = None
    releaser = _Releaser((release_mib if release_mib is not None else _release_mib()) << 20)
    try:
        # readers with a known schema: no first batch of each file read here to learn it (see "The first
        # batch on the reader thread" above: each file's batches are all decoded on the engine's reader thread)
        sources = [pa.RecordBatchReader.from_batches(schema, _batches(pf, schema, batch_size, add_delete, bar))
                   for pf in files]
        out_schema, batches = open_merge(sources, spec, engine=engine, batch_size=batch_size,
                                         read_ahead=read_ahead and engine == "sorted",
                                         count_comparisons=count_comparisons, stats=stats)
        assert out_schema is not None
        writer = output_writer(out, out_schema, key=key, row_group_size=row_group_size)
        for i, batch in enumerate(batches, 1):
            writer.write(batch)
            if i % RELEASE_CHECK == 0:
                releaser.check()  # the allocator's freed pages back to the system when they piled up
        writer.close()
    except LsmLabError as exc:
        _discard(writer)
        raise _name_file(exc, paths) from None
    except BaseException:
        _discard(writer)
        raise
    finally:
        releaser.close()
        if bar is not None:
            bar.close()
    assert writer is not None
    return {
        "engine": engine,
        "inputs": len(paths),
        "rows_in": rows_in,
        "rows_out": writer.rows,
        "row_groups": writer.row_groups,
        "seconds": time.perf_counter() - started,
        "output": str(out),
        "memory_releases": releaser.releases,
        **stats,
    }


def output_writer(out: str | os.PathLike[str], schema: pa.Schema, *, key: str,
                  row_group_size: int = 131_072) -> parquet_write.ParquetFileWriter:
    """The writer of a merge output: sorted by `key`, row groups of exactly `row_group_size` rows,
    encoded on a background thread; no bloom filters (a user's file, not a table's); replaces `out`."""
    return parquet_write.ParquetFileWriter(out, schema, key_column=key, is_sorted=True, row_group_size=row_group_size,
                                        row_group_bytes=0, bloom_fpp=None, overwrite=True, threaded=True)


def _discard(writer: parquet_write.ParquetFileWriter | None) -> None:
    if writer is not None:
        writer.abort()


__all__ = ["MERGE_BATCH_ROWS", "RELEASE_CHECK", "RELEASE_MIB", "merge_parquet_files", "output_writer"]
