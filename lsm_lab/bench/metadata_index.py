"""What the metadata table's indexes save a read: files read with column stats, a key lookup through the record index.

    column_stats_files(path, filter)     a filter on a non-key column, read twice:
                                           indexes on   → only the slices column_stats keeps (table/mdt_use.py) are
                                                          opened (footers read), then read if their footers admit it
                                           indexes off  → every slice of the partitions is opened (footers read)
    record_index_lookup(path, keys)      the same keys, three ways (best of `repeats`, one process, same run):
                                           Table.lookup through the record index (only the indexed file groups)
                                           Table.lookup without it (every slice: key range, bloom, footers)
                                           a scan: read(filter=[(_hoodie_record_key, "in", keys)], indexes=False)
    synthetic_cow(path, files)           a COW table of `files` base files (one key range each, a value
                                           column rising with the key) for the 1,000-file figure

Files and slices read are counts (not affected by the machine's load); times are wall-clock medians on
a shared machine, reported with the 1-minute load, as ratios against the baseline of the same run.
A table needs a `column_stats` / `record_index` partition in its metadata table for the indexed side:
the shipped Hudi tables have them; a table lsm_lab writes has them once its metadata-table writer keeps
them (`synthetic_cow` asks for them with upstream's properties; `has_index` tells whether it got them).

    record_index_upsert(root, keys)      an upsert of 1% of the keys: RECORD_INDEX vs SIMPLE (tagging reads every
                                           file's keys), and what the record-index lookups read
    column_stats_section(root, files)    synthetic_cow + column_stats_files

Not registered as a CLI command of its own: `lsm-lab bench metadata --sections record_index,column_stats`
runs the sections (bench/metadata.py).

Simplified compared with Apache Hudi's figures: local files, no Spark; the MDT partitions other than the
record index are read whole per read (table/metadata_table.py), so their cost is in the times; record-index
lookups read only the blocks and log cells of the keys (table/mdt_lookup.py).

Taught in: no chapter (docs/FORMAT.md, "The metadata table (use)")
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

import lsm_lab
from lsm_lab.table.predicate import FilterLike
from lsm_lab.table.stats import LookupStats


def _load() -> float | None:
    return round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None


def _median(fn: Callable[[], Any], repeats: int) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(max(1, repeats)):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def has_index(path: str | Path, name: str) -> bool:
    """Whether the table's metadata table declares the partition `name` (`column_stats`, `record_index`)."""
    m = lsm_lab.open_table(path).metadata_table()
    return m is not None and name in m.partitions()


def _files_of_scan(t: lsm_lab.Table, filter: FilterLike, indexes: bool) -> tuple[int, int, int]:
    """(slices opened, files read, rows) of a filtered read: a slice is opened when its footers are read (the
    Parquet-statistics pruning of scan.stats_prune, which every slice the indexes keep goes through), and its
    files (base and logs) are read when that pruning keeps it."""
    s = t.scan(filter=filter, indexes=indexes)
    rows = s.to_table().num_rows
    return len(s.plan.slices) + s.plan.skipped, sum(len(fs.files) for fs in s.plan.slices), rows


def column_stats_files(path: str | Path, filter: FilterLike, *, repeats: int = 3) -> dict[str, Any]:
    """Files read by a filtered read with the metadata table's column stats and without (same run, same rows)."""
    t = lsm_lab.open_table(path)
    total = len(t.latest_slices())
    on_s, (slices_on, files_on, rows_on) = _median(lambda: _files_of_scan(t, filter, True), repeats)
    stats = t.last_read_stats
    off_s, (slices_off, files_off, rows_off) = _median(lambda: _files_of_scan(t, filter, False), repeats)
    if rows_on != rows_off:
        raise AssertionError(f"{path}: {rows_on} rows with the indexes, {rows_off} without")
    return {"table": str(path), "filter": repr(filter), "slices": total, "rows": rows_on,
            "files_read_with_stats": files_on, "files_read_without": files_off,
            "slices_opened_with_stats": slices_on, "slices_opened_without": slices_off,
            "files_skipped_column_stats": stats.files_skipped_column_stats if stats else 0,
            "indexes_used": list(stats.indexes_used) if stats else [],
            "seconds_with_stats": round(on_s, 4), "seconds_without": round(off_s, 4),
            "time_ratio": round(on_s / off_s, 3) if off_s else None, "load_1m": _load()}


def record_index_lookup(path: str | Path, keys: Sequence[str], *, repeats: int = 5) -> dict[str, Any]:
    """A record-key lookup through the record index vs without it vs a scan (same keys, same rows)."""
    t = lsm_lab.open_table(path)
    keys = list(keys)
    with_stats, without_stats = LookupStats(), LookupStats()
    idx_s, a = _median(lambda: t.lookup(keys), repeats)
    t.lookup(keys, stats=with_stats)
    plain_s, b = _median(lambda: t.lookup(keys, indexes=False), repeats)
    t.lookup(keys, indexes=False, stats=without_stats)
    scan_s, c = _median(lambda: t.read(filter=[("_hoodie_record_key", "in", keys)], indexes=False), repeats)
    if not (a.num_rows == b.num_rows == c.num_rows):
        raise AssertionError(f"{path}: {a.num_rows} / {b.num_rows} / {c.num_rows} rows")
    return {"table": str(path), "keys": len(keys), "rows": a.num_rows, "slices": len(t.latest_slices()),
            "slices_pruned_record_index": with_stats.slices_pruned_record_index,
            "files_with_index": with_stats.files, "files_without_index": without_stats.files,
            "seconds_record_index": round(idx_s, 4), "seconds_lookup_without": round(plain_s, 4),
            "seconds_scan": round(scan_s, 4),
            "ratio_index_vs_scan": round(idx_s / scan_s, 3) if scan_s else None,
            "ratio_index_vs_lookup": round(idx_s / plain_s, 3) if plain_s else None, "load_1m": _load()}


def synthetic_cow(path: str | Path, *, files: int = 1000, rows_per_file: int = 20, version: int = 9) -> lsm_lab.Table:
    """A COW table of `files` base files in one commit: keys `k000000…` in order, `value` rising with the key,
    so each file holds one range of it; with upstream's properties for the MDT's column stats and record index."""
    n = files * rows_per_file
    ids = np.arange(n)
    data = pa.table({"key": pa.array([f"k{i:07d}" for i in ids.tolist()]),
                     "value": pa.array(ids, pa.int64()),
                     "category": pa.array((ids % 7).astype(np.int64))})
    t = lsm_lab.create_table(
        path, name="mdt_bench", record_key="key", table_type="COPY_ON_WRITE", layout="default",
        table_version=version, properties={
            "hoodie.copyonwrite.insert.split.size": str(rows_per_file),
            "hoodie.metadata.enable": "true",
            "hoodie.metadata.index.column.stats.enable": "true",
            "hoodie.metadata.record.index.enable": "true"})
    t.insert(data)
    return t


def _keys_batch(ids: np.ndarray, partitions: int, ts: int) -> pa.Table:
    return pa.table({"id": pa.array([f"k{i:09d}" for i in ids.tolist()]),
                     "p": pa.array([f"p{i}" for i in (ids % partitions).tolist()]),
                     "ts": pa.array(np.full(len(ids), ts, dtype=np.int64)), "v": pa.array(ids.astype(np.float64))})


def _mdt_compactions(t: lsm_lab.Table) -> int:
    m = t.metadata_table()
    return 0 if m is None else sum(1 for i in m.mdt.instants() if i.action in ("commit", "compaction"))


def record_index_upsert(root: str | Path, keys: int, *, share: float = 0.01, partitions: int = 4,
                        seed: int = 7, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Upsert of `share` of the keys of a `keys`-key COW table, tagged through the record index vs by reading
    every file's keys (`hoodie.index.type=SIMPLE`, the default without the bucket index).

    Two tables get the same bulk insert (both keep a metadata table, upstream's default MDT compaction
    every 10 deltacommits; one declares `RECORD_INDEX`), then the same upsert (random existing keys) is
    timed on each (`mdt_compacted_during_upsert` says whether an MDT compaction fell in it: it does not at
    this point, so the record index's shards are still log blocks: the lookups read each shard's log block
    once and filter it, no base-file seek).  After it, the same keys are looked up on a fresh
    `MetadataTable` to count what the tagging reads (`mdt_lookup.LookupCounts`), and one key alone."""
    rng = np.random.default_rng(seed)
    out: dict[str, Any] = {"keys": keys, "upsert_keys": max(1, int(keys * share)), "partitions": partitions}
    ids = np.arange(keys)
    picked = np.sort(rng.choice(keys, size=out["upsert_keys"], replace=False))
    for name, props in (("simple", {"hoodie.index.type": "SIMPLE"}),
                        ("record_index", {"hoodie.index.type": "RECORD_INDEX",
                                          "hoodie.metadata.record.index.enable": "true"})):
        path = Path(root) / name
        t = lsm_lab.create_table(path, name="ri", record_key="id", ordering_field="ts", partition_by="p",
                                 layout="default", table_version=9, table_type="COPY_ON_WRITE",
                                 properties={"hoodie.metadata.enable": "true", **props})
        log(f"{name}: bulk insert of {keys:,} keys ...")
        t0 = time.perf_counter()
        t.bulk_insert(_keys_batch(ids, partitions, 0))
        insert_s = time.perf_counter() - t0
        batch = _keys_batch(picked, partitions, 2)
        t = lsm_lab.open_table(path)
        compactions = _mdt_compactions(t)
        log(f"{name}: upsert of {len(picked):,} keys ...")
        t0 = time.perf_counter()
        t.upsert(batch)
        out[name] = {"insert_seconds": round(insert_s, 3), "upsert_seconds": round(time.perf_counter() - t0, 3),
                     "data_files": len(t.latest_slices()),
                     "mdt_compacted_during_upsert": _mdt_compactions(lsm_lab.open_table(path)) > compactions}
        if name == "record_index":
            m = lsm_lab.open_table(path).metadata_table()
            if m is None or "record_index" not in m.partitions():
                raise AssertionError(f"{path}: no record index was written")
            t0 = time.perf_counter()
            found = m.record_index(batch.column("id").to_pylist()).num_rows
            out[name]["lookup_seconds"] = round(time.perf_counter() - t0, 3)
            if found != len(picked):
                raise AssertionError(f"{path}: the record index finds {found} of {len(picked)} keys")
            out[name]["lookup"] = m.lookup_counts.as_dict()
            one = lsm_lab.open_table(path).metadata_table()
            assert one is not None
            one.record_index([f"k{int(picked[0]):09d}"])
            out[name]["lookup_one_key"] = one.lookup_counts.as_dict()
            out[name]["shards"] = len(m.mdt.latest_slices(partitions=["record_index"]))
    a, b = out["simple"]["upsert_seconds"], out["record_index"]["upsert_seconds"]
    out["upsert_ratio_simple_over_record_index"] = round(a / b, 3) if b else None
    out["load_1m"] = _load()
    return out


def column_stats_section(root: str | Path, files: int = 1000, rows_per_file: int = 20,
                         log: Callable[[str], None] = print) -> dict[str, Any]:
    """`synthetic_cow(files)` then a filter on the non-key column `value` (one file's range): files read with
    the metadata table's column stats vs without (`column_stats_files`)."""
    path = Path(root) / "cow"
    log(f"column_stats: a COW table of {files:,} files ...")
    synthetic_cow(path, files=files, rows_per_file=rows_per_file)
    if not has_index(path, "column_stats"):
        raise AssertionError(f"{path}: no column_stats partition was written")
    lo = (files // 2) * rows_per_file
    return column_stats_files(path, [("value", ">=", lo), ("value", "<", lo + rows_per_file)], repeats=1)


def report(results: Sequence[dict[str, Any]]) -> str:
    """One line per figure."""
    lines = []
    for r in results:
        if "files_read_with_stats" in r:
            lines.append(f"{r['table']}: {r['filter']}: slices opened {r['slices_opened_with_stats']} with column "
                         f"stats, {r['slices_opened_without']} without; files read {r['files_read_with_stats']} / "
                         f"{r['files_read_without']} ({r['slices']} slices; time x{r['time_ratio']}, load {r['load_1m']})")
        else:
            lines.append(f"{r['table']}: {r['keys']} key(s): record index {r['seconds_record_index']} s, "
                         f"lookup without {r['seconds_lookup_without']} s, scan {r['seconds_scan']} s "
                         f"(x{r['ratio_index_vs_scan']} of the scan; {r['slices_pruned_record_index']} of "
                         f"{r['slices']} slices skipped; load {r['load_1m']})")
    return "\n".join(lines)


__all__ = ["column_stats_files", "column_stats_section", "has_index", "record_index_lookup", "record_index_upsert",
           "report", "synthetic_cow"]
