"""Spark on a table in a bucket of a real S3 server (moto) or a container of Azurite: write, compaction, reads.

The executors' Python tasks reach the store through lsm_lab's storage layer:
the table root is pickled as "open this URI with these options again", so a
task reopens the bucket itself; nothing goes through Hadoop's S3 connector.
The result must equal the same writes done by `Table` on the same server.
"""

from __future__ import annotations

from typing import Any

import pytest
from s3_server import S3Server

import lsm_lab
from lsm_lab.spark import compact_table, read_table, write_table

pytestmark = pytest.mark.spark


def _rows(table: Any) -> list[tuple[Any, ...]]:
    return sorted((r["id"], r["city"], r["ts"], r["v"]) for r in table.to_pylist())


def batch(i: int) -> list[dict[str, Any]]:
    return [{"id": f"k{(i * 5 + j) % 17:02d}", "city": ("a", "b")[j % 2], "ts": i, "v": i * 100 + j} for j in range(12)]


@pytest.mark.parametrize("store", ["s3", "azure"])
def test_spark_write_compact_read_on_object_stores(spark: Any, store: str, request: pytest.FixtureRequest) -> None:
    server = request.getfixturevalue(f"{store}_server")
    opts = server.options()
    bucket = f"s3://{server.new_bucket()}" if store == "s3" else f"az://{server.new_container()}"
    kw: dict[str, Any] = {"name": "t", "record_key": "id", "partition_by": "city", "ordering_field": "ts",
                          "num_buckets": 2}
    on_spark = lsm_lab.create_table(f"{bucket}/spark", storage_options=opts, **kw)
    by_table = lsm_lab.create_table(f"{bucket}/local", storage_options=opts, **kw)
    for i in range(3):
        write_table(batch(i), on_spark.path, op="upsert", spark=spark, progress=False)
        by_table.upsert(batch(i))
    write_table([{"id": "k01", "city": "b"}], f"{bucket}/spark", op="delete", spark=spark, progress=False,
                storage_options=opts)
    by_table.delete([{"id": "k01", "city": "b"}])
    assert _rows(on_spark.read()) == _rows(by_table.read())
    done = compact_table(on_spark.path, spark=spark, strategy="full", progress=False)
    assert done is not None and done.is_completed
    assert _rows(on_spark.read()) == _rows(by_table.read())
    frame = read_table(on_spark.path, spark=spark)
    got = sorted((r["id"], r["city"], r["ts"], r["v"]) for r in frame.collect())
    assert got == _rows(by_table.read())
    ro = read_table(f"{bucket}/spark", spark=spark, read_optimized=True, storage_options=opts)
    assert sorted(r["id"] for r in ro.collect()) == sorted(r["id"] for r in on_spark.read_optimized().to_pylist())


def test_spark_read_cdc_on_s3(spark: Any, s3_server: S3Server) -> None:
    """The change stream of a CDC table in a bucket, read by tasks that reopen the bucket themselves."""
    from lsm_lab.spark import read_cdc

    opts = s3_server.options()
    uri = f"s3://{s3_server.new_bucket()}/cdc"
    t = lsm_lab.create_table(uri, storage_options=opts, name="t", record_key="id", partition_by="city",
                             ordering_field="ts", num_buckets=2, cdc=True, cdc_mode="DATA_BEFORE")
    for i in range(3):
        t.upsert(batch(i))
    t.delete([{"id": "k01", "city": "b"}])
    want = t.read_cdc(None)
    assert want.num_rows > 0 and not any(want.column("inferred").to_pylist())
    assert read_cdc(uri, spark, storage_options=opts).toArrow().to_pylist() == want.to_pylist()
