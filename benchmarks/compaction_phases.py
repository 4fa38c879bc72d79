#!/usr/bin/env python
"""CPU per phase of one FULL compaction operation (one file group), sorted or hash, in a warm process.

    python benchmarks/compaction_phases.py TABLE [--engine sorted|hash] [--ops 4] [--repeat 3]

TABLE is a table with file groups and logs to compact, such as a cached input of `lsm-lab bench
compaction` (D/tables/n8000000_k4_u0.2_g16_s7_f2: 16 groups of 500,000 rows, 4 logs each). It is copied
to a temporary folder; `--ops` operations of one FULL compaction plan are run `--repeat` times in one
process, as a reused Spark worker runs them (the first round is a warm-up and not counted), and process
CPU is charged to the phase that spent it (nested phases excluded from their parents). The phases wrap
internal functions by name: a measuring tool, not an API. docs/PERFORMANCE.md (fifth pass, spark5; seventh
pass) reads it: what both engines pay (reading the inputs, Parquet encoding, the bloom) against the merge.
"""

import argparse
import collections
import functools
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lsm_lab.api import open_table
from lsm_lab.filegroup import read
from lsm_lab.filegroup.planner import read_plan
from lsm_lab.format import parquet_write
from lsm_lab.merge import semantics
from lsm_lab.merge import sorted as sorted_merge
from lsm_lab.services import compaction

spent: collections.Counter[str] = collections.Counter()
_stack: list[list[Any]] = []


def _pop() -> None:
    label, t0, nested = _stack.pop()
    d = time.process_time() - t0
    spent[label] += d - nested
    if _stack:
        _stack[-1][2] += d


def _wrap(owner: Any, name: str, label: str, *, generator: bool = False) -> None:
    f = getattr(owner, name)
    if generator:
        @functools.wraps(f)
        def g(*a: Any, **k: Any) -> Any:
            it = f(*a, **k)
            while True:
                _stack.append([label, time.process_time(), 0.0])
                try:
                    x = next(it)
                except StopIteration:
                    _pop()
                    return
                _pop()
                yield x
    else:
        @functools.wraps(f)
        def g(*a: Any, **k: Any) -> Any:
            _stack.append([label, time.process_time(), 0.0])
            try:
                return f(*a, **k)
            finally:
                _pop()
    setattr(owner, name, g)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("table", help="a table with file groups and logs to compact (it is copied, not changed)")
    ap.add_argument("--engine", choices=["sorted", "hash"], default="sorted")
    ap.add_argument("--ops", type=int, default=4, help="operations (file groups) per round")
    ap.add_argument("--repeat", type=int, default=3, help="rounds; the first is a warm-up")
    args = ap.parse_args()
    _wrap(read, "_stream_file", "read inputs (decode, normalise)", generator=True)
    _wrap(parquet_write.ParquetFileWriter, "_emit", "Parquet encode")
    _wrap(parquet_write.ParquetFileWriter, "_key_facts", "bloom hash states, key range")
    _wrap(parquet_write.ParquetFileWriter, "_footer", "bloom bits, footer")
    _wrap(parquet_write, "write_parquet", "write (hash engine: whole table)")
    _wrap(sorted_merge, "_resolve", "merge rounds (sorted)")
    _wrap(sorted_merge, "_checked", "input order checks", generator=True)
    _wrap(semantics, "select_winners", "winners")
    _wrap(compaction, "run_full", "the rest (hash: most of its merge)")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "t"
        shutil.copytree(args.table, work)
        t = open_table(work)
        instant = compaction.schedule(t, strategy="full", merge=args.engine)
        if instant is None:
            print(f"nothing to compact in {args.table}", file=sys.stderr)
            return 2
        plan = read_plan(t.active_timeline, instant)
        ctx = compaction.CompactionContext(t.path, instant.begin_time,
                                           read.ReadContext(t.path, t.config, t.schema, t.completion_map(), None),
                                           args.engine, t.config.is_lsm)
        ops = plan.operations[:args.ops]
        rounds = max(2, args.repeat)
        c0 = time.process_time()
        for r in range(rounds):
            if r == 1:
                spent.clear()
                c0 = time.process_time()
            for i, op in enumerate(ops):
                stat = compaction.run_full(ctx, op, 1000 * r + i)
                (work / stat.path).unlink()
        n = (rounds - 1) * len(ops)
        total = (time.process_time() - c0) / n
    print(f"{args.engine}: {total:.3f} s of CPU per operation ({n} operations, load {os.getloadavg()[0]:.1f})")
    for label, s in spent.most_common():
        print(f"  {label:40s} {s / n:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
