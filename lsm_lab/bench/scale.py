"""Cost against size: does each operation grow linearly with the table?

    lsm-lab bench scale [--rows 250000 1000000 ...] [--repeats 1] [--plot out.png] [--json OUT]

For each size N, an lsm_tree MERGE_ON_READ trips table (partitioned by city,
4 buckets, ordering field ts) goes through four operations, each in a Python
process of its own (its time is measured inside the process around the call;
its peak RSS is its own `VmHWM`, as bench/merge.py reads it):

    bulk_insert   N trips (read from a Parquet file first)      one base file per bucket
    upsert        N/10 updates spread over every key range      a log in every file slice
    read          table.read(): the snapshot, every slice merged
    compaction    table.compact(strategy="full"): logs + base -> a new base, every slice

The inputs are generated once per N by the parent (TripsGenerator, chunk by
chunk into Parquet), outside every timing. A repeat rebuilds the table from the
start; the median of the repeats is kept.

Then, per operation, the exponent e of time ∝ N^e (and of peak RSS ∝ N^e) is the
least-squares slope of log(value) against log(N) over the measured sizes: e ≈ 1
is linear, e > 1 grows faster than the data (issue 33's target: e <= 1.1); the
slope between each two consecutive sizes is reported too (a fit over three sizes
can hide a last step that bends up). Each child also reports its CPU in user and in
kernel mode and its page faults (`getrusage` around the call), with their exponents: on
a virtual machine a page touched for the first time can cost the kernel (and the host
behind it) more than the work done in it, so wall time can bend up where the user CPU
stays linear; the split says which one grew. A
process's peak RSS includes the interpreter and its libraries (about 100 MiB),
so its exponent is below 1 at small N; a write holds its input table, so its
RSS grows with N by design.

Simplified compared with a real scaling study: one table shape, a local disk,
few sizes (the exponent of two sizes is one slope), wall times on a shared
machine (the 1-minute load is recorded before each operation).

Taught in: no chapter (docs/PERFORMANCE.md, "Cost against size")
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from lsm_lab.bench.child import child_entry, print_result, run_child
from lsm_lab.errors import InputError

OPS = ("bulk_insert", "upsert", "read", "compaction")
DEFAULT_ROWS = (250_000, 1_000_000)
#: rows generated per chunk while the inputs are written (bounds the parent's memory)
CHUNK = 1_000_000
TARGET_EXPONENT = 1.1
#: what each child reports, medians kept: wall time, peak RSS, CPU in user and kernel mode, page faults
MEASURES = ("seconds", "peak_rss_bytes", "user_seconds", "sys_seconds", "page_faults")


def fit_exponent(sizes: Sequence[float], values: Sequence[float]) -> float | None:
    """The least-squares slope of log(value) on log(size): e in value ∝ size^e (None below two sizes)."""
    points = [(math.log(n), math.log(v)) for n, v in zip(sizes, values) if n > 0 and v > 0]
    if len({x for x, _ in points}) < 2:
        return None
    mx = statistics.fmean(x for x, _ in points)
    my = statistics.fmean(y for _, y in points)
    return sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x, _ in points)


def write_inputs(folder: Path, rows: int, *, seed: int = 7) -> dict[str, Path]:
    """The N inserts and N/10 updates as Parquet files (generated chunk by chunk)."""
    import pyarrow.parquet as pq

    from lsm_lab.lab.datagen import TripsGenerator  # start-up: on first use

    folder.mkdir(parents=True, exist_ok=True)
    gen = TripsGenerator(seed)
    paths = {"bulk_insert": folder / "inserts.parquet", "upsert": folder / "updates.parquet"}
    writer = None
    done = 0
    try:
        while done < rows:
            chunk = gen.inserts(min(CHUNK, rows - done))
            if writer is None:
                writer = pq.ParquetWriter(paths["bulk_insert"], chunk.schema)
            writer.write_table(chunk)
            done += chunk.num_rows
    finally:
        if writer is not None:
            writer.close()
    pq.write_table(gen.updates(max(1, rows // 10)), paths["upsert"])
    return paths


def child_main(job_json: str) -> None:
    """Inside the child process: one operation on the table, one RESULT line: seconds, peak RSS and `rows`
    (rows written, rows read, or for the compaction the file slices it rewrote)."""
    import pyarrow.parquet as pq

    from lsm_lab.api import create_table, open_table  # start-up: on first use
    from lsm_lab.bench.merge import peak_rss_bytes  # start-up: on first use

    job = json.loads(job_json)
    op, path = job["op"], Path(job["table"])
    data = pq.read_table(job["input"]) if job.get("input") else None  # before the clock: the caller's data
    if op == "bulk_insert":
        table = create_table(path, name="trips", record_key="uuid", partition_by="city", ordering_field="ts",
                             table_type="MERGE_ON_READ", layout="lsm_tree", num_buckets=4)
    else:
        table = open_table(path)
    import resource  # start-up: only the child measures its CPU (POSIX; the bench runs where `fork` does)

    before = resource.getrusage(resource.RUSAGE_SELF)
    started = time.perf_counter()
    if op == "bulk_insert":
        table.bulk_insert(data)
        rows = data.num_rows if data is not None else 0
    elif op == "upsert":
        table.upsert(data)
        rows = data.num_rows if data is not None else 0
    elif op == "read":
        rows = table.read().num_rows
    elif op == "compaction":
        if table.compact(strategy="full") is None:
            raise InputError(f"bench scale: the full compaction of {path} found nothing to compact")
        rows = len(table.latest_slices())  # file slices, each now one new base file
    else:
        raise InputError(f"bench scale: unknown operation {op!r}; choose one of {', '.join(OPS)}")
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_SELF)
    print_result({"seconds": seconds, "rows": rows, "peak_rss_bytes": peak_rss_bytes(),
                  "user_seconds": after.ru_utime - before.ru_utime, "sys_seconds": after.ru_stime - before.ru_stime,
                  "page_faults": after.ru_minflt - before.ru_minflt})


def run_op(op: str, table: Path, inputs: dict[str, Path], *, timeout: float = 7200) -> dict[str, Any]:
    """One operation in a fresh Python process (the command's allocator, lsm_lab/allocator.py)."""
    job = {"op": op, "table": str(table), "input": str(inputs[op]) if op in inputs else None}
    return run_child("lsm_lab.bench.scale", job, what=f"bench scale: the {op} child", timeout=timeout)


def run(rows: Sequence[int] = DEFAULT_ROWS, repeats: int = 1, log: Callable[[str], None] = print,
        work_dir: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """Every operation at every size (`repeats` times, a fresh table each time); medians and exponents."""
    sizes = sorted(set(rows))
    if not sizes or sizes[0] < 10 or repeats < 1:
        raise InputError(f"--rows needs sizes of at least 10 rows and --repeats at least 1, got {list(rows)} "
                         f"and {repeats}")
    folder = Path(tempfile.mkdtemp(prefix="lsm_lab_bench_scale_", dir=work_dir))
    points: list[dict[str, Any]] = []
    try:
        for n in sizes:
            log(f"{n:,} rows: writing the inputs …")
            inputs = write_inputs(folder / f"in_{n}", n)
            runs: dict[str, list[dict[str, Any]]] = {op: [] for op in OPS}
            for r in range(repeats):
                table = folder / f"t_{n}_{r}"
                for op in OPS:
                    runs[op].append(run_op(op, table, inputs))
                    rec = runs[op][-1]
                    log(f"  {op:<12} {rec['seconds']:8.2f} s  {rec['peak_rss_bytes'] / 2**20:7.0f} MiB peak RSS  "
                        f"(load {rec['load_1m_before']:.1f})")
                shutil.rmtree(table, ignore_errors=True)
            shutil.rmtree(inputs["bulk_insert"].parent, ignore_errors=True)
            read_rows = {rec["rows"] for rec in runs["read"]}
            if read_rows != {n}:
                raise InputError(f"bench scale: the snapshot read of the {n:,}-row table returned {read_rows} rows")
            for op, recs in runs.items():
                points.append({"rows": n, "op": op, **{k: statistics.median(x[k] for x in recs) for k in MEASURES},
                               "out_rows": recs[0]["rows"], "load_1m_before": max(x["load_1m_before"] for x in recs)})
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    exponents: dict[str, dict[str, Any]] = {}
    for op in OPS:
        mine = [p for p in points if p["op"] == op]
        exponents[op] = {**_exponents(mine), "steps": [{"from": a["rows"], "to": b["rows"], **_exponents([a, b])}
                                                       for a, b in itertools.pairwise(mine)]}
    return {"rows": sizes, "repeats": repeats, "cpus": os.cpu_count(), "points": points, "exponents": exponents,
            "target_exponent": TARGET_EXPONENT}


def _exponents(points: list[dict[str, Any]]) -> dict[str, float | None]:
    """The exponents of time, peak RSS, user CPU, kernel CPU and page faults fitted through `points` (rounded;
    None below two sizes, or for a measure a point lacks)."""
    ns = [p["rows"] for p in points]
    out: dict[str, float | None] = {}
    for name, key in (("time", "seconds"), ("rss", "peak_rss_bytes"), ("user", "user_seconds"),
                      ("sys", "sys_seconds"), ("faults", "page_faults")):
        e = fit_exponent(ns, [p[key] for p in points]) if all(key in p for p in points) else None
        out[name] = None if e is None else round(e, 3)
    return out


def _short(n: int) -> str:
    return f"{n / 1e6:g}M" if n >= 1_000_000 else f"{n / 1e3:g}k" if n >= 1000 else str(n)


def report(result: dict[str, Any]) -> str:
    """One line per operation and size, then the fitted exponents against the target."""
    lines = [f"cost against size: {', '.join(f'{n:,}' for n in result['rows'])} rows; each operation in its own "
             f"process; median of {result['repeats']}; {result['cpus']} CPUs",
             f"{'operation':<12}{'rows':>12}{'seconds':>10}{'Mrows/s':>9}{'peak RSS MiB':>14}{'user s':>8}{'sys s':>7}"
             f"{'faults k':>10}{'load':>6}"]
    for p in result["points"]:
        speed = p["rows"] / p["seconds"] / 1e6 if p["seconds"] > 0 else float("nan")
        lines.append(f"{p['op']:<12}{p['rows']:>12,}{p['seconds']:>10.2f}{speed:>9.2f}"
                     f"{p['peak_rss_bytes'] / 2**20:>14.0f}{p.get('user_seconds', float('nan')):>8.2f}"
                     f"{p.get('sys_seconds', float('nan')):>7.2f}{p.get('page_faults', 0) / 1e3:>10.0f}"
                     f"{p['load_1m_before']:>6.1f}")

    def show(e: float | None) -> str:
        return "-" if e is None else f"{e:.2f}"

    lines.append(f"exponent e (value ∝ N^e, least squares over the sizes; target for time: e <= "
                 f"{result['target_exponent']})")
    for op, e in result["exponents"].items():
        verdict = "" if e["time"] is None else ("  ok" if e["time"] <= result["target_exponent"] else "  ABOVE TARGET")
        steps = e.get("steps") or []
        local = ("   between sizes: " + ", ".join(f"{_short(s['from'])}->{_short(s['to'])} {show(s['time'])}"
                                                  for s in steps)
                 if len(steps) > 1 else "")
        lines.append(f"  {op:<12} time e = {show(e['time'])}   peak RSS e = {show(e['rss'])}   user CPU e = "
                     f"{show(e.get('user'))}   kernel CPU e = {show(e.get('sys'))}   page faults e = "
                     f"{show(e.get('faults'))}{verdict}{local}")
    return "\n".join(lines)


def plot(result: dict[str, Any], out: str | os.PathLike[str]) -> None:
    """Time and peak RSS against N, log-log, one line per operation, a slope-1 guide (matplotlib: only here)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullFormatter

    def rows_label(v: float, _: int) -> str:  # plain labels: the log axis's default ones need mathtext fonts
        return _short(int(v))

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, key, label, scale in ((axes[0], "seconds", "seconds", 1.0),
                                  (axes[1], "peak_rss_bytes", "peak RSS (MiB)", 2.0**-20)):
        for op in OPS:
            mine = [p for p in result["points"] if p["op"] == op]
            e = result["exponents"][op]["time" if key == "seconds" else "rss"]
            ax.plot([p["rows"] for p in mine], [p[key] * scale for p in mine], marker="o",
                    label=f"{op} (e = {e:.2f})" if e is not None else op)
        ns = result["rows"]
        first = [p[key] * scale for p in result["points"] if p["rows"] == ns[0]]
        if len(ns) > 1 and first:
            ref = max(first)
            ax.plot(ns, [ref * n / ns[0] for n in ns], linestyle=":", color="grey", label="slope 1 (linear)")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.xaxis.set_major_locator(FixedLocator(ns))  # a tick at every measured size
        ax.xaxis.set_major_formatter(FuncFormatter(rows_label))
        ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        for axis in (ax.xaxis, ax.yaxis):
            axis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("rows (N)")
        ax.set_ylabel(label)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    axes[0].set_title("time of each operation")
    axes[1].set_title("peak RSS of its process")
    fig.suptitle("lsm-lab bench scale: cost against size (log-log)")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rows", type=int, nargs="+", default=list(DEFAULT_ROWS),
                   help="table sizes (default 250000 1000000; issue 33 measures 1000000 4000000 16000000)")
    p.add_argument("--repeats", type=int, default=1, help="runs per size, each on a fresh table; medians "
                                                          "reported (default 1)")
    p.add_argument("--dir", help="parent folder of the work folder (default: the system's temporary folder)")
    p.add_argument("--plot", metavar="PNG", help="also draw time and peak RSS against N, log-log, into this file")
    p.add_argument("--json", metavar="OUT", help="also write the figures as JSON")


def run_from_args(args: argparse.Namespace) -> int:
    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    result = run(rows=args.rows, repeats=args.repeats, log=log, work_dir=args.dir)
    print(report(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    if args.plot:
        plot(result, args.plot)
        print(f"plot written to {args.plot}")
    return 0


if __name__ == "__main__":  # the child process of run_op
    child_entry(sys.argv, child_main, "lsm-lab bench scale")
