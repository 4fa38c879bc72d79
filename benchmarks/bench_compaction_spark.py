#!/usr/bin/env python
"""Compaction benchmark on Spark: sorted merge vs hash merge vs a window-function job.

    python benchmarks/bench_compaction_spark.py --rows 8000000 --k 1 4 16 \
        --json /tmp/compaction_spark.json --plot docs/figures/compaction_spark.png

All the work is in lsm_lab/bench/compaction.py (also reachable as ``lsm-lab bench compaction --engine spark``).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lsm_lab.bench.compaction import main

if __name__ == "__main__":
    sys.exit(main())
