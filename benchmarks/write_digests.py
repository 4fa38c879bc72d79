"""The md5 of every file a set of bucket-table writes produces, with the clock fixed: A/B two source trees for bytes.

    PYTHONPATH=<tree A> python benchmarks/write_digests.py OUT_A > a.txt
    PYTHONPATH=<tree B> python benchmarks/write_digests.py OUT_B > b.txt
    diff a.txt b.txt          # nothing: the two trees write the same bytes

A change that should only make a write cheaper (fewer copies, another kernel) must not change a byte
of what it writes. This script writes 20 lsm_tree bucket tables with the instant clock fixed:
MERGE_ON_READ and COPY_ON_WRITE; a one-field and a two-field key; partitioned by one field
hive-style, by one field with "" and null values (table version 9), by two fields, not at all, and at
table version 8. Each table gets a bulk insert, an upsert, an insert and a delete of batches in several
chunks. It prints "md5  relative path" for every data file and every completed timeline file (sorted;
the timeline's temporary and lock files are left out), and the rows each table reads back on stderr.

Simplified compared with a format test: the digests say *whether* two trees differ, not where; a
difference is found with `lsm-lab show` or pyarrow on the two tables.

Taught in: no chapter (docs/PERFORMANCE.md, "Stop 43": the bulk insert's copies)
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import itertools
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa

import lsm_lab
from lsm_lab.timeline import clock

CITIES = ["chennai", "pune", "sao_paulo", "", None]


def batch(n: int, chunks: int, seed: int, *, null_city: bool = False) -> pa.Table:
    """n rows (keys repeat: about two rows a key) in `chunks` record batches."""
    rng = np.random.default_rng(seed)
    ids = [f"k{int(k):06d}" for k in rng.integers(0, n // 2, n)]
    cities = [CITIES[i % (5 if null_city else 3)] for i in range(n)]
    t = pa.table({"id": ids, "n": rng.integers(0, 3, n), "city": pa.array(cities, pa.string()),
                  "zone": [["a", "b"][i % 2] for i in range(n)], "ts": rng.integers(0, 1000, n),
                  "rider": [None if i % 7 == 0 else f"r{i}" for i in range(n)], "fare": rng.random(n)})
    bounds = np.linspace(0, n, chunks + 1).astype(int)
    return pa.Table.from_batches([b for a, e in itertools.pairwise(bounds) for b in t.slice(a, e - a).to_batches()])


def write_tables(out: Path, rows: int) -> None:
    cases = [(ttype, key, part, hive, version, nulls)
             for ttype in ("MERGE_ON_READ", "COPY_ON_WRITE")
             for key in (["id"], ["id", "n"])
             for part, hive, version, nulls in ((["city"], True, 10, False), (["city"], False, 9, True),
                                                (["city", "zone"], True, 10, False), ([], True, 10, False),
                                                (["city"], True, 8, False))]
    for i, (ttype, key, part, hive, version, nulls) in enumerate(cases):
        t = lsm_lab.create_table(out / f"t{i}", name=f"t{i}", record_key=key, partition_by=part or None,
                                 ordering_field="ts", table_type=ttype, layout="lsm_tree", num_buckets=4,
                                 hive_style=hive, table_version=version)
        t.bulk_insert(batch(rows, 4, i, null_city=nulls))
        t.upsert(batch(rows // 3, 3, 100 + i, null_city=nulls))
        t.insert(batch(rows // 12, 1, 200 + i, null_city=nulls))
        t.delete(batch(rows // 20, 2, 300 + i, null_city=nulls).select(["id", "n", "city", "zone", "ts"]))
        print(f"t{i}: {ttype} key={key} partition={part} v{version}: {t.read().num_rows} rows", file=sys.stderr)


def digests(out: Path) -> list[str]:
    lines = []
    for f in sorted(out.rglob("*")):
        if f.is_file() and not f.name.startswith(".") and "lock" not in f.name and ".tmp" not in f.name:
            lines.append(f"{hashlib.md5(f.read_bytes()).hexdigest()}  {f.relative_to(out)}")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Write 20 bucket tables with a fixed clock and print the md5 of every "
                                            "file, to compare what two source trees write.")
    p.add_argument("out", help="a folder for the tables (emptied first)")
    p.add_argument("--rows", type=int, default=60_000, help="rows of each table's bulk insert (default 60,000)")
    args = p.parse_args(argv)
    fixed = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    clock._now = lambda: fixed  # every instant of every table: the same times in both trees
    out = Path(args.out)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    write_tables(out, args.rows)
    print("\n".join(digests(out)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
