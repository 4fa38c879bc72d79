#!/usr/bin/env python
"""What compacting the MDT's `files` partition alone, early, costs a writer (`lsm_lab.metadata.files.compact.max.log.files`).

    python benchmarks/bench_mdt_files_compaction.py [--keys 1000000] [--upserts 20] [--rows 1000]
                                                    [--partitions 8] [--table-type MERGE_ON_READ] [--record-index]

Two version-9 tables with `hoodie.metadata.enable=true`, the same writes in the same order: a bulk insert of
`--keys` keys, then `--upserts` upserts of `--rows` keys each.  One table keeps the default threshold (2: the
`files` partition compacted alone once it holds 2 logs, so a cold snapshot plan reads at most 3 MDT files), the
baseline sets it to 0 (upstream's schedule only: every partition every `hoodie.metadata.compact.max.delta.commits`,
10).  The writes alternate between the two tables so that load on the shared machine hits both alike.
Reported per table: insert seconds, the upserts' total and median seconds, the ratio to the baseline, the MDT
files written (every file that ever appeared under `.hoodie/metadata/<partition>/`, the MDT's clean
notwithstanding) and their bytes, MDT compactions, and the most `files` logs a plan had to read after any write
(a cold plan's MDT GETs are 1 + that).  Times depend
on the machine's load (quote `uptime` with them); file counts do not.  `--s3` also counts the requests of the
upserts on the local S3 server (each from a fresh writer), all and those of the MDT, per threshold.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pyarrow as pa

import lsm_lab
from lsm_lab.services import mdt_services, mdt_write
from lsm_lab.table.state import TableState
from lsm_lab.timeline.config import read_config


def _batch(keys: range, partitions: int, ts: int) -> pa.Table:
    ids = pa.array([f"k{i:08d}" for i in keys])
    return pa.table({"id": ids, "p": pa.array([f"p{i % partitions}" for i in keys]),
                     "ts": pa.array([ts] * len(keys), pa.int64()), "v": pa.array([float(i) for i in keys])})


def _mdt_files(path: Path) -> dict[str, int]:
    folder = mdt_write.metadata_folder(path)
    out: dict[str, int] = {}
    for partition, names in mdt_services.view_files(folder).items():
        for n in names:
            f = folder / partition / n
            if f.exists():
                out[f"{partition}/{n}"] = f.stat().st_size
    return out


def _files_logs(path: Path) -> int:
    """The `files` partition's logs a snapshot plan reads now (its latest slice)."""
    folder = mdt_write.metadata_folder(path)
    mdt = TableState(folder, read_config(folder))
    return next(len(s.log_files) for s in mdt.latest_slices(partitions=["files"]))


def s3_requests(upserts: int) -> dict[str, dict[str, dict[str, int]]]:
    """Requests of `upserts` small upserts on the local S3 server, each from a fresh writer (nothing of the MDT
    kept), per threshold: all of them and those under `.hoodie/metadata/` (load does not change counts)."""
    import collections

    from lsm_lab.lab.s3local import LocalS3
    from lsm_lab.table import mdt_listing

    out: dict[str, dict[str, dict[str, int]]] = {}
    with LocalS3() as s3:
        for threshold in ("2", "0"):
            uri = s3.new_bucket()
            lsm_lab.create_table(uri, name="w", record_key="id", ordering_field="ts", partition_by="p",
                                 table_type="MERGE_ON_READ", layout="default", table_version=9,
                                 storage_options=s3.options(),
                                 properties={"hoodie.metadata.enable": "true",
                                             mdt_write.PROP_FILES_COMPACT_LOGS: threshold})
            every: collections.Counter[str] = collections.Counter()
            mdt: collections.Counter[str] = collections.Counter()
            for k in range(upserts + 1):
                mdt_listing.forget()
                t = lsm_lab.open_table(uri, storage_options=s3.options())
                counts = t.storage.counts
                counts.trace = []
                rows = [{"id": f"id{i:04d}", "p": f"p{i % 4}", "ts": k + 1, "v": float(i)} for i in range(k, 400, 7)]
                (t.insert if k == 0 else t.upsert)(rows)
                trace, counts.trace = counts.trace, None
                if k:
                    every.update(kind for kind, _ in trace)
                    mdt.update(kind for kind, key in trace if ".hoodie/metadata/" in key)
            out[threshold] = {"all": dict(every), "mdt": dict(mdt)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--keys", type=int, default=1_000_000, help="keys of the bulk insert (default 1,000,000)")
    ap.add_argument("--upserts", type=int, default=20, help="small upserts after it (default 20)")
    ap.add_argument("--rows", type=int, default=1000, help="keys per upsert (default 1,000)")
    ap.add_argument("--partitions", type=int, default=8, help="data partitions (default 8)")
    ap.add_argument("--table-type", default="MERGE_ON_READ", help="MERGE_ON_READ or COPY_ON_WRITE")
    ap.add_argument("--record-index", action="store_true", help="also keep the MDT's record_index partition")
    ap.add_argument("--s3", action="store_true", help="also count the requests of `--upserts` small upserts on the "
                    "local S3 server, each from a fresh writer, per threshold")
    ap.add_argument("--json", help="write the results here too")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench_fcomp_"))
    try:
        names = {"files alone at 2": "2", "upstream only (0)": "0"}
        tables = {}
        for name, threshold in names.items():
            props = {"hoodie.metadata.enable": "true", mdt_write.PROP_FILES_COMPACT_LOGS: threshold}
            if args.record_index:
                props["hoodie.metadata.record.index.enable"] = "true"
            tables[name] = lsm_lab.create_table(root / threshold, name="bench", record_key="id", ordering_field="ts",
                                                partition_by="p", table_type=args.table_type, layout="default",
                                                table_version=9, properties=props)
        seen: dict[str, dict[str, int]] = {n: {} for n in names}
        most_logs: dict[str, int] = dict.fromkeys(names, 0)
        insert_s: dict[str, float] = {}
        upsert_s: dict[str, list[float]] = {n: [] for n in names}
        order = list(names)
        data = _batch(range(args.keys), args.partitions, 1)
        for name in order:
            t0 = time.perf_counter()
            tables[name].bulk_insert(data)
            insert_s[name] = time.perf_counter() - t0
            seen[name].update(_mdt_files(root / names[name]))
        for u in range(args.upserts):
            start = (u * 7919 * args.rows) % max(1, args.keys - args.rows)
            batch = _batch(range(start, start + args.rows), args.partitions, u + 2)
            for name in (order if u % 2 else order[::-1]):
                t0 = time.perf_counter()
                tables[name].upsert(batch)
                upsert_s[name].append(time.perf_counter() - t0)
                seen[name].update(_mdt_files(root / names[name]))
                most_logs[name] = max(most_logs[name], _files_logs(root / names[name]))
        results: dict[str, Any] = {}
        for name, threshold in names.items():
            path = root / threshold
            folder = mdt_write.metadata_folder(path)
            mdt = TableState(folder, read_config(folder))
            comps = [i for i in mdt.active_timeline.instants() if i.action in ("commit", "compaction")]
            partial = sum(mdt_services.is_partial(mdt.active_timeline, i) for i in comps)
            results[name] = {
                "insert_s": round(insert_s[name], 3), "upserts_total_s": round(sum(upsert_s[name]), 3),
                "upsert_median_s": round(statistics.median(upsert_s[name]), 4),
                "mdt_files_written": len(seen[name]), "mdt_bytes_written": sum(seen[name].values()),
                "mdt_compactions": len(comps), "of_files_alone": partial,
                "files_logs_at_end": _files_logs(path), "files_logs_max": most_logs[name]}
        base = results["upstream only (0)"]
        print(f"{'':20} {'insert s':>9} {'upserts s':>10} {'median s':>9} {'ratio':>6} {'MDT files':>9} "
              f"{'MDT KiB':>9} {'compactions':>11} {'max files logs':>14}")
        for name, r in results.items():
            r["upserts_ratio"] = round(r["upserts_total_s"] / base["upserts_total_s"], 3)
            print(f"{name:20} {r['insert_s']:9.2f} {r['upserts_total_s']:10.2f} {r['upsert_median_s']:9.3f} "
                  f"{r['upserts_ratio']:6.2f} {r['mdt_files_written']:9d} {r['mdt_bytes_written'] / 1024:9.0f} "
                  f"{r['mdt_compactions']:>5} ({r['of_files_alone']} alone) {r['files_logs_max']:14d}")
        if args.s3:
            requests = s3_requests(args.upserts)
            for threshold, r in requests.items():
                print(f"S3, threshold {threshold}: {args.upserts} upserts send {r['all']}, under .hoodie/metadata/ {r['mdt']}")
            results["s3_requests"] = requests
        if args.json:
            Path(args.json).write_text(json.dumps({"args": vars(args), "results": results}, indent=1))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
