"""What streaming a write saves: peak RSS and time of writing N rows from a RecordBatchReader vs one table.

    lsm-lab bench write-stream [--rows 1000000] [--buffer-rows N] [--op insert] [--layout lsm_tree] [--json OUT]

The input is N new trips (lab/datagen.py) in one Parquet file, written once by the
parent in row groups of 64k rows.  Each contender then writes it into its own empty
table (MERGE_ON_READ, partitioned by city, 4 buckets; `--layout default`: the
key-lookup layout) in a fresh Python process, so that its peak RSS (`VmHWM`, as
bench/merge.py reads it) is its own:

    table    pq.read_table(file) → t.insert(table)                  the whole input in memory, one write
    stream   ParquetFile(file, pre_buffer=False).iter_batches() as a RecordBatchReader
             → t.insert(reader, buffer_rows=B)                      chunks of B rows, one commit
    floor    open the table, read nothing                           start-up: the floor of both

Both writes must report the same (`describe_write`: rows in, inserted, updated) and
leave a table of N rows.  Ratios are stream / table of the same run; the 1-minute load
is recorded before each contender (the machine is shared: wall times are noisy, the
RSS figures much less).

Taught in: no chapter (README, "Streaming writes")
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
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
from lsm_lab.filegroup.stream_write import DEFAULT_BUFFER_ROWS
from lsm_lab.lab.datagen import TripsGenerator
from lsm_lab.services.commit import describe_write

CONTENDERS = ("floor", "table", "stream")
ROW_GROUP = 65_536
GEN_CHUNK = 500_000  # rows generated at a time by the parent (its own memory bounded)


def make_input(path: Path, rows: int, *, seed: int = 7) -> int:
    """N new trips into one Parquet file; returns its size in bytes."""
    import pyarrow.parquet as pq

    gen = TripsGenerator(seed)
    writer: pq.ParquetWriter | None = None
    done = 0
    try:
        while done < rows:
            batch = gen.inserts(min(GEN_CHUNK, rows - done))
            gen.keys = gen.keys.slice(0, 0)  # the generator's memory of keys: not needed (inserts only)
            gen.cities = gen.cities.slice(0, 0)
            if writer is None:
                writer = pq.ParquetWriter(path, batch.schema)
            writer.write_table(batch, row_group_size=ROW_GROUP)
            done += batch.num_rows
    finally:
        if writer is not None:
            writer.close()
    return path.stat().st_size


def child_main(job_json: str) -> None:
    """Inside the child process: one contender, one RESULT line."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    job = json.loads(job_json)
    t = open_table(job["table"])
    started = time.perf_counter()
    report = ""
    if job["contender"] == "table":
        instant = getattr(t, job["op"])(pq.read_table(job["input"]))
        report = describe_write(t.instant_metadata(instant))
    elif job["contender"] == "stream":
        f = pq.ParquetFile(job["input"], pre_buffer=False)  # pre_buffer's cache keeps every row group read
        reader = pa.RecordBatchReader.from_batches(f.schema_arrow, f.iter_batches())
        instant = getattr(t, job["op"])(reader, buffer_rows=job["buffer_rows"])
        report = describe_write(t.instant_metadata(instant))
    seconds = time.perf_counter() - started
    print_result({"seconds": seconds, "report": report, "peak_rss_bytes": peak_rss_bytes()})


def run_contender(job: dict[str, Any], *, timeout: float = 7200) -> dict[str, Any]:
    return {"contender": job["contender"], **run_child("lsm_lab.bench.write_stream", job, timeout=timeout,
                                                       what=f"bench write-stream: the {job['contender']} child",
                                                       env={"TQDM_DISABLE": "1"})}


def run(rows: int = 1_000_000, repeats: int = 1, buffer_rows: int = DEFAULT_BUFFER_ROWS, op: str = "insert",
        layout: str = "lsm_tree", log: Callable[[str], None] = print) -> dict[str, Any]:
    """Write the input once, then each contender into a fresh table (`repeats` times, medians kept)."""
    if rows < 1 or repeats < 1 or buffer_rows < 1:
        raise InputError(f"--rows, --repeats and --buffer-rows must be at least 1, got {rows}, {repeats}, {buffer_rows}")
    folder = Path(tempfile.mkdtemp(prefix="lsm_lab_bench_write_stream_"))
    try:
        log(f"writing the input: {rows:,} trips …")
        size = make_input(folder / "input.parquet", rows)
        runs: dict[str, list[dict[str, Any]]] = {c: [] for c in CONTENDERS}
        for r in range(repeats):
            for c in CONTENDERS:
                path = folder / f"{c}{r}"
                create_table(path, name="trips", record_key="uuid", partition_by="city", ordering_field="ts",
                             table_type="MERGE_ON_READ", layout=layout, num_buckets=4)
                runs[c].append(run_contender({"contender": c, "table": str(path), "input": str(folder / "input.parquet"),
                                              "op": op, "buffer_rows": buffer_rows}))
                got = runs[c][-1]
                log(f"  {c}: {got['seconds']:.2f} s, {got['peak_rss_bytes'] / 2**20:.0f} MiB peak RSS, "
                    f"load {got['load_1m_before']:.1f}")
                if c != "floor":
                    written = open_table(path).read(columns=["uuid"]).num_rows
                    if written != rows:
                        raise InputError(f"bench write-stream: the {c} write left {written:,} rows, not {rows:,}")
                shutil.rmtree(path, ignore_errors=True)
        if runs["table"][0]["report"] != runs["stream"][0]["report"]:
            raise InputError(f"bench write-stream: the reports differ: {runs['table'][0]['report']!r} vs "
                             f"{runs['stream'][0]['report']!r}")
        out: dict[str, Any] = {"rows": rows, "repeats": repeats, "buffer_rows": buffer_rows, "op": op,
                               "layout": layout, "input_bytes": size, "cpus": os.cpu_count(),
                               "report": runs["table"][0]["report"], "contenders": {}}
        for c, recs in runs.items():
            recs.sort(key=lambda x: x["seconds"])
            mid = recs[len(recs) // 2]
            out["contenders"][c] = {"seconds": mid["seconds"],
                                    "peak_rss_bytes": sorted(x["peak_rss_bytes"] for x in recs)[len(recs) // 2],
                                    "load_1m_before": max(x["load_1m_before"] or 0 for x in recs)}
        return out
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def report(result: dict[str, Any]) -> str:
    c = result["contenders"]
    lines = [f"{result['op']} of {result['rows']:,} rows ({result['input_bytes'] / 2**20:.0f} MiB of Parquet input), "
             f"{result['layout']} MERGE_ON_READ, 3 partitions{' x 4 buckets' if result['layout'] == 'lsm_tree' else ''}; stream buffer {result['buffer_rows']:,} rows; "
             f"{result['cpus']} cores; median of {result['repeats']}",
             f"  both: {result['report']}",
             f"{'contender':<10}{'seconds':>9}{'peak RSS MiB':>14}{'load':>6}"]
    for name in CONTENDERS:
        r = c[name]
        lines.append(f"{name:<10}{r['seconds']:>9.2f}{r['peak_rss_bytes'] / 2**20:>14.0f}{r['load_1m_before']:>6.1f}")
    floor = c["floor"]["peak_rss_bytes"]
    rss = c["stream"]["peak_rss_bytes"] / c["table"]["peak_rss_bytes"]
    above = (c["stream"]["peak_rss_bytes"] - floor) / max(1, c["table"]["peak_rss_bytes"] - floor)
    lines.append(f"stream / table: peak RSS {rss:.2f} (target <= 0.25; above the start-up floor: {above:.2f}), "
                 f"time {c['stream']['seconds'] / c['table']['seconds']:.2f}")
    return "\n".join(lines)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rows", type=int, default=1_000_000, help="rows written (default 1000000)")
    p.add_argument("--repeats", type=int, default=1, help="runs per contender, medians reported (default 1)")
    p.add_argument("--buffer-rows", type=int, default=DEFAULT_BUFFER_ROWS,
                   help=f"the streamed write's chunk, in rows (default {DEFAULT_BUFFER_ROWS}, the library's)")
    p.add_argument("--op", default="insert", choices=["insert", "upsert", "bulk_insert"], help="write operation")
    p.add_argument("--layout", default="lsm_tree", choices=["lsm_tree", "default"], help="table layout")
    p.add_argument("--json", metavar="OUT", help="also write the figures as JSON")


def run_from_args(args: argparse.Namespace) -> int:
    result = run(rows=args.rows, repeats=args.repeats, buffer_rows=args.buffer_rows, op=args.op, layout=args.layout)
    print(report(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":  # the child process of run_contender
    child_entry(sys.argv, child_main, "lsm-lab bench write-stream")
