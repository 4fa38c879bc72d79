"""What change data capture costs: CDC log bytes per logging mode, write time, and reading the stream.

    lsm-lab bench cdc [--rows 50000] [--repeats 3] [--json OUT]

The same workload runs on four copies of one lsm_tree MERGE_ON_READ trips
table (4 buckets, partitioned by city) that differ only in their CDC config:

    baseline            cdc=False                  (no CDC logs: read_cdc infers from snapshots)
    OP_KEY_ONLY         cdc=True, op + record key
    DATA_BEFORE         cdc=True, op + key + before image
    DATA_BEFORE_AFTER   cdc=True, op + key + before and after images (the default)

    workload   insert N · upsert N/5 updates · upsert N/10 new keys · delete N/50

For each table it reports the bytes of the `.cdc.parquet` logs the workload
left (and their share of all data bytes), the time of the four writes (median
of `--repeats` rounds, each on fresh tables, the four kinds in turn), and the
median time of `read_cdc` over the whole workload (`--repeats` runs).
Ratios are against the baseline of the same run: write time with CDC / without,
and read_cdc from CDC logs / read_cdc by inference from snapshots.  The modes
must agree with each other and with inference on the change records (op and
key of every row); `agree` says whether they did.

The bytes follow from the content: OP_KEY_ONLY < DATA_BEFORE < DATA_BEFORE_AFTER.
Reading is where the modes trade back: the fewer images a log keeps, the more
of them read_cdc has to look up in the snapshots around each commit.

Taught in: notebooks/13_change_data_capture.ipynb
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
from lsm_lab.errors import InputError
from lsm_lab.filegroup.fsview import list_data_files
from lsm_lab.lab.datagen import TripsGenerator
from lsm_lab.progress import bar

MODES = ("OP_KEY_ONLY", "DATA_BEFORE", "DATA_BEFORE_AFTER")
BASELINE = "baseline"
TABLES = (BASELINE, *MODES)
WRITES = ("insert", "upsert (updates)", "upsert (new keys)", "delete")


def workload(rows: int, seed: int) -> list[tuple[str, str, pa.Table]]:
    """(step name, Table method, batch) of the fixed workload at `rows` rows; the same batches for every table."""
    gen = TripsGenerator(seed)
    return [("insert", "insert", gen.inserts(rows)),
            ("upsert (updates)", "upsert", gen.updates(max(1, rows // 5))),
            ("upsert (new keys)", "upsert", gen.inserts(max(1, rows // 10))),
            ("delete", "delete", gen.deletes(max(1, rows // 50)))]


def file_bytes(table: Table) -> tuple[int, int]:
    """(bytes of the CDC logs, bytes of all data files including them) under the table folder."""
    cdc = total = 0
    for _, path, name in list_data_files(table.path):
        size = path.stat().st_size
        total += size
        if name.content == "cdc":
            cdc += size
    return cdc, total


def change_summary(stream: pa.Table) -> dict[str, int]:
    """Rows of a change stream per op ("i", "u", "d")."""
    counts = stream.group_by("op").aggregate([("op", "count")]).to_pydict()
    return {op: int(n) for op, n in zip(counts["op"], counts["op_count"], strict=True)}


def change_keys(stream: pa.Table) -> list[tuple[str, str]]:
    """(op, record_key) of every change, sorted: what every mode and inference must agree on."""
    return sorted(zip(stream.column("op").to_pylist(), stream.column("record_key").to_pylist(), strict=True))


def _write(table: Table, steps: list[tuple[str, str, pa.Table]], tick: Callable[[], None]) -> dict[str, float]:
    """Run the workload on `table`; seconds per step."""
    seconds: dict[str, float] = {}
    for step, method, batch in steps:
        t0 = time.perf_counter()
        getattr(table, method)(batch)
        seconds[step] = time.perf_counter() - t0
        tick()
    return seconds


def run(rows: int = 50_000, repeats: int = 3, seed: int = 7, log: Callable[[str], None] = print,
        progress: bool | None = None) -> dict[str, Any]:
    """Every table, the workload, the stream read; returns {"rows", "repeats", "tables": {name: ...}, "agree"}.

    Each round writes the workload to a fresh table of every kind, in turn (so
    a burst of load on the machine falls on all of them); write times are the
    median over `repeats` rounds, and the stream is read `repeats` times from
    the last round's tables.
    """
    if rows < 1 or repeats < 1:
        raise InputError(f"bench cdc needs --rows and --repeats of at least 1 (got rows={rows}, repeats={repeats})")
    steps = workload(rows, seed)
    kw: dict[str, Any] = {"name": "trips", "record_key": "uuid", "partition_by": "city", "ordering_field": "ts",
                          "table_type": "MERGE_ON_READ", "layout": "lsm_tree", "num_buckets": 4}
    folder = Path(tempfile.mkdtemp(prefix="lsm_lab_bench_cdc_"))
    out: dict[str, dict[str, Any]] = {}
    keys: dict[str, list[tuple[str, str]]] = {}
    rounds: dict[str, list[dict[str, float]]] = {name: [] for name in TABLES}
    tables: dict[str, Table] = {}
    log(f"workload: {' · '.join(f'{s} {batch.num_rows:,}' for s, _, batch in steps)}; {repeats} round(s)")
    try:
        total = len(TABLES) * repeats * (len(steps) + 1)
        with bar(total=total, desc="bench cdc", unit="step", force=progress) as b:
            def tick() -> None:
                if b is not None:
                    b.update(1)

            for r in range(repeats):
                for name in TABLES:
                    cdc = {"cdc": False} if name == BASELINE else {"cdc": True, "cdc_mode": name}
                    tables[name] = create_table(folder / f"{name.lower()}_{r}", **kw, **cdc)
                    rounds[name].append(_write(tables[name], steps, tick))
                log(f"  round {r + 1}: writes " + ", ".join(f"{n} {sum(rounds[n][-1].values()):.2f} s" for n in TABLES))
            for name in TABLES:
                table = tables[name]
                times, stream = [], None
                for _ in range(repeats):
                    t0 = time.perf_counter()
                    stream = table.read_cdc(None)
                    times.append(time.perf_counter() - t0)
                    tick()
                assert stream is not None
                cdc_bytes, data_bytes = file_bytes(table)
                keys[name] = change_keys(stream)
                write_seconds = {step: statistics.median(w[step] for w in rounds[name]) for step in WRITES}
                out[name] = {"cdc_bytes": cdc_bytes, "data_bytes": data_bytes, "write_seconds": write_seconds,
                             "write_total": statistics.median(sum(w.values()) for w in rounds[name]),
                             "read_cdc_seconds": statistics.median(times),
                             "changes": stream.num_rows, "by_op": change_summary(stream),
                             "inferred_rows": int(pa.compute.sum(stream.column("inferred")).as_py() or 0)}
                log(f"  {name}: CDC logs {cdc_bytes:,} B, read_cdc {out[name]['read_cdc_seconds']:.2f} s "
                    f"({stream.num_rows:,} changes)")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    agree = all(keys[name] == keys[BASELINE] for name in MODES)
    return {"rows": rows, "repeats": repeats, "seed": seed, "tables": out, "agree": agree}


def report(result: dict[str, Any]) -> str:
    """The figures as a text table, ratios against the baseline of the same run."""
    t = result["tables"]
    base = t[BASELINE]
    lines = [f"{result['rows']:,} rows; workload: {', '.join(WRITES)}; writes and read_cdc: median of "
             f"{result['repeats']}",
             f"{'table':<19}{'CDC bytes':>12}{'B/change':>10}{'of data':>9}{'write s':>9}{'×base':>7}"
             f"{'read_cdc s':>12}{'×infer':>8}{'changes':>9}"]
    for name in TABLES:
        r = t[name]
        per = r["cdc_bytes"] / r["changes"] if r["changes"] else 0.0
        share = r["cdc_bytes"] / r["data_bytes"] if r["data_bytes"] else 0.0
        w = r["write_total"] / base["write_total"] if base["write_total"] > 0 else float("nan")
        rd = r["read_cdc_seconds"] / base["read_cdc_seconds"] if base["read_cdc_seconds"] > 0 else float("nan")
        lines.append(f"{name:<19}{r['cdc_bytes']:>12,}{per:>10.1f}{share:>8.0%} {r['write_total']:>9.2f}{w:>6.2f}x"
                     f"{r['read_cdc_seconds']:>12.3f}{rd:>7.2f}x{r['changes']:>9,}")
    lines.append("baseline: no CDC logs, read_cdc infers every change from the snapshots around each commit")
    if not result["agree"]:
        lines.append("WARNING: the modes and inference disagree on the change records (op, key)")
    return "\n".join(lines)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rows", type=int, default=50_000, help="rows of the first insert; the other writes scale "
                   "with it (default 50000)")
    p.add_argument("--repeats", type=int, default=3, help="rounds of writes and read_cdc runs per table, medians "
                   "reported (default 3)")
    p.add_argument("--json", metavar="OUT", help="also write the figures as JSON")


__all__ = ["BASELINE", "MODES", "TABLES", "add_arguments", "file_bytes", "report", "run", "workload"]
