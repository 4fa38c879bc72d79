#!/usr/bin/env python3
"""Generate Hudi-quickstart-like trips: inserts, then update and delete batches, deterministically.

    python data/generate.py OUT_DIR [--rows N] [--updates N] [--deletes N] [--rounds R] [--seed S]

Writes OUT_DIR/inserts.parquet, OUT_DIR/updates_<i>.parquet (R rounds) and
OUT_DIR/deletes.parquet; feed them to `lsm-lab write`.  The generator itself is
`lsm_lab.lab.datagen.TripsGenerator` (same seed, same bytes, any size).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pyarrow.parquet as pq

from lsm_lab.lab.datagen import TripsGenerator


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="output folder")
    parser.add_argument("--rows", type=int, default=10_000, help="inserted trips (default 10000)")
    parser.add_argument("--updates", type=int, default=None, help="rows per update round (default rows/5)")
    parser.add_argument("--deletes", type=int, default=None, help="keys to delete (default rows/50)")
    parser.add_argument("--rounds", type=int, default=2, help="update rounds (default 2)")
    parser.add_argument("--seed", type=int, default=42, help="random seed (default 42)")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    gen = TripsGenerator(args.seed)
    pq.write_table(gen.inserts(args.rows), out / "inserts.parquet")
    for i in range(args.rounds):
        pq.write_table(gen.updates(args.updates or max(1, args.rows // 5)), out / f"updates_{i + 1}.parquet")
    pq.write_table(gen.deletes(args.deletes or max(1, args.rows // 50)), out / "deletes.parquet")
    print(f"wrote {sorted(p.name for p in out.glob('*.parquet'))} to {out}")


if __name__ == "__main__":
    main()
