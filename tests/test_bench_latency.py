"""The latency proxy of `lsm-lab bench latency` forwards every request unchanged, counts it, and keeps its bounds.

No timing is asserted (the machine is shared): the proxy's own count of the requests it forwarded must
equal the requests lsm_lab says it sent, and a table written and read through it must be the same table.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from s3_server import S3Server

import lsm_lab
from lsm_lab.bench.latency import LatencyProxy
from lsm_lab.errors import InputError, LsmLabError


def _rows(n: int, ts: int) -> pa.Table:
    return pa.table({"id": [f"k{i:03d}" for i in range(n)], "city": [("sf", "nyc")[i % 2] for i in range(n)],
                     "ts": [ts] * n, "fare": [float(i) for i in range(n)]})


def test_a_table_through_the_proxy_is_the_same_table_and_every_request_is_counted(s3_server: S3Server) -> None:
    bucket = s3_server.new_bucket()
    with LatencyProxy(s3_server.endpoint, latency=0.001) as proxy:
        options = {**s3_server.options(), "aws_endpoint_url": proxy.endpoint}
        t = lsm_lab.create_table(f"s3://{bucket}/t", storage_options=options, name="t", record_key="id",
                                 partition_by="city", ordering_field="ts", table_type="MERGE_ON_READ")
        t.insert(_rows(20, 1))
        t.upsert(_rows(5, 2))
        sent = sum(t.storage.counts.snapshot().values())
        forwarded = proxy.reset()
        assert forwarded["requests"] == sent > 0  # PUTs, GETs, LISTs ... all went through the proxy
        assert {"GET", "PUT"} <= set(forwarded)
        through = lsm_lab.open_table(f"s3://{bucket}/t", storage_options=options).read()
        assert proxy.reset()["requests"] > 0
    direct = lsm_lab.open_table(f"s3://{bucket}/t", storage_options=s3_server.options()).read()
    assert through.num_rows == 20
    assert through.sort_by("id").equals(direct.sort_by("id"))
    assert sorted(through.column("ts").to_pylist()) == [1] * 15 + [2] * 5


def test_the_proxy_refuses_requests_past_its_budget(s3_server: S3Server) -> None:
    bucket = s3_server.new_bucket()
    with LatencyProxy(s3_server.endpoint, latency=0.0, max_requests=1) as proxy:
        options = {**s3_server.options(), "aws_endpoint_url": proxy.endpoint}
        with pytest.raises(LsmLabError):  # the second request gets a 503: a typed error, not a hang
            t = lsm_lab.create_table(f"s3://{bucket}/t", storage_options=options, name="t", record_key="id")
            t.insert(_rows(3, 1))
        assert proxy.requests == 1


@pytest.mark.parametrize("upstream", ["http://example.com:80", "https://127.0.0.1:9000", "http://127.0.0.1"])
def test_the_proxy_forwards_only_to_a_local_http_server(upstream: str) -> None:
    with pytest.raises(InputError, match="local HTTP server"):
        LatencyProxy(upstream, latency=0.01)


def test_the_latency_is_bounded() -> None:
    with pytest.raises(InputError, match="latency"):
        LatencyProxy("http://127.0.0.1:9000", latency=-1)
