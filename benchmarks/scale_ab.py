#!/usr/bin/env python
"""One operation of `lsm-lab bench scale` on one table, by two source trees in turn: did a change move it?

    python benchmarks/scale_ab.py --trees OLD NEW [--rows 16000000] [--op read] [--repeats 2] [--dir D]

`OLD` and `NEW` are checkouts of lsm_lab (e.g. `git worktree add /tmp/old <commit>`). The
table is written once, by NEW's code (`bench scale`'s inputs, bulk insert and upsert: an
lsm_tree MOR trips table, 4 buckets); then `--op` (read, bulk_insert into a fresh table,
upsert into a copy, or compaction of a copy) runs `--repeats` times per tree, the trees
alternated so that a busy minute falls on both. Each run is `bench scale`'s child process
under that tree's code (its `PYTHONPATH`), with the `lsm-lab` command's Arrow pool; printed
per run: the child's time around the call, its peak RSS, and from `getrusage(RUSAGE_CHILDREN)` the whole child's
CPU in user and kernel mode and its page faults (start-up and input read included: the same
for both trees).

Simplified compared with a real A/B harness: medians are left to the reader, one table
shape, wall times on a shared machine (the 1-minute load is printed).

Taught in: no chapter (docs/PERFORMANCE.md, "Stop 41 (lead session)")
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from lsm_lab.allocator import command_env
from lsm_lab.bench.child import PREFIX
from lsm_lab.bench.scale import run_op, write_inputs


def run_tree(tree: str, op: str, table: Path, inputs: dict[str, Path]) -> dict[str, float]:
    """`op` on `table` in a child process running `tree`'s lsm_lab; its result plus its rusage."""
    job = {"op": op, "table": str(table), "input": str(inputs[op]) if op in inputs else None}
    env = command_env({**os.environ, "PYTHONPATH": tree})
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run([sys.executable, "-m", "lsm_lab.bench.scale", "--child", json.dumps(job)],
                          capture_output=True, text=True, env=env, cwd=tree, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)  # the child's own, once it has been waited for
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(PREFIX)]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"the {op} child of {tree} failed:\n{proc.stderr[-2000:]}")
    result: dict[str, float] = json.loads(lines[-1][len(PREFIX):])
    result.update(child_user=after.ru_utime - before.ru_utime, child_sys=after.ru_stime - before.ru_stime,
                  child_faults=after.ru_minflt - before.ru_minflt)
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trees", nargs=2, metavar=("OLD", "NEW"), required=True, help="two lsm_lab checkouts")
    p.add_argument("--rows", type=int, default=16_000_000, help="table size (default 16,000,000)")
    p.add_argument("--op", choices=("read", "bulk_insert", "upsert", "compaction"), default="read")
    p.add_argument("--repeats", type=int, default=2, help="runs per tree, alternated (default 2)")
    p.add_argument("--dir", help="parent of the work folder (default: the system's temporary folder)")
    args = p.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="lsm_lab_scale_ab_", dir=args.dir))
    try:
        print(f"writing the {args.rows:,}-row inputs and table …", file=sys.stderr, flush=True)
        inputs = write_inputs(work / "in", args.rows)
        table = work / "t"
        run_op("bulk_insert", table, inputs)
        if args.op in ("read", "compaction"):
            run_op("upsert", table, inputs)
        for r in range(args.repeats):
            for tree in args.trees:
                target = table
                if args.op == "bulk_insert":
                    target = work / "fresh"
                    shutil.rmtree(target, ignore_errors=True)
                elif args.op in ("upsert", "compaction"):
                    target = work / "copy"
                    shutil.rmtree(target, ignore_errors=True)
                    shutil.copytree(table, target)
                load = os.getloadavg()[0]
                res = run_tree(tree, args.op, target, inputs)
                print(f"{args.op} {args.rows:,} rows, run {r + 1}, {tree}: {res['seconds']:.2f} s, peak RSS "
                      f"{res['peak_rss_bytes'] / 2**20:,.0f} MiB; child CPU user {res['child_user']:.2f} s, "
                      f"kernel {res['child_sys']:.2f} s, {res['child_faults']:,.0f} page faults "
                      f"(load {load:.1f})", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
