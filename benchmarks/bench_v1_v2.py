#!/usr/bin/env python
"""Log format v1 vs v2: bytes on disk, and a MOR snapshot read, lsm_lab vs hudi-rs.

    python benchmarks/bench_v1_v2.py --rows 1000000
    python benchmarks/bench_v1_v2.py --rows 100000 --json

A thin wrapper over ``lsm-lab bench interop`` (same options); the work is in lsm_lab/bench/interop.py.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lsm_lab.cli import main  # the `lsm-lab` command, its Arrow allocator included

if __name__ == "__main__":
    sys.exit(main(["bench", "interop", *sys.argv[1:]]))
