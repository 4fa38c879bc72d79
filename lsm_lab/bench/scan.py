"""What streaming a read saves: peak RSS, throughput and first batch of `scan().to_reader()` against `read()`.

    lsm-lab bench scan [--rows 1000000] [--repeats 1] [--json OUT]

One lsm_tree MERGE_ON_READ trips table (partitioned by city, 4 buckets) is
written: an insert of N rows, then an upsert of N/10 updates spread over every
key range, so that every file slice holds a base file and a sorted log — a real
merge in every slice.  Each contender then runs in its own Python process
(peak RSS is its own, read from `VmHWM` as bench/merge.py does):

    read     t.read()                                   every slice merged in memory, one table
    scan     for b in t.scan().to_reader(): ...         slice after slice, batch by batch
    plan     t.scan() only                              listing and planning, no data: the floor

With hudi-rs installed (`pip install hudi`; `--no-hudi` skips it), the same workload is
also written as a table of version 8 (v1 Avro logs, which hudi-rs reads) and streamed by both:

    scan_v8      lsm_lab's scan of the version 8 copy  (v1 logs: each slice merged whole)
    hudi_rs_v8   hudi-rs `HudiTable.read_stream()`, batch by batch  (apache/hudi-rs#589: it
                 merges a whole MOR slice before its first row)

Each reports wall seconds, rows, peak RSS and (scan) the seconds to the first
batch.  Ratios are scan / read of the same run.  The machine's 1-minute load
is recorded before each contender (a shared machine makes wall times noisy;
the RSS figures are not).

Taught in: no chapter (README, "Reading an lsm_lab table from other engines")
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lsm_lab.api import create_table, open_table
from lsm_lab.bench.child import child_entry, print_result, run_child
from lsm_lab.bench.merge import peak_rss_bytes
from lsm_lab.errors import InputError
from lsm_lab.lab.datagen import TripsGenerator

CONTENDERS = ("plan", "read", "scan")
#: contenders on the version 8 copy of the table (when hudi-rs is installed)
V8_CONTENDERS = ("scan_v8", "hudi_rs_v8")
#: rows written per insert call while the table is made (keeps the writer's memory bounded)
WRITE_CHUNK = 1_000_000


def make_table(folder: Path, rows: int, *, seed: int = 7, table_version: int = 10) -> dict[str, Any]:
    """The benchmark's table: N inserted rows, then N/10 updates in a log of every slice (version 10:
    v2 Parquet logs, the default; version 8: v1 Avro logs, which hudi-rs reads)."""
    t = create_table(folder, name="trips", record_key="uuid", partition_by="city", ordering_field="ts",
                     table_type="MERGE_ON_READ", layout="lsm_tree", num_buckets=4, table_version=table_version)
    gen = TripsGenerator(seed)
    done = 0
    while done < rows:
        n = min(WRITE_CHUNK, rows - done)
        t.insert(gen.inserts(n))
        done += n
    t.upsert(gen.updates(max(1, rows // 10)))
    slices = t.latest_slices()
    size = sum(fs.size_bytes for fs in slices)
    return {"slices": len(slices), "slices_with_logs": sum(1 for fs in slices if fs.log_files),
            "data_bytes": size}


def child_main(job_json: str) -> None:
    """Inside the child process: run one contender on the table, print one RESULT line."""
    job = json.loads(job_json)
    t = open_table(job["path"])
    started = time.perf_counter()
    first = None
    rows = 0
    if job["contender"] == "read":
        rows = t.read().num_rows
    elif job["contender"] in ("scan", "scan_v8"):
        for batch in t.scan(batch_size=job["batch_size"]).to_reader():
            if first is None:
                first = time.perf_counter() - started
            rows += batch.num_rows
    elif job["contender"] == "hudi_rs_v8":
        import hudi  # optional peer: only in this contender's process

        table = hudi.HudiTableBuilder.from_base_uri(job["path"]).build()
        for batch in table.read_stream(hudi.HudiReadOptions().with_batch_size(job["batch_size"])):
            if first is None:
                first = time.perf_counter() - started
            rows += batch.num_rows
    else:
        t.scan()
    seconds = time.perf_counter() - started
    print_result({"seconds": seconds, "first_batch_seconds": first, "rows": rows, "peak_rss_bytes": peak_rss_bytes()})


def run_contender(contender: str, path: Path, batch_size: int, *, timeout: float = 3600) -> dict[str, Any]:
    """One contender in a fresh Python process."""
    job = {"contender": contender, "path": str(path), "batch_size": batch_size}
    return {"contender": contender, **run_child("lsm_lab.bench.scan", job, what=f"bench scan: the {contender} child",
                                                timeout=timeout)}


def hudi_available() -> bool:
    """Whether hudi-rs (`pip install hudi`) can be imported."""
    import importlib.util
    return importlib.util.find_spec("hudi") is not None


def run(rows: int = 1_000_000, repeats: int = 1, batch_size: int = 65_536, *, hudi_rs: bool = True,
        log: Callable[[str], None] = print) -> dict[str, Any]:
    """Make the table, run every contender `repeats` times (in turn), keep the medians."""
    if rows < 1 or repeats < 1:
        raise InputError(f"--rows and --repeats must be at least 1, got {rows} and {repeats}")
    folder = Path(tempfile.mkdtemp(prefix="lsm_lab_bench_scan_"))
    try:
        log(f"writing {rows:,} rows + {max(1, rows // 10):,} updates …")
        table = make_table(folder / "trips", rows)
        log(f"  {table['slices']} slices ({table['slices_with_logs']} with logs), "
            f"{table['data_bytes'] / 2**20:.0f} MiB of Parquet")
        paths = dict.fromkeys(CONTENDERS, folder / "trips")
        v8: dict[str, Any] | None = None
        if hudi_rs and hudi_available():
            log("writing the same rows as a version 8 table (v1 logs) for hudi-rs …")
            v8 = make_table(folder / "trips_v8", rows, table_version=8)
            paths.update(dict.fromkeys(V8_CONTENDERS, folder / "trips_v8"))
        runs: dict[str, list[dict[str, Any]]] = {c: [] for c in paths}
        for _ in range(repeats):
            for c, path in paths.items():
                runs[c].append(run_contender(c, path, batch_size))
                r = runs[c][-1]
                log(f"  {c}: {r['seconds']:.2f} s, {r['peak_rss_bytes'] / 2**20:.0f} MiB peak RSS, "
                    f"load {r['load_1m_before']:.1f}")
        out: dict[str, Any] = {"rows": rows, "repeats": repeats, "batch_size": batch_size, "table": table,
                               "table_v8": v8, "cpus": os.cpu_count(), "contenders": {}}
        for c, recs in runs.items():
            med = {k: statistics.median(r[k] for r in recs) for k in ("seconds", "peak_rss_bytes")}
            firsts = [r["first_batch_seconds"] for r in recs if r["first_batch_seconds"] is not None]
            out["contenders"][c] = {**med, "rows": recs[0]["rows"],
                                    "first_batch_seconds": statistics.median(firsts) if firsts else None,
                                    "load_1m_before": max(r["load_1m_before"] or 0 for r in recs)}
        counts = {c: r["rows"] for c, r in out["contenders"].items() if c != "plan"}
        if len(set(counts.values())) != 1:
            raise InputError(f"bench scan: the contenders returned different row counts: {counts}")
        return out
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def report(result: dict[str, Any]) -> str:
    """The figures as text: per contender, then scan / read ratios."""
    c = result["contenders"]
    t = result["table"]
    lines = [f"{result['rows']:,} rows inserted + {result['rows'] // 10:,} updates; {t['slices']} slices, "
             f"{t['slices_with_logs']} with logs; {t['data_bytes'] / 2**20:.0f} MiB of Parquet; "
             f"batch {result['batch_size']:,} rows; {result['cpus']} cores; median of {result['repeats']}",
             f"{'contender':<10}{'rows':>12}{'seconds':>9}{'Mrows/s':>9}{'peak RSS MiB':>14}{'first batch s':>15}"
             f"{'load':>6}"]
    for name in [n for n in (*CONTENDERS, *V8_CONTENDERS) if n in c]:
        r = c[name]
        speed = r["rows"] / r["seconds"] / 1e6 if r["rows"] else 0.0
        first = f"{r['first_batch_seconds']:.3f}" if r["first_batch_seconds"] is not None else "-"
        lines.append(f"{name:<10}{r['rows']:>12,}{r['seconds']:>9.2f}{speed:>9.2f}{r['peak_rss_bytes'] / 2**20:>14.0f}"
                     f"{first:>15}{r['load_1m_before']:>6.1f}")
    floor = c["plan"]["peak_rss_bytes"]
    rss = c["scan"]["peak_rss_bytes"] / c["read"]["peak_rss_bytes"]
    above = (c["scan"]["peak_rss_bytes"] - floor) / max(1, c["read"]["peak_rss_bytes"] - floor)
    lines.append(f"scan / read: peak RSS {rss:.2f} (target <= 0.25; above the plan-only floor: {above:.2f}), "
                 f"throughput {c['read']['seconds'] / c['scan']['seconds']:.2f} (target >= 0.9), "
                 f"first batch {c['scan']['first_batch_seconds']:.3f} s (target <= 1 s)")
    if "hudi_rs_v8" in c:
        mine, theirs = c["scan_v8"], c["hudi_rs_v8"]
        lines.append(f"version 8 copy ({result['table_v8']['data_bytes'] / 2**20:.0f} MiB), lsm_lab scan / hudi-rs "
                     f"read_stream: peak RSS {mine['peak_rss_bytes'] / theirs['peak_rss_bytes']:.2f}, time "
                     f"{mine['seconds'] / theirs['seconds']:.2f}, first batch {mine['first_batch_seconds']:.3f} s "
                     f"vs {theirs['first_batch_seconds']:.3f} s")
    return "\n".join(lines)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rows", type=int, default=1_000_000, help="rows of the insert (default 1000000); the "
                   "upsert updates a tenth of them")
    p.add_argument("--repeats", type=int, default=1, help="runs per contender, medians reported (default 1)")
    p.add_argument("--json", metavar="OUT", help="also write the figures as JSON")
    p.add_argument("--no-hudi", dest="hudi_rs", action="store_false",
                   help="skip the version 8 copy and hudi-rs's read_stream (run when `hudi` is installed)")


if __name__ == "__main__":  # the child process of run_contender
    child_entry(sys.argv, child_main, "lsm-lab bench scan")
