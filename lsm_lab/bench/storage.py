"""What a table costs on an object store: the same operations on local disk and on a local S3 server.

    lsm-lab bench storage [--rows 1000000] [--repeats 3] [--json OUT]

Starts moto's S3 server on 127.0.0.1 (`lsm_lab.lab.s3local`), creates the same
lsm_tree MERGE_ON_READ trips table on local disk and in a bucket, and times
each operation on both, with the requests the S3 table sent:

    bulk_insert   N rows                  (one PUT per data file, the commit's instant files and markers)
    upsert        N/10 rows               (a log file per touched file group)
    read          the whole snapshot      (one LIST of the data files, one GET per file)
    read columns  two columns             (the same GETs: a whole object per small file)
    lookup        100 keys                (cold: a file whole when its keys would read most of it, else its
                                           footer and its row groups; warm: one ranged GET per file)
    upsert 2      N/10 rows               (a second log per file group)
    log compact   L0 -> L0                (each log read once, one compacted log written per group)
    compact       full compaction         (each input read once, a new base PUT per group)
    clean         KEEP_LATEST_FILE_VERSIONS 1   (the replaced slices deleted)
    upsert 3      N/10 rows               (logs again, for the clustering)
    cluster       bucket groups with logs (each input read once, new sorted files written)

Next to the S3 requests the table prints the minimum each operation needs and
measured / minimum.  The minimum counts, with F the data files an operation must
read, W the data files it writes, D those it deletes, P the partitions it creates:

    a data file read       whole (a snapshot, a lookup): 1 GET (the object, footer included);
                           streamed (compaction, clustering: memory O(k x window)): 1 GET when it is
                           at most 8 MiB, else 1 + ceil(size / 8 MiB) (footer, then 8 MiB windows)
    a commit               1 LIST of the timeline, 1 GET of the latest commit's metadata (the schema),
                           2 for the lock (a conditional PUT, its release), 3 PUTs (requested,
                           inflight, completed), one marker PUT per file written and 1 DELETE of
                           the markers (S3 DeleteObjects): 7 + W
    bulk_insert / upsert   commit + 1 LIST of the data files + W PUTs + P (partition metadata)
    read / read columns    2 LISTs (timeline, data files) + 1 GET (schema) + 1 GET per file of F
    lookup                 the same, F = the files that hold one of the keys (counted by reading
                           their key columns outside the measured window): a file that holds none
                           needs no GET of its own when the key index or a cached footer rules it out
    (log) compact, cluster commit + 1 LIST of the data files + the reads of F + W PUTs
    clean                  1 LIST of the timeline, 1 LIST of the data files, 2 lock, 3 instant
                           PUTs, ceil(D / 1000) DELETEs

These are lower bounds, not what the design can reach: on top of them a commit sends its heartbeat (a PUT,
a DELETE), its key index sidecar (a PUT) and a second LIST of `.hoodie/` under the lock (the conflict check
must see the other writers' instants), and a table service takes the lock more than once (the lingering
release of `services.lock` makes most of those free).  A lookup's key index sidecars (one GET per commit)
are not counted either.  What lsm_lab does to come near them: `storage.scope` (each listing and small object
once per operation, one LIST of `.hoodie/` for the timeline, markers, heartbeats and archive, asked again
under the lock), one conditional PUT to take a lock this process released last, no lock at a write's start
when nothing needs cleaning up, and a lookup's small files fetched whole, in parallel (`ranged.whole_objects`),
and its larger ones too when the keys the index admits would read most of them anyway (`ranged.whole_pays`:
the repeated 100-key lookup went from 1.30x to 1.05x, its cold run from 34 to 22 requests);
a footer's tail GET sized to the object (`ranged.footer_guess`: a large base file's footer in one GET), the
markers of a service deleted by key with no LIST (`markers.delete_markers(mine_only=True)`), and a clean run in
one lock hold with no heartbeat, the key index sidecars it empties deleted in its bulk DELETE
(`services.clean`).  What stays above the minimum on purpose: a table service's heartbeat (PUT, DELETE; its
execution runs without the lock, so a concurrent runner must see it alive), its second lock hold for the
commit, its key index sidecar PUT and the `.hoodie/` LIST under its claim (the rollback of dead writers must
see the current timeline); a lookup's sidecar GETs, and a footer GET plus a ranged GET for a file larger than
`ranged.WHOLE_MAX` that holds few of the keys (fetching it whole would be one request but many more bytes).

Taught in: notebooks/12_object_storage.ipynb
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lsm_lab.api import Table, create_table
from lsm_lab.format.ranged import STREAM_WINDOW
from lsm_lab.lab.datagen import TripsGenerator
from lsm_lab.lab.s3local import LocalS3
from lsm_lab.storage import walk_sized

OPS = ("bulk_insert", "upsert", "read", "read columns", "lookup", "upsert 2", "log compact", "compact", "clean",
       "upsert 3", "cluster")
WINDOW = STREAM_WINDOW  # a streamed read fetches an object in windows of this many bytes


def _timed(fn: Callable[[], Any], repeats: int) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def _reads(size: int) -> int:
    """GETs a whole read of a data file of `size` bytes needs at least (see the module docstring)."""
    return 1 if size <= WINDOW else 1 + -(-size // WINDOW)


def _files(table: Table) -> dict[str, int]:
    """Data files of the table (relative key → size), hidden folders skipped."""
    return {f"{d}/{n}" if d else n: size or 0 for d, n, size in walk_sized(table.path)}


def _slices(table: Table) -> list[list[tuple[str, int, bool]]]:
    """The latest slices: per file group, (relative key, size, is a log) of each file."""
    return [[(f.relative, f.size, f.name.is_log) for f in fs.files] for fs in table.latest_slices()]


def _holding(table: Table, slices: list[list[tuple[str, int, bool]]], keys: list[str]) -> int:
    """How many files of the slices hold at least one of `keys` (read outside the measured window)."""
    wanted = pa.array(keys, pa.string())
    n = 0
    for sl in slices:
        for key, _, _ in sl:
            data = pq.read_table(pa.BufferReader(table.storage.read(key)))
            if "_hoodie_record_key" in data.column_names:  # (a file without keys needs no GET: not counted)
                n += bool(pc.any(pc.is_in(data.column("_hoodie_record_key"), value_set=wanted)).as_py())
    return n


def minimum(op: str, before: dict[str, int], after: dict[str, int], slices: list[list[tuple[str, int, bool]]],
            new_partitions: int, holding: int | None = None) -> int:
    """The fewest requests `op` needs on an object store (module docstring), from the files before and after
    it and the latest slices before it; `holding`: for a lookup, how many of those files hold a key."""
    written = [k for k in after if k not in before]
    deleted = [k for k in before if k not in after]
    groups = {k.rsplit("/", 1)[-1].split("_", 1)[0] for k in written}  # file ids that got a new file

    def group_of(key: str) -> str:
        return key.rsplit("/", 1)[-1].lstrip(".").split("_", 1)[0]

    commit = 7 + len(written)
    if op == "lookup" and holding is not None:
        return 3 + holding
    if op in ("read", "read columns", "lookup"):  # a snapshot holds its files whole: one GET each
        return 3 + sum(len(sl) for sl in slices)
    if op in ("bulk_insert", "upsert", "upsert 2", "upsert 3"):
        return commit + 1 + len(written) + new_partitions
    if op == "clean":
        return 7 + -(-len(deleted) // 1000) if deleted else 0
    touched = [sl for sl in slices if sl and group_of(sl[0][0]) in groups]
    if op == "log compact":
        reads = sum(_reads(size) for sl in touched for _, size, is_log in sl if is_log)
    else:  # compact, cluster: every file of each rewritten slice
        reads = sum(_reads(size) for sl in touched for _, size, _ in sl)
    return commit + 1 + reads + len(written) if written else 0


def _run_ops(table: Table, rows: int, repeats: int, seed: int, *,
             remote: bool = False) -> dict[str, dict[str, Any]]:
    gen = TripsGenerator(seed)
    inserts = gen.inserts(rows)
    updates = [gen.updates(max(1, rows // 10)) for _ in range(3)]
    keys = inserts.column("uuid").to_pylist()[:: max(1, rows // 100)][:100]
    counts = table.storage.counts
    out: dict[str, dict[str, Any]] = {}
    steps: list[tuple[str, Callable[[], Any], int]] = [
        ("bulk_insert", lambda: table.bulk_insert(inserts), 1),
        ("upsert", lambda: table.upsert(updates[0]), 1),
        ("read", lambda: table.read(), repeats),
        ("read columns", lambda: table.read(columns=["uuid", "fare"]), repeats),
        ("lookup", lambda: table.lookup(keys), repeats),
        ("upsert 2", lambda: table.upsert(updates[1]), 1),
        ("log compact", lambda: table.compact(strategy="log"), 1),
        ("compact", lambda: table.compact(strategy="full"), 1),
        ("clean", lambda: table.clean(policy="KEEP_LATEST_FILE_VERSIONS", retained=1), 1),
        ("upsert 3", lambda: table.upsert(updates[2]), 1),
        ("cluster", lambda: table.cluster(), 1),
    ]
    for name, fn, n in steps:
        if remote:  # the facts the minimum needs, gathered outside the counted window
            files_before, slices = _files(table), _slices(table)
            parts_before = {k.rsplit("/", 1)[0] for k in files_before if "/" in k}
        before = counts.snapshot()
        seconds, result = _timed(fn, n)
        used = {k: round(v / n) for k, v in counts.since(before).items()}
        out[name] = {"seconds": seconds, "requests": used,
                     "rows": result.num_rows if isinstance(result, pa.Table) else None}
        if remote:
            files_after = _files(table)
            parts_after = {k.rsplit("/", 1)[0] for k in files_after if "/" in k}
            holding = _holding(table, slices, keys) if name == "lookup" else None
            out[name]["minimum"] = minimum(name, files_before, files_after, slices, len(parts_after - parts_before),
                                           holding)
    return out


def run(rows: int = 1_000_000, repeats: int = 3, seed: int = 7, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Both tables, every operation; returns {"rows", "local": {op: ...}, "s3": {op: ...}}."""
    kw: dict[str, Any] = {"name": "trips", "record_key": "uuid", "partition_by": "city", "ordering_field": "ts",
                          "table_type": "MERGE_ON_READ", "layout": "lsm_tree", "num_buckets": 4}
    folder = Path(tempfile.mkdtemp(prefix="lsm_lab_bench_storage_"))
    try:
        log(f"local disk: {rows:,} rows ...")
        local = _run_ops(create_table(folder / "trips", **kw), rows, repeats, seed)
        with LocalS3() as s3:
            log(f"local S3 server {s3.endpoint}: {rows:,} rows ...")
            table = create_table(f"{s3.new_bucket('bench')}/trips", storage_options=s3.options(), **kw)
            remote = _run_ops(table, rows, repeats, seed, remote=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    for op in OPS:
        if local[op]["rows"] is not None and local[op]["rows"] != remote[op]["rows"]:
            raise AssertionError(f"{op}: {local[op]['rows']} rows locally, {remote[op]['rows']} on S3")
    return {"rows": rows, "repeats": repeats, "local": local, "s3": remote}


def report(result: dict[str, Any]) -> str:
    lines = [f"{result['rows']:,} rows; reads: median of {result['repeats']}",
             f"{'operation':<14}{'local s':>9}{'S3 s':>9}{'S3/local':>10}   S3 requests (LIST GET HEAD PUT DELETE)"
             f"  total  minimum  total/min"]
    for op in OPS:
        a, b = result["local"][op], result["s3"][op]
        req = b["requests"]
        ratio = b["seconds"] / a["seconds"] if a["seconds"] > 0 else float("nan")
        total = sum(req.values())
        least = b.get("minimum")
        per = f"{total / least:>9.2f}x" if least else f"{'-':>10}"
        lines.append(f"{op:<14}{a['seconds']:>9.2f}{b['seconds']:>9.2f}{ratio:>9.1f}x   "
                     f"{req['LIST']:>4} {req['GET']:>4} {req['HEAD']:>4} {req['PUT']:>4} {req['DELETE']:>4}"
                     f"{'':>13}{total:>6}{least if least is not None else '-':>9}{per}")
    return "\n".join(lines)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rows", type=int, default=1_000_000, help="rows of the table (default 1000000)")
    p.add_argument("--repeats", type=int, default=3, help="runs per read, median reported (default 3)")
    p.add_argument("--json", metavar="OUT", help="also write the figures as JSON")


__all__ = ["OPS", "minimum", "report", "run"]
