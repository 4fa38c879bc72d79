#!/usr/bin/env python
"""Lookup benchmark: the same trips as an lsm_tree table and a default table, random point lookups.

    python benchmarks/bench_lookup.py --rows 10000000 --lookups 100 --dir /tmp/lookup10m --json /tmp/lookup10m.json
    python benchmarks/bench_lookup.py --cumulative --json /tmp/cumulative.json      # RFC-06's trade-off

All the work is in lsm_lab/bench/lookup.py (also reachable as ``lsm-lab bench lookup``).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lsm_lab.bench.lookup import main

if __name__ == "__main__":
    sys.exit(main())
