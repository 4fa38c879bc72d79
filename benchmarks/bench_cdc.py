#!/usr/bin/env python
"""CDC benchmark: CDC log bytes per logging mode, write time with/without CDC, read_cdc from logs vs inference.

    python benchmarks/bench_cdc.py [--rows 50000] [--repeats 3] [--json OUT]

All the work is in lsm_lab/bench/cdc.py (also reachable as ``lsm-lab bench cdc``).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lsm_lab.cli import main  # the `lsm-lab` command, its Arrow allocator included

if __name__ == "__main__":
    sys.exit(main(["bench", "cdc", *sys.argv[1:]]))
