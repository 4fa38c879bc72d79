"""Hudi's footer bloom filter (format/hudi_bloom.py): what the vectorised Murmur chain buys, and what the filter
costs a base-file write.  Every figure is a ratio against a baseline of the same run:

    add        keys/s of `HudiBloomFilter.add` (NumPy, keys grouped by length) vs the per-key reference
               (`positions_reference`, pure Python, the way a port of the Java loop would run), on UUID keys
    probe      keys/s of `might_contain` on absent keys vs the same reference
    write      seconds and bytes of writing one base file of trips rows (the quickstart-like generator's 10
               columns plus the key, keyed by `_hoodie_record_key` = uuid) with upstream's footer filter (defaults: DYNAMIC_V0,
               60,000 entries, fpp 1e-9) vs without it (lsm_lab's own filter only), best of 3

Every filter is checked: all added keys probe positive.  Times move with the machine's load (print
`uptime` next to them); bytes do not.

Run it:  PYTHONPATH=. .venv/bin/python benchmarks/bench_hudi_bloom.py [--keys 200000] [--reference 5000] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
import uuid
from pathlib import Path

import pyarrow as pa

from lsm_lab.format import hudi_bloom as hb
from lsm_lab.format import parquet_write
from lsm_lab.lab.datagen import TripsGenerator


def _keys(n: int, seed: int) -> pa.Array:
    return pa.array([str(uuid.UUID(int=(seed << 64) + i * 0x9E3779B97F4A7C15 % (1 << 64))) for i in range(n)])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, default=200_000)
    ap.add_argument("--reference", type=int, default=5_000, help="keys hashed by the per-key reference")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures to this JSON file")
    args = ap.parse_args()
    keys = _keys(args.keys, 1)
    absent = _keys(args.keys, 2)
    print(f"load average {os.getloadavg()[0]:.1f} (1 min), {args.keys:,} UUID keys")

    bloom = hb.HudiBloomFilter.create()
    t0 = time.perf_counter()
    bloom.add(keys)
    vec_add = args.keys / (time.perf_counter() - t0)
    assert bloom.might_contain(keys).all()
    t0 = time.perf_counter()
    fp = bloom.might_contain(absent).mean()
    vec_probe = args.keys / (time.perf_counter() - t0)

    ref = keys.slice(0, args.reference).to_pylist()
    t0 = time.perf_counter()
    for k in ref:
        hb.positions_reference(k, bloom.nb_hash, bloom.vector_size)
    ref_rate = len(ref) / (time.perf_counter() - t0)
    print(f"add    {vec_add:12,.0f} keys/s vectorised vs {ref_rate:10,.0f} keys/s per key: {vec_add / ref_rate:6.1f}x")
    print(f"probe  {vec_probe:12,.0f} keys/s vectorised vs {ref_rate:10,.0f} keys/s per key: "
          f"{vec_probe / ref_rate:6.1f}x  (false positives {fp:.2e}, {len(bloom.rows)} row(s))")

    trips = TripsGenerator(7).inserts(args.keys)
    table = trips.add_column(0, "_hoodie_record_key", trips.column("uuid"))
    with tempfile.TemporaryDirectory() as tmp:
        out = {}
        for label, opts in (("without", None), ("with", hb.HudiBloomOptions())):
            best = float("inf")
            for i in range(3):
                path = Path(tmp) / f"{label}-{i}.parquet"
                t0 = time.perf_counter()
                size = parquet_write.write_parquet(path, table, hudi_bloom=opts)
                best = min(best, time.perf_counter() - t0)
            out[label] = (best, size)
        (tw, sw), (t_, s_) = out["with"], out["without"]
        print(f"write  {tw:.3f} s with the footer filter vs {t_:.3f} s without: {tw / t_:.2f}x time, "
              f"{sw:,} vs {s_:,} bytes: {sw / s_:.2f}x size")
    if args.json is not None:
        args.json.write_text(json.dumps({
            "keys": args.keys, "reference_keys": args.reference, "filter_rows": len(bloom.rows),
            "add_keys_per_s": round(vec_add), "probe_keys_per_s": round(vec_probe),
            "reference_keys_per_s": round(ref_rate), "add_vs_reference": round(vec_add / ref_rate, 1),
            "probe_vs_reference": round(vec_probe / ref_rate, 1), "false_positive_rate": fp,
            "write_seconds_with": round(tw, 4), "write_seconds_without": round(t_, 4),
            "write_time_ratio": round(tw / t_, 2), "file_bytes_with": sw, "file_bytes_without": s_,
            "file_size_ratio": round(sw / s_, 3)}, indent=1))


if __name__ == "__main__":
    main()
