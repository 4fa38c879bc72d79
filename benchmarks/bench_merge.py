#!/usr/bin/env python
"""Merge benchmark: k sorted Parquet runs, each contender in its own process.

    python benchmarks/bench_merge.py --rows 8000000 --k 8 --json /tmp/merge8m.json

All the work is in lsm_lab/bench/merge.py (also reachable as ``lsm-lab bench merge``).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lsm_lab.bench.merge import main

if __name__ == "__main__":
    sys.exit(main())
