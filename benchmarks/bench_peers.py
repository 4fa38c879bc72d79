#!/usr/bin/env python
"""Peers benchmark: the issue-16 upsert workload, lsm_lab vs Apache Paimon (Rust) and hudi-rs.

    make bench-peers                       # creates .venv-peers (pypaimon, pypaimon-rust, pyarrow<20) first
    python benchmarks/bench_peers.py --rows 1000000 --peer-python .venv-peers/bin/python

All the work is in lsm_lab/bench/peers.py (also reachable as ``lsm-lab bench peers``).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lsm_lab.cli import main  # the `lsm-lab` command, its Arrow allocator included

if __name__ == "__main__":
    sys.exit(main(["bench", "peers", *sys.argv[1:]]))
