#!/usr/bin/env python
"""Log format v1 vs v2: bytes on disk, and a MOR snapshot read, lsm_lab vs hudi-rs.

    python benchmarks/bench_v1_v2.py --rows 1000000
    python benchmarks/bench_v1_v2.py --rows 100000 --json

All the work is in lsm_lab/bench/interop.py (also reachable as ``lsm-lab bench interop``).
"""

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lsm_lab.bench.interop import format_report, run  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=1_000_000, help="trips in the MOR table (default 1000000)")
    p.add_argument("--update-fraction", type=float, default=0.1, help="fraction updated per round (default 0.1)")
    p.add_argument("--rounds", type=int, default=2, help="upsert rounds (default 2)")
    p.add_argument("--repeat", type=int, default=3, help="timed reads per reader, best reported (default 3)")
    p.add_argument("--dir", help="work folder, kept afterwards (default: a temporary folder, removed)")
    p.add_argument("--json", action="store_true", help="print JSON")
    args = p.parse_args()
    report = run(rows=args.rows, update_fraction=args.update_fraction, rounds=args.rounds, repeat=args.repeat,
                 work_dir=args.dir)
    print(json.dumps(report, indent=2) if args.json else format_report(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
