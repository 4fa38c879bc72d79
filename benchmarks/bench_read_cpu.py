#!/usr/bin/env python
"""Wall and CPU seconds of repeated snapshot reads of one table, in one process.

    python benchmarks/bench_read_cpu.py TABLE [--columns city uuid] [--repeat 9] [--by-key]

`lsm-lab bench peers` times one read per process, which a shared machine's load
moves by 2x; this script reads the same table `--repeat` times and prints the
first read and the minimum and median of the rest (`time.process_time()`: every
thread of the process). Point PYTHONPATH at each version of the code and
alternate them. `--by-key` reads with `positions=False`: every slice is merged
by key (`merge/overlay.py`), RECORD_POSITIONS ignored, so that what merging by
position (filegroup/posmerge.py) saves can be measured. `--trust-positions` skips
the check that every position names the base row of its log key
(`posmerge.positions_name_their_keys`), to measure what that check costs.
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lsm_lab.api import open_table


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("table")
    ap.add_argument("--columns", nargs="*", default=["city", "uuid"])
    ap.add_argument("--repeat", type=int, default=9)
    ap.add_argument("--by-key", action="store_true", help="read with positions=False: every slice merged by key")
    ap.add_argument("--trust-positions", action="store_true",
                    help="skip the check that each position names its log key's base row (measures its cost only)")
    args = ap.parse_args()
    if args.trust_positions:  # a measuring switch, not a read option: the check guards against damaged positions
        from lsm_lab.filegroup import posmerge

        posmerge.positions_name_their_keys = lambda *a: True
    runs = []
    for _ in range(max(2, args.repeat)):
        wall, cpu = time.perf_counter(), time.process_time()
        rows = open_table(args.table).read(columns=args.columns or None, positions=not args.by_key).num_rows
        runs.append((time.perf_counter() - wall, time.process_time() - cpu))
    rest = runs[1:]
    walls, cpus = [w for w, _ in rest], [c for _, c in rest]
    print(f"{rows:,} rows  first wall {runs[0][0]:.3f} s cpu {runs[0][1]:.3f} s  "
          f"then wall min {min(walls):.3f} med {statistics.median(walls):.3f} s  "
          f"cpu min {min(cpus):.3f} med {statistics.median(cpus):.3f} s  load {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
