"""What a table costs on an object store: the same operations on local disk and on a local S3 server.

    lsm-lab bench storage [--rows 1000000] [--repeats 3] [--json OUT]

Starts moto's S3 server on 127.0.0.1 (`lsm_lab.lab.s3local`), creates the same
lsm_tree MERGE_ON_READ trips table on local disk and in a bucket, and times
each operation on both, with the requests the S3 table sent:

    bulk_insert   N rows                  (one PUT per data file, a few for the timeline)
    upsert        N/10 rows               (a log file per touched file group)
    read          the whole snapshot      (one LIST of the data files, one GET per file)
    read columns  two columns             (the same GETs: a whole object per file)
    lookup        100 keys                (footers by ranged GETs, then the row groups needed)
    compact       full compaction         (GET every file, PUT the new bases)

Reads report the median of `--repeats` runs.  Loopback S3 has no network
latency, so the ratio measures per-request overhead and copying, not the
bandwidth of a real store; the request counts carry over to a real store as
they are (and are what a metered store bills).

Taught in: notebooks/12_object_storage.ipynb
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa

from lsm_lab.api import Table, create_table
from lsm_lab.lab.datagen import TripsGenerator
from lsm_lab.lab.s3local import LocalS3

OPS = ("bulk_insert", "upsert", "read", "read columns", "lookup", "compact")


def _timed(fn: Callable[[], Any], repeats: int) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def _run_ops(table: Table, rows: int, repeats: int, seed: int) -> dict[str, dict[str, Any]]:
    gen = TripsGenerator(seed)
    inserts = gen.inserts(rows)
    updates = gen.updates(max(1, rows // 10))
    keys = inserts.column("uuid").to_pylist()[:: max(1, rows // 100)][:100]
    counts = table.storage.counts
    out: dict[str, dict[str, Any]] = {}
    steps: list[tuple[str, Callable[[], Any], int]] = [
        ("bulk_insert", lambda: table.bulk_insert(inserts), 1),
        ("upsert", lambda: table.upsert(updates), 1),
        ("read", lambda: table.read(), repeats),
        ("read columns", lambda: table.read(columns=["uuid", "fare"]), repeats),
        ("lookup", lambda: table.lookup(keys), repeats),
        ("compact", lambda: table.compact(strategy="full"), 1),
    ]
    for name, fn, n in steps:
        before = counts.snapshot()
        seconds, result = _timed(fn, n)
        used = {k: round(v / n) for k, v in counts.since(before).items()}
        out[name] = {"seconds": seconds, "requests": used,
                     "rows": result.num_rows if isinstance(result, pa.Table) else None}
    return out


def run(rows: int = 1_000_000, repeats: int = 3, seed: int = 7, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Both tables, every operation; returns {"rows", "local": {op: ...}, "s3": {op: ...}}."""
    kw: dict[str, Any] = {"name": "trips", "record_key": "uuid", "partition_by": "city", "ordering_field": "ts",
                          "table_type": "MERGE_ON_READ", "layout": "lsm_tree", "num_buckets": 4}
    folder = Path(tempfile.mkdtemp(prefix="lsm_lab_bench_storage_"))
    try:
        log(f"local disk: {rows:,} rows ...")
        local = _run_ops(create_table(folder / "trips", **kw), rows, repeats, seed)
        with LocalS3() as s3:
            log(f"local S3 server {s3.endpoint}: {rows:,} rows ...")
            table = create_table(f"{s3.new_bucket('bench')}/trips", storage_options=s3.options(), **kw)
            remote = _run_ops(table, rows, repeats, seed)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    for op in OPS:
        if local[op]["rows"] is not None and local[op]["rows"] != remote[op]["rows"]:
            raise AssertionError(f"{op}: {local[op]['rows']} rows locally, {remote[op]['rows']} on S3")
    return {"rows": rows, "repeats": repeats, "local": local, "s3": remote}


def report(result: dict[str, Any]) -> str:
    lines = [f"{result['rows']:,} rows; reads: median of {result['repeats']}",
             f"{'operation':<14}{'local s':>9}{'S3 s':>9}{'S3/local':>10}   S3 requests (LIST GET HEAD PUT DELETE)"]
    for op in OPS:
        a, b = result["local"][op], result["s3"][op]
        req = b["requests"]
        ratio = b["seconds"] / a["seconds"] if a["seconds"] > 0 else float("nan")
        lines.append(f"{op:<14}{a['seconds']:>9.2f}{b['seconds']:>9.2f}{ratio:>9.1f}x   "
                     f"{req['LIST']:>4} {req['GET']:>4} {req['HEAD']:>4} {req['PUT']:>4} {req['DELETE']:>4}")
    return "\n".join(lines)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rows", type=int, default=1_000_000, help="rows of the table (default 1000000)")
    p.add_argument("--repeats", type=int, default=3, help="runs per read, median reported (default 3)")
    p.add_argument("--json", metavar="OUT", help="also write the figures as JSON")


__all__ = ["OPS", "add_arguments", "report", "run"]
