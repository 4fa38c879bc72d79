#!/usr/bin/env python
"""What keeping the metadata table's `files` partition costs a writer, and what reading it costs as it grows.

    python benchmarks/bench_mdt_write.py --commits 60 --rows 2000 --partitions 8 --checkpoints 10,30,60
    python benchmarks/bench_mdt_write.py ... --compact-every 1000      (the MDT never compacted)

Two version-8 tables (default layout, COW or MOR), the same upserts in the same order, one with
`hoodie.metadata.enable=true` and one without; the writes alternate between the two tables so that
load on the shared machine hits both alike.  Reported:

    commit       median and best wall time of one upsert, with / without, and the ratio
    MDT read     at each checkpoint (commits so far): `metadata_table().files()` (opens the MDT,
                 merges the latest slice: its base HFile and the log blocks since the last MDT
                 compaction, every `--compact-every` deltacommits) against a listing of the data
                 folders (`fsview.list_data_files`), and the ratio
    MDT size     MDT log files and bytes at each checkpoint (all slices: the MDT is not cleaned)

Local disk: a listing is cheap here, so the ratio says what the MDT read costs in CPU; on an object
store the listing is paid in LIST requests instead (issue 32's S3 figure, not measured here).
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

import lsm_lab
from lsm_lab.filegroup import fsview


def _rows(n: int, partitions: int, start: int, ts: int) -> list[dict[str, object]]:
    return [{"id": f"k{(start + i) % (n * 4):07d}", "p": f"p{(start + i) % partitions}", "ts": ts, "v": float(i)}
            for i in range(n)]


def _best_of(fn: object, repeat: int = 5) -> float:
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()  # type: ignore[operator]
        out.append(time.perf_counter() - t0)
    return min(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--commits", type=int, default=60, help="upserts per table")
    ap.add_argument("--rows", type=int, default=2000, help="rows per upsert")
    ap.add_argument("--partitions", type=int, default=8, help="data partitions")
    ap.add_argument("--table-type", default="COPY_ON_WRITE", help="COPY_ON_WRITE or MERGE_ON_READ")
    ap.add_argument("--checkpoints", default="10,30,60", help="commit counts at which reads are timed")
    ap.add_argument("--compact-every", type=int, default=10,
                    help="hoodie.metadata.compact.max.delta.commits of the MDT table (upstream's default 10)")
    args = ap.parse_args()
    checkpoints = {int(c) for c in args.checkpoints.split(",") if c}
    root = Path(tempfile.mkdtemp(prefix="bench_mdt_"))
    try:
        tables = {}
        mdt = {"hoodie.metadata.enable": "true", "hoodie.metadata.compact.max.delta.commits": str(args.compact_every)}
        for name, props in (("with", mdt), ("without", {})):
            tables[name] = lsm_lab.create_table(root / name, name="bench", record_key="id", ordering_field="ts",
                                                partition_by="p", table_type=args.table_type, layout="default",
                                                table_version=8, properties=props)
        times: dict[str, list[float]] = {"with": [], "without": []}
        path = root / "with"
        print(f"{'commits':>7} {'files() s':>10} {'listing s':>10} {'ratio':>7} {'slice logs':>10} {'MDT logs':>8} "
              f"{'MDT KiB':>8}")
        for c in range(1, args.commits + 1):
            batch = _rows(args.rows, args.partitions, c * 997, c)
            for name in (("with", "without") if c % 2 else ("without", "with")):
                t0 = time.perf_counter()
                tables[name].upsert(batch)
                times[name].append(time.perf_counter() - t0)
            if c in checkpoints:
                mdt_read = _best_of(lambda: lsm_lab.open_table(path).metadata_table().files())  # type: ignore[union-attr]
                listing = _best_of(lambda: fsview.list_data_files(path))
                logs = list((path / ".hoodie" / "metadata" / "files").glob(".files-*"))
                kib = sum(p.stat().st_size for p in logs) / 1024
                view = lsm_lab.open_table(path).metadata_table()
                in_slice = sum(len(s.log_files) for s in view.mdt.latest_slices()) if view else 0
                print(f"{c:>7} {mdt_read:>10.4f} {listing:>10.4f} {mdt_read / listing:>7.1f} {in_slice:>10} "
                      f"{len(logs):>8} {kib:>8.0f}")
        w, wo = times["with"], times["without"]
        print(f"commit median: with MDT {statistics.median(w):.4f} s, without {statistics.median(wo):.4f} s, "
              f"ratio {statistics.median(w) / statistics.median(wo):.2f}; best: {min(w):.4f} / {min(wo):.4f} s, "
              f"ratio {min(w) / min(wo):.2f}  ({args.commits} upserts of {args.rows} rows, {args.table_type})")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
