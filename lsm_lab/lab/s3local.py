"""A local S3 server for the demo, the storage benchmark and the notebooks: moto on 127.0.0.1.

    with LocalS3() as s3:                       starts moto's server on a free loopback port
        uri = s3.new_bucket() + "/trips"        s3://lab-<random>/trips
        create_table(uri, ..., storage_options=s3.options())
                                                stopped when the block ends

Nothing leaves the machine: the server keeps its objects in memory and speaks
the S3 protocol, conditional PUTs included, so lsm_lab runs against it exactly
as against a real bucket (the same obstore and pyarrow clients, the same
requests).  `moto[server]` is a development dependency (`pip install -e .[dev]`).

**Conditional writes made atomic** (`atomic_conditional_writes`): moto checks a PUT's `If-Match` /
`If-None-Match` (and a DELETE's `If-Match`) and then writes, in two steps, on whichever server thread
took the request, so two concurrent conditional PUTs against the same ETag can both succeed; S3 lets
one win and refuses the other (412). A compare-and-swap test of the test suite lost an update this way
(4 threads counting to 20 on the server: 19). Every server started here, and the tests' server,
serialise moto's object writes and deletes with one lock, so the check and the write are one step.

Simplified compared with a real store: no network latency and no request
pricing, so it measures request counts and per-request overhead, not bandwidth.

Taught in: notebooks/12_object_storage.ipynb
"""

from __future__ import annotations

import logging
import socket
import threading
import uuid
from typing import Any

from lsm_lab.extras import require


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


_WRITES = threading.Lock()


def atomic_conditional_writes() -> None:
    """Serialise moto's S3 object writes and deletes (once per process): its precondition check and its
    write then happen as one step, as S3's do (see the module docstring)."""
    from moto.s3.responses import S3Response  # the s3 extra: imported only here

    if getattr(S3Response, "_lsm_lab_atomic", False):
        return
    for name in ("put_object", "delete_object"):
        original = getattr(S3Response, name)

        def locked(self: Any, *args: Any, _original: Any = original, **kwargs: Any) -> Any:
            with _WRITES:
                return _original(self, *args, **kwargs)

        setattr(S3Response, name, locked)
    S3Response._lsm_lab_atomic = True  # type: ignore[attr-defined]


class LocalS3:
    """moto's S3 server on 127.0.0.1, as a context manager."""

    def __init__(self) -> None:
        self.endpoint = ""
        self._server: Any = None

    def start(self) -> LocalS3:
        require("s3", "the local S3 server")
        from moto.server import ThreadedMotoServer  # the s3 extra: imported only here
        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's HTTP server logs every request
        port = _free_port()
        atomic_conditional_writes()
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
        self._server.start()
        self.endpoint = f"http://127.0.0.1:{port}"
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None

    def __enter__(self) -> LocalS3:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def options(self) -> dict[str, str]:
        """`storage_options` that point lsm_lab at this server."""
        return {"aws_endpoint_url": self.endpoint, "aws_access_key_id": "testing",
                "aws_secret_access_key": "testing", "aws_region": "us-east-1", "aws_allow_http": "true"}

    def env(self) -> dict[str, str]:
        """The same as the standard `AWS_*` environment variables (for other processes)."""
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_ACCESS_KEY_ID": "testing",
                "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true"}

    def new_bucket(self, prefix: str = "lab") -> str:
        """Create a bucket with a fresh name; returns `s3://<name>`."""
        import boto3  # installed with moto

        name = f"{prefix}-{uuid.uuid4().hex[:12]}"
        client: Any = boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id="testing",
                                   aws_secret_access_key="testing", region_name="us-east-1")
        client.create_bucket(Bucket=name)
        return f"s3://{name}"


__all__ = ["LocalS3", "atomic_conditional_writes"]
