#!/usr/bin/env python
"""The cost of Parquet page checksums: merge and snapshot read, with and without.

    python benchmarks/bench_checksums.py --rows 2000000 --k 8 --repeat 3

With checksums (the default of lsm_lab), every page is written with its CRC-32
and every read of a data file verifies it (format/parquet_write.py, format/parquet_read.py). Without, both
are switched off in this process (`WRITE_OPTIONS["write_page_checksum"]`,
`VERIFY_PAGE_CHECKSUMS`). Each setting writes its own inputs, so the reads of
the "with" runs really verify CRCs. Runs alternate between the two settings;
the median and the best of `--repeat` runs are reported with the ratios
with / without (the best is the steadier figure on a shared machine), and the
process CPU time (all threads), which other processes on the machine disturb least.

    merge     k sorted runs of --rows rows in total (lsm_lab/bench/merge.py's data), merged
              by `merge_parquet_files` (sorted engine): reads k files, writes one
    snapshot  a table of --rows rows (bulk insert + one 10% upsert, 4 buckets, lsm_tree), read whole
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import lsm_lab
from lsm_lab.bench.merge import KEY, ORDERING, make_runs
from lsm_lab.format import parquet_read, parquet_write
from lsm_lab.merge.files import merge_parquet_files


def _set(checksums: bool) -> None:
    parquet_write.WRITE_OPTIONS["write_page_checksum"] = checksums
    parquet_read.VERIFY_PAGE_CHECKSUMS = checksums


def _merge_inputs(base: Path, rows: int, k: int, checksums: bool) -> list[str]:
    """lsm_lab's merge runs, rewritten through the one writer (so they carry CRCs when `checksums`)."""
    ds = make_runs(base / "runs", rows, k, 0.3)
    _set(checksums)
    folder = base / ("crc" if checksums else "plain")
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for i, p in enumerate(ds.paths):
        target = folder / f"run_{i:02d}.parquet"
        if not target.exists():
            parquet_write.write_parquet(target, pq.read_table(p), key_column=KEY, is_sorted=True, bloom_fpp=None,
                                     row_group_size=131_072, row_group_bytes=0)
        out.append(str(target))
    return out


def _table(base: Path, rows: int, checksums: bool) -> lsm_lab.Table:
    _set(checksums)
    path = base / ("table_crc" if checksums else "table_plain")
    shutil.rmtree(path, ignore_errors=True)
    rng = np.random.default_rng(7)
    ids = pa.array([f"trip-{i:09d}" for i in range(rows)])
    data = pa.table({"id": ids, "ts": pa.array(np.zeros(rows, dtype=np.int64)),
                     "fare": pa.array(rng.random(rows) * 100), "city": pa.array(rng.integers(0, 50, rows))})
    table = lsm_lab.create_table(path, name="trips", record_key="id", ordering_field="ts", layout="lsm_tree", num_buckets=4)
    table.bulk_insert(data)
    pick = np.sort(rng.choice(rows, rows // 10, replace=False))
    upd = data.take(pa.array(pick))
    upd = upd.set_column(1, "ts", pa.array(np.ones(len(pick), dtype=np.int64)))
    table.upsert(upd)
    return table


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--k", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--data-dir", default=None, help="where inputs are generated (default: a temp folder)")
    args = ap.parse_args(argv)
    base = Path(args.data_dir or tempfile.mkdtemp(prefix="lsm_lab_crc_"))
    try:
        base.mkdir(parents=True, exist_ok=True)
        inputs = {c: _merge_inputs(base, args.rows, args.k, c) for c in (True, False)}
        tables = {c: _table(base, args.rows, c) for c in (True, False)}
        times: dict[tuple[str, bool], list[float]] = {}
        cpu: dict[tuple[str, bool], list[float]] = {}
        for r in range(args.repeat):
            for c in ((True, False) if r % 2 == 0 else (False, True)):
                _set(c)
                out = base / f"out_{c}.parquet"
                t0, c0 = time.perf_counter(), time.process_time()
                stats = merge_parquet_files(out, inputs[c], key=KEY, ordering=ORDERING, engine="sorted")
                times.setdefault(("merge", c), []).append(time.perf_counter() - t0)
                cpu.setdefault(("merge", c), []).append(time.process_time() - c0)
                out.unlink()
                t0, c0 = time.perf_counter(), time.process_time()
                n = lsm_lab.open_table(tables[c].path).read().num_rows
                times.setdefault(("snapshot", c), []).append(time.perf_counter() - t0)
                cpu.setdefault(("snapshot", c), []).append(time.process_time() - c0)
                assert n == args.rows and stats["rows_out"] > 0
        _set(True)
        print(f"rows={args.rows:,} k={args.k} repeat={args.repeat} (seconds: median / best)")
        for what in ("merge", "snapshot"):
            on, off = times[(what, True)], times[(what, False)]
            med_on, med_off, min_on, min_off = statistics.median(on), statistics.median(off), min(on), min(off)
            print(f"{what:9s} with checksums {med_on:7.3f} / {min_on:7.3f} s   without {med_off:7.3f} / {min_off:7.3f} s"
                  f"   ratio {med_on / med_off:5.3f} / {min_on / min_off:5.3f}")
            cpu_on, cpu_off = statistics.median(cpu[(what, True)]), statistics.median(cpu[(what, False)])
            print(f"{'':9s} CPU time (all threads, median): {cpu_on:7.3f} s vs {cpu_off:7.3f} s   ratio {cpu_on / cpu_off:5.3f}")
    finally:  # the generated inputs and tables; a --data-dir given is kept
        if not args.data_dir:
            shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
