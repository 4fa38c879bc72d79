#!/usr/bin/env python3
"""Which way of reading Parquet from an object store is fastest? Measured against a local S3 server.

    python benchmarks/bench_storage.py [--rows 1000000] [--repeats 3]

Starts moto's S3 server on 127.0.0.1 (a free port), writes one Parquet file of
`--rows` rows (a 21-character string key, an int64, a double, two strings; 128k-row
row groups) to local disk and to the server, then reads it back whole and a
projection of one column, each way:

    local disk         pyarrow on the local file system (the baseline)
    pyarrow.fs S3      pyarrow's S3FileSystem: ranged GETs of the footer and the column chunks
    obstore GET        one GET of the whole object into memory, then pyarrow on the buffer
    obstore ranges     pyarrow on an obstore-backed file (a GET per read call pyarrow makes)

Prints seconds (median of `--repeats`), the ratio to local disk and the requests
each way sent.  Loopback S3 has no network latency, so this measures per-request
overhead and copying, not bandwidth; on a real store, fewer requests win by more.
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


def make_table(rows: int) -> pa.Table:
    rng = np.random.default_rng(7)
    keys = np.char.add("key-", np.char.zfill(rng.permutation(rows).astype(str), 17))
    return pa.table({"key": keys, "ts": rng.integers(0, 10**9, rows), "fare": rng.random(rows) * 100,
                     "rider": np.char.add("rider-", (rng.integers(0, 1000, rows)).astype(str)),
                     "city": rng.choice(["chennai", "sao_paulo", "san_francisco"], rows)})


class ObstoreFile(io.RawIOBase):
    """A seekable read-only file over an object: each read is one ranged GET."""

    def __init__(self, storage: Any, key: str, size: int) -> None:
        self.storage, self.key, self.size, self.pos = storage, key, size, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        self.pos = offset if whence == 0 else self.pos + offset if whence == 1 else self.size + offset
        return self.pos

    def tell(self) -> int:
        return self.pos

    def readinto(self, buf: Any) -> int:
        end = min(self.size, self.pos + len(buf))
        data = self.storage.read_range(self.key, self.pos, end)
        buf[:len(data)] = data
        self.pos += len(data)
        return len(data)


def median_time(fn: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows in the Parquet file (default 1,000,000)")
    parser.add_argument("--repeats", type=int, default=3, help="timed repeats per contender; the median is shown")
    args = parser.parse_args(argv)

    from moto.server import ThreadedMotoServer
    from s3_server import S3Server, free_port

    from lsm_lab.storage import open_storage

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        s3 = S3Server(f"http://127.0.0.1:{port}")
        table = make_table(args.rows)
        with tempfile.TemporaryDirectory() as tmp:
            local = Path(tmp) / "f.parquet"
            pq.write_table(table, local, row_group_size=128 * 1024)
            data = local.read_bytes()
            storage = open_storage(f"s3://{s3.new_bucket()}/t", s3.options())
            storage.write("f.parquet", data)
            fs, _ = storage.arrow_filesystem()
            path = storage.arrow_path("f.parquet")
            size = len(data)

            contenders: dict[str, Callable[[list[str] | None], pa.Table]] = {
                "local disk": lambda cols: pq.read_table(local, columns=cols),
                "pyarrow.fs S3": lambda cols: pq.read_table(path, filesystem=fs, columns=cols),
                "obstore GET": lambda cols: pq.read_table(pa.BufferReader(storage.read("f.parquet")), columns=cols),
                "obstore ranges": lambda cols: pq.ParquetFile(
                    io.BufferedReader(ObstoreFile(storage, "f.parquet", size), 8 << 20)).read(columns=cols),
            }
            print(f"{args.rows:,} rows, {size / 2**20:.1f} MiB, median of {args.repeats}")
            print(f"{'contender':16} {'whole file s':>13} {'ratio':>6} {'1 column s':>11} {'ratio':>6}  requests (whole file)")
            base: dict[str, float] = {}
            for name, read in contenders.items():
                assert read(None).num_rows == args.rows
                times = {}
                for label, cols in (("all", None), ("one", ["fare"])):
                    times[label] = median_time(lambda cols=cols, read=read: read(cols), args.repeats)  # type: ignore[misc]
                before = storage.counts.snapshot()
                read(None)
                sent = storage.counts.since(before)
                base = base or times
                reqs = ", ".join(f"{k} {v}" for k, v in sent.items() if v) or "(not counted: pyarrow's own client)"
                print(f"{name:16} {times['all']:13.3f} {times['all'] / base['all']:6.2f} "
                      f"{times['one']:11.3f} {times['one'] / base['one']:6.2f}  {reqs}")
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
