"""The test S3 server (moto) makes a conditional PUT one step, as S3 does (`lab.s3local.atomic_conditional_writes`).

moto checks `If-Match` and then writes: without the lock, four concurrent PUTs against the same ETag let two
win in about 2-4 rounds out of 200 here (with Python's thread switch interval at 1 µs), and a compare-and-swap
counter on the server lost an update in a CI run. With it, exactly one PUT of each round wins.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from s3_server import S3Server


@pytest.fixture()
def fast_switching() -> Iterator[None]:
    """Threads switch every microsecond: a race between a check and a write shows in a few hundred rounds."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


def test_concurrent_conditional_puts_have_one_winner(s3_server: S3Server, fast_switching: None) -> None:
    import boto3
    import botocore.exceptions  # type: ignore[import-untyped]

    bucket = s3_server.new_bucket()
    client: Any = boto3.client("s3", endpoint_url=s3_server.endpoint, aws_access_key_id="testing",
                               aws_secret_access_key="testing", region_name="us-east-1")
    for r in range(200):
        etag = client.put_object(Bucket=bucket, Key="k", Body=str(r).encode())["ETag"]
        wins: list[int] = []

        def put(i: int, r: int = r, etag: str = etag, wins: list[int] = wins) -> None:
            try:
                client.put_object(Bucket=bucket, Key="k", Body=f"{r}-{i}".encode(), IfMatch=etag)
                wins.append(i)
            except botocore.exceptions.ClientError as exc:
                assert exc.response["Error"]["Code"] == "PreconditionFailed"

        threads = [threading.Thread(target=put, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        body = client.get_object(Bucket=bucket, Key="k")["Body"].read().decode()
        assert len(wins) == 1 and body == f"{r}-{wins[0]}", (r, wins, body)
