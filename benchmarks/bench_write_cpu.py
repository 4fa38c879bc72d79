#!/usr/bin/env python
"""CPU seconds of the peers' upsert workload, write by write, in one process.

    python benchmarks/bench_write_cpu.py --rows 1000000 [--dir DIR]

On a shared machine wall-clock seconds swing with other processes' load; the CPU
time of this process (`time.process_time()`, all its threads) moves much less,
so it compares two versions of the code run at different moments (point
PYTHONPATH at each). The workload is `lsm_lab.bench.peers.write_workload`'s:
a bulk insert, 3 x 10% upserts, a 1% delete, then a snapshot read of two columns.
"""

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lsm_lab.bench.peers import KEY, PARTITION, replay, workload_table, write_workload


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--dir", help="work folder (default: a temporary folder, removed afterwards)")
    args = ap.parse_args()
    folder = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="lsm_lab_write_cpu_"))
    try:
        data = folder / "data"
        files = sorted(data.glob("*.parquet")) or write_workload(data, args.rows)
        shutil.rmtree(folder / "table", ignore_errors=True)
        table = workload_table(folder / "table")
        total_wall = total_cpu = 0.0
        for f, rows, wall, cpu in replay(table, files):
            total_wall, total_cpu = total_wall + wall, total_cpu + cpu
            print(f"{f.name:<20} {rows:>9,} rows  wall {wall:6.3f} s  cpu {cpu:6.3f} s")
        print(f"{'writes':<20} {'':>14}  wall {total_wall:6.3f} s  cpu {total_cpu:6.3f} s")
        wall, cpu = time.perf_counter(), time.process_time()
        rows = table.read(columns=[PARTITION, KEY]).num_rows
        print(f"{'read':<20} {rows:>9,} rows  wall {time.perf_counter() - wall:6.3f} s  "
              f"cpu {time.process_time() - cpu:6.3f} s")
    finally:
        if not args.dir:
            shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
