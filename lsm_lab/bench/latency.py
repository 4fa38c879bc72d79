"""Reading a table when every request waits: lsm_lab and hudi-rs behind a per-request latency.

    lsm-lab bench latency [--rows 200000] [--latency-ms 20] [--repeats 3] [--json OUT]

On a real bucket each request costs a round trip (10-50 ms to S3 from another
region, a few ms inside one); on the local S3 server (moto, `lab.s3local`) it
costs almost nothing, so request counts hide there.  This benchmark puts the
round trip back:

    lsm_lab / hudi-rs ──HTTP──► LatencyProxy 127.0.0.1:p ──(sleep latency)──► moto 127.0.0.1:q
                                 counts every request, forwards it unchanged (Host header kept,
                                 so SigV4 signatures stay valid), relays the answer

Both readers open the same version 8 MERGE_ON_READ table (default layout, written
by lsm_lab, partitioned by city: a bulk insert and an upsert, so there are logs to
merge) from its URI through the proxy and read

    snapshot      every row, every column
    filtered      one partition (city = 'san_francisco')

Each reader's time is from opening the URI to the Arrow table in hand (what a
query pays), the median of `--repeats` runs, with the requests it sent (the
proxy's count); the figure is lsm_lab / hudi-rs.  Requests a reader sends in
parallel overlap their waits, so the time is about (requests / parallelism) x
latency plus the work.

The proxy listens on 127.0.0.1 only, forwards only to the local server, and
stops after `max_requests` requests or `max_seconds` seconds, whichever comes
first (a runaway reader cannot keep it alive).

Simplified compared with a real store: a fixed latency per request and no
bandwidth limit (moto answers from memory), so big GETs cost no more than
small ones here; on a real link they would.

Taught in: no chapter (README, "A table on object storage"; docs/PERFORMANCE.md)
"""

from __future__ import annotations

import argparse
import http.client
import statistics
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

import pyarrow as pa

from lsm_lab.errors import InputError

#: headers that belong to one hop, never forwarded (RFC 9110 §7.6.1)
_HOP = {"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade"}
LOOPBACK = "127.0.0.1"


class LatencyProxy:
    """A loopback HTTP proxy that waits `latency` seconds before forwarding each request to `upstream`.

        with LatencyProxy("http://127.0.0.1:5000", latency=0.02) as proxy:
            ... endpoint = proxy.endpoint ...     proxy.requests: how many were forwarded
    """

    def __init__(self, upstream: str, latency: float, *, max_requests: int = 100_000,
                 max_seconds: float = 1800.0) -> None:
        parts = urlsplit(upstream)
        if parts.scheme != "http" or parts.hostname not in (LOOPBACK, "localhost") or parts.port is None:
            raise InputError(f"upstream: the proxy forwards only to a local HTTP server (http://127.0.0.1:PORT), "
                             f"not {upstream!r}")
        if not 0 <= latency <= 10:
            raise InputError(f"latency must be between 0 and 10 seconds, not {latency!r}")
        self.upstream_port = parts.port
        self.latency = latency
        self.max_requests = max_requests
        self.max_seconds = max_seconds
        self.requests = 0
        self.by_method: dict[str, int] = {}
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._deadline = 0.0
        self.endpoint = ""

    def _count(self, method: str) -> bool:
        """Count one request; False once the proxy has reached its bounds (the request is refused)."""
        with self._lock:
            if self.requests >= self.max_requests or time.monotonic() > self._deadline:
                return False
            self.requests += 1
            self.by_method[method] = self.by_method.get(method, 0) + 1
            return True

    def reset(self) -> dict[str, int]:
        """The counts so far (`{"requests": n, "GET": ..}`), then zero."""
        with self._lock:
            out = {"requests": self.requests, **self.by_method}
            self.requests = 0
            self.by_method = {}
        return out

    def start(self) -> LatencyProxy:
        proxy = self
        local = threading.local()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as the clients expect

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _upstream(self) -> http.client.HTTPConnection:
                conn = getattr(local, "conn", None)
                if conn is None:
                    conn = local.conn = http.client.HTTPConnection(LOOPBACK, proxy.upstream_port, timeout=60)
                return conn

            def _forward(self) -> None:
                if not proxy._count(self.command):
                    self.send_error(503, "latency proxy: request or time budget spent")
                    return
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
                time.sleep(proxy.latency)  # the round trip a real store would cost
                for attempt in range(2):  # a kept-alive upstream connection may have been closed: reconnect once
                    conn = self._upstream()
                    try:
                        conn.request(self.command, self.path, body=body, headers=headers)
                        answer = conn.getresponse()
                        data = answer.read()
                        break
                    except (http.client.HTTPException, OSError):
                        conn.close()
                        local.conn = None
                        if attempt:
                            self.send_error(502, "latency proxy: the local server did not answer")
                            return
                self.send_response_only(answer.status, answer.reason)
                for k, v in answer.getheaders():
                    if k.lower() not in _HOP and k.lower() != "content-length":
                        self.send_header(k, v)
                self.send_header("Content-Length", answer.getheader("Content-Length") or str(len(data))
                                 if self.command == "HEAD" else str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

        self._server = ThreadingHTTPServer((LOOPBACK, 0), Handler)
        self._server.daemon_threads = True
        self.endpoint = f"http://{LOOPBACK}:{self._server.server_address[1]}"
        self._deadline = time.monotonic() + self.max_seconds
        self._thread = threading.Thread(target=self._server.serve_forever, name="lsm_lab-latency-proxy", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> LatencyProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _median(fn: Callable[[], pa.Table], repeats: int, proxy: LatencyProxy) -> tuple[float, int, pa.Table]:
    """Median seconds of `repeats` runs, the requests of one run, and the last result."""
    times, counts, result = [], [], pa.table({})
    for _ in range(repeats):
        proxy.reset()
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
        counts.append(proxy.reset()["requests"])
    return statistics.median(times), round(statistics.median(counts)), result


def run(rows: int = 200_000, repeats: int = 3, latency_ms: float = 20.0, seed: int = 7,
        log: Callable[[str], None] = print) -> dict[str, Any]:
    """Write the table, then time both readers behind the proxy; {"rows", "latency_ms", "ops": {...}}."""
    from lsm_lab.api import create_table, open_table  # (imported when run: `lsm-lab --help` loads none of it)
    from lsm_lab.extras import require  # (idem)
    from lsm_lab.interop.hudi_tables import hudi_available  # (idem)
    from lsm_lab.lab.datagen import TripsGenerator  # (idem)
    from lsm_lab.lab.s3local import LocalS3  # (idem: moto, the s3 extra)

    if rows < 1 or repeats < 1:
        raise InputError(f"--rows and --repeats must be at least 1, not {rows} and {repeats}")
    if not 0 <= latency_ms <= 10_000:
        raise InputError(f"--latency-ms must be between 0 and 10000, not {latency_ms:g}")
    if not hudi_available():
        require("interop", "the latency comparison with hudi-rs")
    import hudi  # (the interop extra, checked just above)

    gen = TripsGenerator(seed)
    inserts = gen.inserts(rows)
    updates = gen.updates(max(1, rows // 10))
    out: dict[str, Any] = {"rows": rows, "repeats": repeats, "latency_ms": latency_ms, "ops": {}}
    with LocalS3() as s3:
        uri = f"{s3.new_bucket('latency')}/trips"
        log(f"writing {rows:,} rows to {uri} (version 8, MERGE_ON_READ) ...")
        t = create_table(uri, storage_options=s3.options(), name="trips", record_key="uuid", partition_by="city",
                         ordering_field="ts", table_type="MERGE_ON_READ", layout="default", table_version=8)
        t.bulk_insert(inserts)
        t.upsert(updates)
        with LatencyProxy(s3.endpoint, latency_ms / 1000.0) as proxy:
            options = {**s3.options(), "aws_endpoint_url": proxy.endpoint}
            city = "san_francisco"

            def ours(filtered: bool) -> pa.Table:
                table = open_table(uri, storage_options=options)
                return table.read(filter=[("city", "=", city)]) if filtered else table.read()

            def theirs(filtered: bool) -> pa.Table:
                table = hudi.HudiTableBuilder.from_base_uri(uri).with_storage_options(options).build()
                opts = hudi.HudiReadOptions()
                if filtered:
                    opts = opts.with_filters([("city", "=", city)])
                batches = table.read(opts)
                return pa.Table.from_batches(batches) if batches else pa.table({})

            for name, filtered in (("snapshot", False), ("filtered", True)):
                log(f"{name}: lsm_lab and hudi-rs, {latency_ms:g} ms per request, median of {repeats} ...")
                a_s, a_n, a = _median(lambda f=filtered: ours(f), repeats, proxy)  # type: ignore[misc]
                b_s, b_n, b = _median(lambda f=filtered: theirs(f), repeats, proxy)  # type: ignore[misc]
                if a.num_rows != b.num_rows:
                    raise AssertionError(f"{name}: lsm_lab read {a.num_rows} rows, hudi-rs {b.num_rows}")
                out["ops"][name] = {"rows": a.num_rows, "lsm_lab_s": a_s, "hudi_rs_s": b_s,
                                    "lsm_lab_requests": a_n, "hudi_rs_requests": b_n}
    return out


def report(result: dict[str, Any]) -> str:
    lines = [f"{result['rows']:,} rows, version 8 MERGE_ON_READ on the local S3 server behind "
             f"{result['latency_ms']:g} ms per request; median of {result['repeats']}",
             f"{'read':<10}{'rows':>9}{'lsm_lab s':>11}{'requests':>10}{'hudi-rs s':>11}{'requests':>10}"
             f"{'lsm_lab/hudi-rs':>17}"]
    for name, r in result["ops"].items():
        ratio = r["lsm_lab_s"] / r["hudi_rs_s"] if r["hudi_rs_s"] > 0 else float("nan")
        lines.append(f"{name:<10}{r['rows']:>9,}{r['lsm_lab_s']:>11.3f}{r['lsm_lab_requests']:>10}"
                     f"{r['hudi_rs_s']:>11.3f}{r['hudi_rs_requests']:>10}{ratio:>16.2f}x")
    return "\n".join(lines)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rows", type=int, default=200_000, help="rows of the table (default 200000)")
    p.add_argument("--repeats", type=int, default=3, help="runs per reader and read, median reported (default 3)")
    p.add_argument("--latency-ms", type=float, default=20.0,
                   help="milliseconds the proxy waits before forwarding each request (default 20)")
    p.add_argument("--json", metavar="OUT", help="also write the figures as JSON")


__all__ = ["LatencyProxy", "add_arguments", "report", "run"]
