"""Benchmark: v1 Avro log blocks vs v2 Parquet logs, and a MOR snapshot read, lsm_lab vs hudi-rs.

Two questions from RFC-103's epic, measured in one run so that the figures are
ratios on the same machine:

1. Bytes on disk. The same update records (trips: uuid, ts, rider, driver,
   fare, four coordinates, city, plus Hudi's five meta columns) written as one
   v1 log file holding one Avro data block, and as one v2 log (plain Parquet,
   snappy); the same for delete records (v1 delete block vs v2 delete log).
   The epic aims for v2 logs 10x smaller.

2. Read time. A MERGE_ON_READ compatibility table (version 8, v1 logs) of
   `rows` trips: a bulk insert, `rounds` upserts of `update_fraction * rows`
   trips and a delete of 1% of them. Its snapshot is read by lsm_lab and by
   hudi-rs (best of `repeat`); both results are checked to hold the same keys.
   The same batches written to a version 9 table (v2 logs) give lsm_lab's read
   time on native logs, and the log bytes of both tables.

    run(rows=1_000_000)  ──►  {"log_bytes": [...], "mor_read": {...}}  ──►  format_report()

Simplified compared with a full benchmark: one process for every contender
(warm caches after the first read; best of `repeat` hides some of it), and no
memory figures.

Taught in: notebooks/09_real_hudi_tables.ipynb, notebooks/10_sorted_vs_hash_on_spark.ipynb
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lsm_lab.api import create_table, open_table
from lsm_lab.filegroup import compat, fsview
from lsm_lab.format import log_v2 as v2
from lsm_lab.interop.hudi_tables import hudi_available, hudi_rs_read
from lsm_lab.lab.datagen import TripsGenerator
from lsm_lab.merge import records
from lsm_lab.timeline.config import TableConfig, build_props

INSTANT = "20260101000000000"
SIZES = (1_000, 10_000, 100_000)


def _config(version: int = 8) -> TableConfig:
    props = build_props(name="trips", record_key=("uuid",), partition_by=("city",), ordering_field="ts",
                        table_type="MERGE_ON_READ", layout="default", version=version, hive_style=True,
                        num_buckets=4)
    return TableConfig.from_props(compat.compat_props(props, version) if version < 9 else props)


def _with_meta(batch: pa.Table, name: str) -> pa.Table:
    n = batch.num_rows
    keys = batch.column("uuid")
    parts = pc.binary_join_element_wise("city=", batch.column("city"), "")
    seq = pc.binary_join_element_wise(f"{INSTANT}_0_", pc.cast(pa.array(range(n)), pa.string()), "")
    meta = {records.COMMIT_TIME: pa.array([INSTANT] * n, pa.string()), records.COMMIT_SEQNO: seq,
            records.RECORD_KEY: keys, records.PARTITION_PATH: parts,
            records.FILE_NAME: pa.array([name] * n, pa.string())}
    return pa.table({**meta, **{c: batch.column(c) for c in batch.column_names}})


def log_bytes(sizes: tuple[int, ...] = SIZES, *, work_dir: Path, seed: int = 7) -> list[dict[str, Any]]:
    """Bytes of the same records as one v1 log (Avro block) and one v2 log (Parquet), data and deletes."""
    config = _config(8)
    gen = TripsGenerator(seed)
    gen.inserts(10 * max(sizes))  # a pool large enough that few picked keys repeat
    out = []
    folder = work_dir / "log_bytes"
    folder.mkdir(parents=True, exist_ok=True)
    for n in sizes:
        # one row per key, in key order (as an lsm_tree writer would write them), the same for both formats
        data = _with_meta(records.dedupe(gen.updates(n, repeat_fraction=0.0), "uuid", "ts"), "f")
        t0 = time.perf_counter()
        v1_size = compat.write_v1_data_log(folder / f".f_{INSTANT}.log.{n}_0-0-0", config, data, instant=INSTANT)
        v1_secs = time.perf_counter() - t0
        t0 = time.perf_counter()
        v2_size = v2.write_data_log(folder / f"f_0-0-0_{INSTANT}_{n}.parquet", data, instant_time=INSTANT,
                                    is_sorted=False)
        v2_secs = time.perf_counter() - t0
        dels = gen.deletes(n)
        keys = dels.column("uuid")
        parts = pc.binary_join_element_wise("city=", dels.column("city"), "")
        v1_del = compat.write_v1_delete_log(
            folder / f".f_{INSTANT}.log.{n + 1}_0-0-0", config,
            pa.table({"record_key": keys, "partition_path": parts, "ordering_val": dels.column("ts")}),
            instant=INSTANT, user_schema=None)
        v2_del = v2.write_delete_log(
            folder / f"f_0-0-0_{INSTANT}_{n}.delete.parquet",
            pa.table({"record_key": keys, "ordering_val": v2.encode_ordering(dels.column("ts")),
                      "partition_path": parts}), instant_time=INSTANT, is_sorted=False)
        out.append({"rows": data.num_rows, "v1_data_bytes": v1_size, "v2_data_bytes": v2_size,
                    "data_ratio": round(v1_size / v2_size, 2), "v1_write_s": round(v1_secs, 3),
                    "v2_write_s": round(v2_secs, 3), "delete_rows": dels.num_rows, "v1_delete_bytes": v1_del,
                    "v2_delete_bytes": v2_del, "delete_ratio": round(v1_del / v2_del, 2)})
    return out


def _best(readers: dict[str, Callable[[], pa.Table]], repeat: int) -> dict[str, tuple[float, float, pa.Table]]:
    """Each reader's best wall and best CPU seconds (every thread of the process) over `repeat` reads, and
    its result; the readers take turns (a burst of other load hits them alike, not one of them)."""
    best: dict[str, tuple[float, float, pa.Table]] = {}
    for _ in range(max(1, repeat)):
        for name, fn in readers.items():
            t0, c0 = time.perf_counter(), time.process_time()
            result = fn()
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            old = best.get(name)
            best[name] = (wall, cpu, result) if old is None else (min(old[0], wall), min(old[1], cpu), result)
    return best


def _log_bytes_of(path: Path) -> tuple[int, int]:
    """(v1 log bytes, v2 log bytes) of a table folder."""
    v1_total = v2_total = 0
    for _, p, name in fsview.list_data_files(path):
        if name.is_log:
            if name.log_format == 1:
                v1_total += p.stat().st_size
            else:
                v2_total += p.stat().st_size
    return v1_total, v2_total


def mor_read(rows: int, *, update_fraction: float, rounds: int, repeat: int, work_dir: Path,
             seed: int = 11) -> dict[str, Any]:
    """Build the v8 (v1 logs) and v10 (v2 logs) MOR tables and time their snapshot reads.

    (Version 10: a version 9 table of the default layout keeps v1 log blocks, timeline/config.py.)"""
    paths = {8: work_dir / "mor_v8_v1logs", 10: work_dir / "mor_v10_v2logs"}
    writes: dict[int, float] = {}
    for version, path in paths.items():
        gen = TripsGenerator(seed)
        table = create_table(path, name="trips", record_key="uuid", partition_by="city", ordering_field="ts",
                             table_type="MERGE_ON_READ", layout="default", table_version=version)
        t0 = time.perf_counter()
        table.bulk_insert(gen.inserts(rows))
        for _ in range(rounds):
            table.upsert(gen.updates(max(1, int(rows * update_fraction))))
        table.delete(gen.deletes(max(1, rows // 100)))
        writes[version] = time.perf_counter() - t0
    report: dict[str, Any] = {"rows_inserted": rows, "rounds": rounds, "update_fraction": update_fraction,
                              "write_s_v1_logs": round(writes[8], 2), "write_s_v2_logs": round(writes[10], 2)}
    v1_logs, _ = _log_bytes_of(paths[8])
    _, v2_logs = _log_bytes_of(paths[10])
    report.update({"table_v1_log_bytes": v1_logs, "table_v2_log_bytes": v2_logs,
                   "table_log_ratio": round(v1_logs / v2_logs, 2) if v2_logs else None})
    readers: dict[str, Callable[[], pa.Table]] = {"lsm_lab_v1": lambda: open_table(paths[8]).read(),
                                                  "lsm_lab_v2": lambda: open_table(paths[10]).read()}
    if hudi_available():
        readers["hudi_rs_v1"] = lambda: hudi_rs_read(paths[8])
    best = _best(readers, repeat)
    lsm_s, lsm_cpu, mine = best["lsm_lab_v1"]
    report.update(lsm_lab_v1_read_s=round(lsm_s, 3), lsm_lab_v1_read_cpu_s=round(lsm_cpu, 3),
                  snapshot_rows=mine.num_rows)
    lsm2_s, lsm2_cpu, mine2 = best["lsm_lab_v2"]
    report.update(lsm_lab_v2_read_s=round(lsm2_s, 3), lsm_lab_v2_read_cpu_s=round(lsm2_cpu, 3))
    same_v2 = mine2.num_rows == mine.num_rows and _keys(mine2).equals(_keys(mine))
    report["v2_table_same_keys"] = bool(same_v2)
    if "hudi_rs_v1" in best:
        hudi_s, hudi_cpu, theirs = best["hudi_rs_v1"]
        report["hudi_rs_v1_read_s"] = round(hudi_s, 3)
        report["hudi_rs_v1_read_cpu_s"] = round(hudi_cpu, 3)
        report["hudi_rs_rows"] = theirs.num_rows
        report["hudi_rs_same_keys"] = bool(theirs.num_rows == mine.num_rows and _keys(theirs).equals(_keys(mine)))
        report["lsm_lab_over_hudi_rs"] = round(lsm_s / hudi_s, 2)
        report["lsm_lab_over_hudi_rs_cpu"] = round(lsm_cpu / hudi_cpu, 2) if hudi_cpu else None
    return report


def _keys(table: pa.Table) -> pa.Array:
    keys = table.column(records.RECORD_KEY).combine_chunks()
    return pc.take(keys, pc.sort_indices(keys))


def run(*, rows: int = 1_000_000, update_fraction: float = 0.1, rounds: int = 2, repeat: int = 3,
        work_dir: str | os.PathLike[str] | None = None, sizes: tuple[int, ...] = SIZES) -> dict[str, Any]:
    """Both measurements; the work folder is removed afterwards unless given."""
    own = work_dir is None
    folder = Path(tempfile.mkdtemp(prefix="lsm_lab_bench_interop_")) if work_dir is None else Path(work_dir)
    folder.mkdir(parents=True, exist_ok=True)
    try:
        return {"log_bytes": log_bytes(tuple(s for s in sizes if s <= max(rows, 1)) or (rows,), work_dir=folder),
                "mor_read": mor_read(rows, update_fraction=update_fraction, rounds=rounds, repeat=repeat,
                                     work_dir=folder),
                "cpus": os.cpu_count()}
    finally:
        if own:
            shutil.rmtree(folder, ignore_errors=True)


def format_report(report: dict[str, Any]) -> str:
    lines = ["bytes on disk: the same records as a v1 log (one Avro block) and a v2 log (Parquet)",
             f"{'rows':>8} {'v1 data':>12} {'v2 data':>12} {'v1/v2':>6} {'deletes':>8} {'v1 del':>10} "
             f"{'v2 del':>10} {'v1/v2':>6}"]
    for r in report["log_bytes"]:
        lines.append(f"{r['rows']:>8} {r['v1_data_bytes']:>12,} {r['v2_data_bytes']:>12,} {r['data_ratio']:>6} "
                     f"{r['delete_rows']:>8} {r['v1_delete_bytes']:>10,} {r['v2_delete_bytes']:>10,} "
                     f"{r['delete_ratio']:>6}")
    m = report["mor_read"]
    lines += ["", f"MOR snapshot: {m['rows_inserted']:,} trips, {m['rounds']} upsert rounds of "
                  f"{m['update_fraction']:.0%}, 1% deleted -> {m['snapshot_rows']:,} rows",
              f"  log bytes in the table: v1 {m['table_v1_log_bytes']:,}  v2 {m['table_v2_log_bytes']:,}  "
              f"(v1/v2 = {m['table_log_ratio']})",
              f"  writes: v1-log table {m['write_s_v1_logs']} s, v2-log table {m['write_s_v2_logs']} s",
              f"  lsm_lab read, v1 logs: {m['lsm_lab_v1_read_s']} s",
              f"  lsm_lab read, v2 logs: {m['lsm_lab_v2_read_s']} s  (same keys: {m['v2_table_same_keys']})"]
    if "hudi_rs_v1_read_s" in m:
        lines.append(f"  hudi-rs read, v1 logs: {m['hudi_rs_v1_read_s']} s  (same keys: {m['hudi_rs_same_keys']}; "
                     f"lsm_lab/hudi-rs = {m['lsm_lab_over_hudi_rs']})")
        if "hudi_rs_v1_read_cpu_s" in m:
            lines.append(f"  read CPU seconds, v1 logs (all threads): lsm_lab {m['lsm_lab_v1_read_cpu_s']} s, "
                         f"hudi-rs {m['hudi_rs_v1_read_cpu_s']} s (lsm_lab/hudi-rs = {m['lsm_lab_over_hudi_rs_cpu']})")
    else:
        lines.append("  hudi-rs: not installed")
    return "\n".join(lines)


__all__ = ["format_report", "log_bytes", "mor_read", "run"]
