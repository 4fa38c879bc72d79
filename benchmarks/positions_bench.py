"""Position-based vs key-based merge of the same file slices (RECORD_POSITIONS, filegroup/posmerge.py).

One merge-on-read slice: a base of N records and L logs of updates and deletes, each carrying
RECORD_POSITIONS.  The same slice is merged three ways — by position, by key with the sorted
(k-way) engine, by key with the hash engine — first the merge step alone from the same loaded
sources, then the whole `read_slice`; every result must be equal.  Best of `--repeat` runs each.

Run it:  .venv/bin/python benchmarks/positions_bench.py [--rows 1000000] [--logs 4] [--repeat 3]
"""

from __future__ import annotations

import argparse
import gc
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa


def build(path: Path, rows: int, logs: int, seed: int = 0) -> Any:
    import lsm_lab

    rng = np.random.default_rng(seed)
    t = lsm_lab.create_table(path, name="pos", record_key="id", num_buckets=1)
    ids = pa.array([f"key{i:09d}" for i in range(rows)])
    t.bulk_insert(pa.table({"id": ids, "v": pa.array(rng.integers(0, 1 << 30, rows))}))
    for i in range(logs):
        picked = np.sort(rng.choice(rows, size=max(1, rows // 20), replace=False))
        if i % 2:
            t.delete(pa.table({"id": ids.take(pa.array(picked[: len(picked) // 4]))}))
        else:
            t.upsert(pa.table({"id": ids.take(pa.array(picked)), "v": pa.array(rng.integers(0, 1 << 30, len(picked)))}))
    return t


def _best(fn: Any, repeat: int) -> tuple[float, Any]:
    best, result = float("inf"), None
    for _ in range(repeat):
        result = None
        gc.collect()  # free the previous result outside the timed region
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def run(rows: int, logs: int, repeat: int) -> dict[str, Any]:
    from lsm_lab.filegroup import posmerge
    from lsm_lab.filegroup import read as reader
    from lsm_lab.merge import merge_to_table

    root = Path(tempfile.mkdtemp(prefix="lsm_lab_pos_"))
    try:
        t = build(root / "t", rows, logs)
        fs = t.latest_slices()[0]
        ctx = t.read_context()
        needed = reader.needed_columns(ctx, None)
        sources, _ = reader.load_sources(ctx, fs, needed)
        out: dict[str, Any] = {"rows": rows, "logs": len(fs.log_files)}
        merges = {  # the merge step alone, from the same loaded sources
            "merge_position": lambda: posmerge.merge_sources(ctx.spec, ctx.completion_of, ctx.read_time, fs,
                                                             sources, needed),
            "merge_key_sorted": lambda: merge_to_table(sources, ctx.spec, engine="sorted").select(needed),
            "merge_key_hash": lambda: merge_to_table(sources, ctx.spec, engine="hash").select(needed),
        }
        reads = {  # the whole slice read: files, normalisation, merge
            "read_position": lambda: reader.read_slice(ctx, fs),
            "read_key_sorted": lambda: reader.read_slice(ctx, fs, positions=False, engine="sorted"),
            "read_key_hash": lambda: reader.read_slice(ctx, fs, positions=False, engine="hash"),
        }
        key = "_hoodie_record_key"
        ref = None
        for name, fn in {**merges, **reads}.items():
            seconds, table = _best(fn, repeat)
            if table is None:
                raise AssertionError(f"{name}: the slice did not merge by position")
            table = table.sort_by(key)
            if ref is None:
                ref = table
            elif not table.equals(ref):
                raise AssertionError(f"{name} differs from the position-based merge")
            out[f"{name}_s"] = round(seconds, 4)
        assert ref is not None
        out["result_rows"] = ref.num_rows
        out["merge_speedup_vs_sorted"] = round(out["merge_key_sorted_s"] / out["merge_position_s"], 2)
        out["merge_speedup_vs_hash"] = round(out["merge_key_hash_s"] / out["merge_position_s"], 2)
        out["read_speedup_vs_sorted"] = round(out["read_key_sorted_s"] / out["read_position_s"], 2)
        return out
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Position-based vs key-based merge of the same slice.")
    parser.add_argument("--rows", type=int, default=1_000_000, help="base file records (default 1,000,000)")
    parser.add_argument("--logs", type=int, default=4, help="update/delete logs (default 4)")
    parser.add_argument("--repeat", type=int, default=3, help="timed reads per way; the best counts (default 3)")
    args = parser.parse_args(argv)
    print(json.dumps(run(args.rows, args.logs, args.repeat), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
