"""The hash merge against its input size: linear now, quadratic before (issue 33, item 1).

Chapter 10's setting: k = 8 sorted runs of the `lsm-lab bench merge` data (30% of the rows
update a key of another run), run 0 the base and runs 1..7 the logs, every source streamed
from Parquet in batches of `--batch` rows (1,024 as in the chapter), event-time ordering.
Three contenders consume ``merge_sources`` (no output file), one after the other in this
process, and each prints its wall seconds, and its wall and CPU nanoseconds per input row (CPU
time is disturbed less by other load on the machine); linear cost means flat ns/row:

    sorted     the streaming k-way merge (merge/sorted.py)
    hash       the hash merge: one hash table of the folded log keys, probed per base batch
    hash_old   the same merge with the lookup it had before: ``pc.index_in(batch keys,
               value_set=log keys)`` per base batch, which rebuilds Arrow's set of every
               log key on each call (O(base batches x log records))

Each contender first runs once untimed on the smallest size. Every contender's output row count is checked against the number of distinct keys. Times
move by +-30% on a loaded machine; compare contenders of the same size.

Run it:  .venv/bin/python benchmarks/hash_scaling.py [--sizes 100000 400000 1600000] [--batch 1024]
"""

from __future__ import annotations

import argparse
import gc
import time
from collections.abc import Iterator
from unittest import mock

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lsm_lab.bench.merge import KEY, ORDERING, make_runs
from lsm_lab.merge import hashmerge, merge_sources
from lsm_lab.merge.keymap import KeyMap
from lsm_lab.merge.semantics import MergeMode, MergeSpec

SPEC = MergeSpec(MergeMode.EVENT_TIME_ORDERING, key=KEY, ordering=ORDERING, delete="__del")
CONTENDERS = ("sorted", "hash", "hash_old")


class PerCallSet(KeyMap):
    """The lookup before issue 33: Arrow's hash set of the log keys, rebuilt by every ``find``."""

    def __init__(self, keys: pa.Array | pa.ChunkedArray) -> None:  # no table of its own
        self.keys = keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys
        self.hashes = np.zeros(0, dtype=np.uint64)
        self.slots = np.zeros(0, dtype=np.int32)

    def find(self, keys: pa.Array | pa.ChunkedArray) -> np.ndarray:
        return np.asarray(pc.index_in(keys, value_set=self.keys).fill_null(-1), dtype=np.int64)


def source(path: str, batch: int) -> Iterator[pa.RecordBatch]:
    pf = pq.ParquetFile(path, pre_buffer=False, buffer_size=1 << 16)
    for b in pf.iter_batches(batch_size=batch, use_threads=False):
        flags = pa.array(np.zeros(b.num_rows, dtype=bool))
        yield pa.RecordBatch.from_arrays([*b.columns, flags], names=[*b.schema.names, "__del"])


def run(contender: str, paths: tuple[str, ...], batch: int) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds of this process, rows out)."""
    gc.collect()
    engine = "sorted" if contender == "sorted" else "hash"
    t0, c0 = time.perf_counter(), time.process_time()
    rows = 0
    if contender == "hash_old":
        with mock.patch.object(hashmerge, "KeyMap", PerCallSet):  # the lookup before issue 33
            for b in merge_sources([source(p, batch) for p in paths], SPEC, engine=engine, batch_size=batch):
                rows += b.num_rows
    else:
        for b in merge_sources([source(p, batch) for p in paths], SPEC, engine=engine, batch_size=batch):
            rows += b.num_rows
    return time.perf_counter() - t0, time.process_time() - c0, rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000, 400_000, 1_600_000], help="total rows")
    ap.add_argument("--k", type=int, default=8, help="runs: a base and k - 1 logs")
    ap.add_argument("--batch", type=int, default=1024, help="rows per batch of every source (chapter 10: 1,024)")
    ap.add_argument("--contenders", nargs="+", choices=CONTENDERS, default=list(CONTENDERS))
    ap.add_argument("--repeat", type=int, default=1, help="runs per measurement (the best is kept)")
    ap.add_argument("--data-dir", default="/tmp/lsm_lab_hash_scaling", help="where the runs are written (cached)")
    args = ap.parse_args(argv)
    print(f"k = {args.k}, batch = {args.batch} rows, base = run 0 streamed, logs = runs 1..{args.k - 1}")
    print(f"{'rows':>10} {'base rows':>10} {'log rows':>10} "
          + " ".join(f"{c + ' s':>10} {'ns/row':>7} {'cpu ns':>7}" for c in args.contenders))
    warm = make_runs(args.data_dir, min(args.sizes), args.k, 0.3)
    for c in args.contenders:  # untimed: first-call costs (lazy imports, caches) are not the merge's
        run(c, warm.paths, args.batch)
    for n in args.sizes:
        ds = make_runs(args.data_dir, n, args.k, 0.3)
        base = pq.read_metadata(ds.paths[0]).num_rows
        line = f"{ds.rows:>10,} {base:>10,} {ds.rows - base:>10,} "
        for c in args.contenders:
            runs = [run(c, ds.paths, args.batch) for _ in range(args.repeat)]
            assert all(r[2] == ds.distinct_keys for r in runs), (c, runs, ds.distinct_keys)
            seconds, cpu = min(r[0] for r in runs), min(r[1] for r in runs)
            line += f"{seconds:>10.3f} {seconds / ds.rows * 1e9:>7.0f} {cpu / ds.rows * 1e9:>7.0f} "
        print(line.rstrip(), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
