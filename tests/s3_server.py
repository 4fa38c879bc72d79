"""A real S3 server for tests: moto's server on 127.0.0.1 and a free port.

Used as a pytest plugin (see `conftest.py`): the session fixture `s3_server`
starts one server for the whole run and stops it at the end; `s3_options(bucket)`
gives the `storage_options` that point lsm_lab at it, and `s3_env` sets the
standard `AWS_*` variables instead.  Traffic stays on the loopback address.
"""

from __future__ import annotations

import socket
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest


@dataclass
class S3Server:
    endpoint: str

    def options(self) -> dict[str, str]:
        return {"aws_endpoint_url": self.endpoint, "aws_access_key_id": "testing",
                "aws_secret_access_key": "testing", "aws_region": "us-east-1", "aws_allow_http": "true"}

    def env(self) -> dict[str, str]:
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_ACCESS_KEY_ID": "testing",
                "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true"}

    def new_bucket(self) -> str:
        """Create a bucket with a fresh name and return the name."""
        import boto3

        name = f"t-{uuid.uuid4().hex[:16]}"
        client: Any = boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id="testing",
                                   aws_secret_access_key="testing", region_name="us-east-1")
        client.create_bucket(Bucket=name)
        return name


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


_shared: S3Server | None = None


def shared_server() -> S3Server:
    """The one moto server of this process, started on first use and stopped when the process exits.

    Hypothesis state machines cannot take pytest fixtures, so they call this; the
    `s3_server` fixture returns the same server."""
    global _shared
    if _shared is None:
        import atexit
        import logging

        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's HTTP server logs every request
        from moto.server import ThreadedMotoServer  # moto[server] is a dev dependency

        from lsm_lab.lab.s3local import atomic_conditional_writes

        port = free_port()
        atomic_conditional_writes()  # moto checks a precondition, then writes: one step, as on S3
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
        server.start()
        atexit.register(server.stop)
        _shared = S3Server(f"http://127.0.0.1:{port}")
    return _shared


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """moto's S3 server on 127.0.0.1, shared by the whole test run (stopped at exit)."""
    yield shared_server()


@pytest.fixture()
def s3_bucket(s3_server: S3Server) -> str:
    """A new, empty bucket on the test server."""
    return s3_server.new_bucket()
