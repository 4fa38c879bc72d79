#!/usr/bin/env python
"""Cold point lookups of one table in one process: median and quartiles, for comparing code versions.

    python benchmarks/lookup_loop.py TABLES_DIR [--layout lsm_tree] [--rounds 3]

TABLES_DIR is the folder of `lsm-lab bench lookup --dir D` (its tables and `lookup_bench.json`, whose
present keys are looked up). Before each lookup the footer cache is cleared and 24 MB are swept through
the CPU caches (the bench's baseline does that between lsm_tree's lookups); the first round is a warm-up.
`lsm-lab bench lookup` interleaves layouts, which a shared machine's load moves by ±5%; this loop measures
one layout alone, so that two versions of the code can be alternated (point PYTHONPATH at each: the
script puts its own checkout first only when PYTHONPATH is unset).
"""

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

if not os.environ.get("PYTHONPATH"):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import lsm_lab
from lsm_lab.table.lookup import clear_footer_cache, open_lookup


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tables_dir", help="the folder of `lsm-lab bench lookup --dir D`")
    ap.add_argument("--layout", default="lsm_tree", help="which of its tables (default lsm_tree)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds over the present keys, the first a warm-up")
    args = ap.parse_args()
    root = Path(args.tables_dir)
    keys = json.loads((root / "lookup_bench.json").read_text())["present"]
    reader = open_lookup(lsm_lab.open_table(root / args.layout))
    sweep = bytearray(24 << 20)
    times: list[float] = []
    for _ in range(max(2, args.rounds)):
        for k in keys:
            sweep[::64] = b"\x01" * len(sweep[::64])
            clear_footer_cache()
            t0 = time.perf_counter()
            reader.lookup([k])
            times.append(time.perf_counter() - t0)
    times = times[len(keys):]
    q1, med, q3 = (x * 1e3 for x in statistics.quantiles(times, n=4))
    print(f"{args.layout}: {len(times)} cold lookups  median {med:.3f} ms  quartiles {q1:.3f} / {q3:.3f} ms  "
          f"load {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
