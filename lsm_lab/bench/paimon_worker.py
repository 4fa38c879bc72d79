"""The Apache Paimon side of `lsm-lab bench peers`, run in a venv of its own.

pypaimon pins pyarrow < 20 while lsm_lab needs pyarrow 25+, so this file runs as
a separate process under the peers' interpreter (`make bench-peers` builds
`.venv-peers`). It imports nothing from lsm_lab. The workload arrives as Parquet
files, one per write, in name order; each file's `_op` column is `upsert` or
`delete`:

    data/00_upsert.parquet ... NN_delete.parquet ──► Paimon primary-key table ──► snapshot
    ──► keys.parquet (the snapshot's partition + key) and a JSON line of timings on stdout

The table: primary key (partition, key), partitioned, fixed buckets, the
deduplicate merge engine with the ordering column as `sequence.field`, deletes
written as `-D` rows through `rowkind.field`; Rust writer and reader when
`--native` (`write.native.enabled`, `commit.native.enabled`, `read.native.enabled`).

Usage: python paimon_worker.py DATA_DIR WAREHOUSE OUT_KEYS --key K --partition P --ordering O --buckets N [--native]

Taught in: notebooks/10_sorted_vs_hash_on_spark.ipynb
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

KIND = "_row_kind"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("data_dir")
    p.add_argument("warehouse")
    p.add_argument("out_keys")
    p.add_argument("--key", required=True)
    p.add_argument("--partition", required=True)
    p.add_argument("--ordering", required=True)
    p.add_argument("--buckets", type=int, default=4)
    p.add_argument("--native", action="store_true")
    args = p.parse_args(argv)

    from pypaimon import CatalogFactory, Schema  # only in the peers' venv

    started = time.perf_counter()
    files = sorted(Path(args.data_dir).glob("*.parquet"))
    first = pq.read_schema(files[0])
    user = pa.schema([f for f in first if f.name != "_op"])
    schema = pa.schema([*user, pa.field(KIND, pa.string())])
    options = {"bucket": str(args.buckets), "sequence.field": args.ordering, "rowkind.field": KIND,
               "file.format": "parquet"}
    native = {"write.native.enabled": "true", "commit.native.enabled": "true", "read.native.enabled": "true"}
    catalog = CatalogFactory.create({"warehouse": Path(args.warehouse).resolve().as_uri()})
    catalog.create_database("bench", True)
    catalog.create_table("bench.trips", Schema.from_pyarrow_schema(
        schema, partition_keys=[args.partition], primary_keys=[args.partition, args.key], options=options), False)
    table = catalog.get_table("bench.trips")
    if args.native:
        table = table.copy(native)

    write_s = 0.0
    for f in files:
        data = pq.read_table(f)
        op = data.column("_op")[0].as_py() if data.num_rows else "upsert"
        data = data.drop_columns(["_op"])
        t0 = time.perf_counter()
        kind = pa.array(["-D" if op == "delete" else "+I"] * data.num_rows, pa.string())
        cols = [data.column(c.name) if c.name in data.column_names else pa.nulls(data.num_rows, c.type)
                for c in user]
        batch = pa.Table.from_arrays([*cols, kind], schema=schema)
        builder = table.new_batch_write_builder()
        writer, commit = builder.new_write(), builder.new_commit()
        try:
            writer.write_arrow(batch)
            commit.commit(writer.prepare_commit())
        finally:
            writer.close()
            commit.close()
        write_s += time.perf_counter() - t0

    t0, c0 = time.perf_counter(), time.process_time()
    table = catalog.get_table("bench.trips")
    if args.native:
        table = table.copy(native)
    # the same projection as lsm_lab's read (bench/peers.py): partition and key (before this was added the
    # Paimon side decoded every column while lsm_lab decoded two, which flattered lsm_lab's read ratio)
    rb = table.new_read_builder().with_projection([args.partition, args.key])
    result = rb.new_read().to_arrow(rb.new_scan().plan().splits())
    read_s, read_cpu_s = time.perf_counter() - t0, time.process_time() - c0  # CPU: every thread of the process
    pq.write_table(result.select([args.partition, args.key]), args.out_keys)
    print(json.dumps({"write_s": round(write_s, 3), "read_s": round(read_s, 3), "read_cpu_s": round(read_cpu_s, 3),
                      "rows": result.num_rows,
                      "in_process_s": round(time.perf_counter() - started, 3), "native": args.native}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
