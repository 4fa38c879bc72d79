"""What the metadata table saves: the requests to plan a snapshot, with the MDT and by listing.

    lsm-lab bench metadata [--sections listing,record_index,column_stats] [--partitions 40] [--groups 25]
                           [--commits 2] [--repeats 3] [--keys 1000000] [--share 0.01] [--files 1000] [--json OUT]

On the local S3 server (`lsm_lab.lab.s3local`) one table of version 10 (the default: its MDT logs are
native HFile logs) with `hoodie.metadata.enable=true` is written: `partitions` × `groups` file groups
(bulk insert, tiny rows), then `commits` upserts touching every group — MERGE_ON_READ, so each upsert adds a log per group: at least 2,000 data
files at the default size.  Then a snapshot is planned (`Table.latest_slices()` pinned as a read pins
it: the timeline, every file group's latest slice) twice from a fresh `open_table`, each in its own request
scope as a read is:

    listing        use_metadata=False   LIST of the table (1 per 1,000 keys), LIST of .hoodie/
    metadata       use_metadata=True    LIST of .hoodie/ (the timeline; the MDT's folders when it holds them
                                        all), a GET per MDT log file (the process keeps the rest)
    metadata cold  the same, nothing of the MDT kept: + a GET of its base HFile (its hoodie.properties is not
                   read: `mdt_listing.derived_config`)

Every request is recorded with its key (`RequestCounts.trace`) and sorted into: `data LIST` (a
LIST of the table root or a data partition — the MDT's goal is 0), `timeline` (anything under
`.hoodie/` except the MDT: the active timeline, hoodie.properties, the commits' metadata) and `mdt`
(under `.hoodie/metadata/`: its properties, timeline, partition folder and files).  The plans of
both runs are checked equal (same slices, same files).  The issue's goal: 0 data LIST, at most 3
GETs beyond the timeline.  The `files` partition's log files (one per deltacommit since its last
compaction, at most `lsm_lab.metadata.files.compact.max.log.files`, 2 by default: lsm_lab compacts that
partition alone once it holds 2, services/mdt_write.py) are one GET each, so the count depends on where the
table stands in that cycle: reported as `mdt logs`.  Plan time is the
median of `repeats`.  Both modes are measured with the process's cache of commit metadata warm
(`timeline.committed`: an instant file never changes, a long-lived reader reads each once; one
uncounted plan first); a cold process adds one timeline GET per commit to either mode.

Sections (`SECTIONS`, `--sections`; the JSON has one key per section run):

    listing        the measurement above (local S3 server)
    record_index   an upsert of `--share` (1%) of a `--keys`-key COW table without the bucket index: tagged
                   through the record index (RECORD_INDEX) vs by reading every file's keys (SIMPLE), same run;
                   and what the record-index lookups read (blocks per key: table/mdt_lookup.py)
    column_stats   a filter on a non-key column of a `--files`-file COW table: files read with the MDT's
                   column stats vs without (bench/metadata_index.py)

Taught in: notebooks/14_metadata_table.ipynb (the requests of a plan with and without the MDT; README, *Measured*)
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from lsm_lab.api import Table, create_table, open_table
from lsm_lab.bench import metadata_index
from lsm_lab.errors import InputError
from lsm_lab.lab.s3local import LocalS3
from lsm_lab.storage import request_scope
from lsm_lab.table import mdt_listing

KINDS = ("LIST", "GET", "HEAD")


def classify(key: str, table_key: str) -> str:
    """Which part of the table a request's key belongs to: "mdt", "timeline" or "data"."""
    rel = key[len(table_key):].lstrip("/") if key.startswith(table_key) else key
    if rel.startswith(".hoodie/metadata"):
        return "mdt"
    if rel.startswith(".hoodie"):
        return "timeline"
    return "data"


def _rows(partitions: int, groups: int, round_: int) -> pa.Table:
    n = partitions * groups * 8  # 8 keys per bucket on average: every bucket of every partition gets rows
    ids = [f"k{i:07d}" for i in range(n)]
    return pa.table({"id": ids, "part": [f"p{i % partitions:03d}" for i in range(n)],
                     "ts": pa.array([round_] * n, pa.int64()), "v": pa.array([float(round_)] * n)})


def build(uri: str, options: dict[str, str], partitions: int, groups: int, commits: int,
          log: Callable[[str], None] = print) -> Table:
    """The measured table: `partitions` × `groups` file groups (bucket index, tiny rows), then `commits` upserts."""
    t = create_table(uri, name="mdt_bench", record_key="id", ordering_field="ts", partition_by="part",
                     table_type="MERGE_ON_READ", layout="lsm_tree", table_version=10, num_buckets=groups,
                     storage_options=options, properties={"hoodie.metadata.enable": "true"})
    log(f"bulk insert: {partitions} partitions x {groups} file groups ...")
    t.bulk_insert(_rows(partitions, groups, 0))
    for r in range(1, commits + 1):
        log(f"upsert {r}/{commits} ...")
        t.upsert(_rows(partitions, groups, r))
    return t


def _plan(uri: str, options: dict[str, str], use_metadata: bool, *, cold: bool = False) -> tuple[list[Any], dict[str, Any]]:
    """One snapshot plan from a fresh `open_table`, its requests by kind and part of the table; `cold`: with
    nothing of the MDT kept by the process (`mdt_listing.forget`)."""
    if cold:
        mdt_listing.forget()
    t = open_table(uri, storage_options=options, use_metadata=use_metadata)
    counts = t.storage.counts
    counts.trace = []
    before = counts.snapshot()
    t0 = time.perf_counter()
    with request_scope(), t.pinned():
        slices = t.latest_slices()
    seconds = time.perf_counter() - t0
    used = counts.since(before)
    trace, counts.trace = counts.trace, None
    key = t.storage._key("") if hasattr(t.storage, "_key") else ""
    parts: dict[str, dict[str, int]] = {p: dict.fromkeys(KINDS, 0) for p in ("data", "timeline", "mdt")}
    for kind, k in trace:
        if kind in KINDS:
            parts[classify(k, key)][kind] += 1
    plan = sorted((s.partition, s.file_id, s.base_instant, tuple(f.path.name for f in s.files)) for s in slices)
    mdt_logs = sum(1 for kind, k in trace if kind == "GET" and classify(k, key) == "mdt" and ".log." in k)
    return plan, {"seconds": seconds, "requests": {k: used[k] for k in KINDS}, "by_part": parts,
                  "mdt_logs": mdt_logs, "from_metadata": t.lists_from_metadata() and use_metadata}


def listing_section(s3: LocalS3, partitions: int = 40, groups: int = 25, commits: int = 2, repeats: int = 3,
                    log: Callable[[str], None] = print) -> dict[str, Any]:
    """Requests and time to plan a snapshot of a table of `partitions` × `groups` × (1 + `commits`) files."""
    uri = f"{s3.new_bucket('mdt')}/t"
    options = s3.options()
    t = build(uri, options, partitions, groups, commits, log)
    files = len(t.data_files())
    out: dict[str, Any] = {"partitions": partitions, "file_groups": partitions * groups, "data_files": files}
    plans = {}
    _plan(uri, options, True)  # warm-up, not counted: this process has read every commit's metadata once
    for name, use, cold in (("listing", False, False), ("metadata", True, False), ("metadata cold", True, True)):
        runs = [_plan(uri, options, use, cold=cold) for _ in range(repeats)]
        plans[name] = runs[0][0]
        first = runs[0][1]
        first["seconds"] = statistics.median(r[1]["seconds"] for r in runs)
        out[name] = first
    if not plans["listing"] == plans["metadata"] == plans["metadata cold"]:
        raise AssertionError("the plan from the metadata table differs from the plan by listing")
    out["slices"] = len(plans["listing"])
    return out


def record_index_section(keys: int = 1_000_000, share: float = 0.01, log: Callable[[str], None] = print,
                         **_: Any) -> dict[str, Any]:
    """`metadata_index.record_index_upsert` in a temporary folder."""
    with tempfile.TemporaryDirectory(prefix="lsm_lab_mdt_ri_") as root:
        return metadata_index.record_index_upsert(root, keys, share=share, log=log)


def column_stats_section(files: int = 1000, log: Callable[[str], None] = print, **_: Any) -> dict[str, Any]:
    """`metadata_index.column_stats_section` in a temporary folder."""
    with tempfile.TemporaryDirectory(prefix="lsm_lab_mdt_cs_") as root:
        return metadata_index.column_stats_section(root, files, log=log)


def _listing(partitions: int = 40, groups: int = 25, commits: int = 2, repeats: int = 3,
             log: Callable[[str], None] = print, **_: Any) -> dict[str, Any]:
    with LocalS3() as s3:
        return listing_section(s3, partitions, groups, commits, repeats, log)


#: section name → function of the run's options (keyword arguments; each takes what it needs)
SECTIONS: dict[str, Callable[..., dict[str, Any]]] = {"listing": _listing, "record_index": record_index_section,
                                                      "column_stats": column_stats_section}


def run(partitions: int = 40, groups: int = 25, commits: int = 2, repeats: int = 3,
        log: Callable[[str], None] = print, *, sections: Sequence[str] = ("listing",), keys: int = 1_000_000,
        share: float = 0.01, files: int = 1000) -> dict[str, Any]:
    unknown = [s for s in sections if s not in SECTIONS]
    if unknown:
        raise InputError(f"unknown section(s) {', '.join(unknown)}; known: {', '.join(SECTIONS)}")
    options = {"partitions": partitions, "groups": groups, "commits": commits, "repeats": repeats, "keys": keys,
               "share": share, "files": files, "log": log}
    return {name: SECTIONS[name](**options) for name in sections}


def report(result: dict[str, Any]) -> str:
    parts = []
    if "listing" in result:
        parts.append(_report_listing(result["listing"]))
    if "record_index" in result:
        r = result["record_index"]
        a, b = r["simple"], r["record_index"]
        lk, one = b["lookup"], b["lookup_one_key"]
        parts.append("\n".join([
            f"upsert of {r['upsert_keys']:,} keys ({r['upsert_keys'] / r['keys']:.0%}) of a {r['keys']:,}-key COW table "
            f"({r['partitions']} partitions, no bucket index; load {r['load_1m']})",
            f"  SIMPLE index (tagging reads every file's keys)  {a['upsert_seconds']:>8.3f} s",
            f"  RECORD_INDEX ({b['shards']} shards)                   {b['upsert_seconds']:>8.3f} s   "
            f"ratio SIMPLE / RECORD_INDEX {r['upsert_ratio_simple_over_record_index']}",
            f"  the same keys looked up alone: {b['lookup_seconds']:.3f} s; shards sought {lk['shards_sought']}, "
            f"merged {lk['shards_merged']}; base blocks touched per key {lk['blocks_per_key']}, log blocks read "
            f"{lk['log_blocks_read']} ({lk['log_blocks_read'] / max(1, r['upsert_keys']):.4f} per key)",
            f"  one key: base blocks touched {one['base_blocks_touched']}, log blocks read {one['log_blocks_read']}",
        ]))
    if "column_stats" in result:
        r = result["column_stats"]
        parts.append(f"filter {r['filter']} on a {r['slices']:,}-file COW table: files read "
                     f"{r['files_read_with_stats']} with column stats, {r['files_read_without']} without "
                     f"(slices opened {r['slices_opened_with_stats']} / {r['slices_opened_without']}; "
                     f"time ratio {r['time_ratio']}, load {r['load_1m']})")
    return "\n\n".join(parts)


def _report_listing(r: dict[str, Any]) -> str:
    lines = [f"snapshot plan of {r['data_files']:,} data files ({r['partitions']} partitions, "
             f"{r['file_groups']:,} file groups, {r['slices']:,} slices) on the local S3 server",
             f"{'':<14}{'LIST':>6}{'GET':>6}{'HEAD':>6}   {'data LIST':>9} {'timeline L/G':>13} "
             f"{'MDT L/G':>8} {'MDT logs':>9} {'plan s':>8}"]
    for name in ("listing", "metadata", "metadata cold"):
        m = r[name]
        q, p = m["requests"], m["by_part"]
        lines.append(f"{name:<14}{q['LIST']:>6}{q['GET']:>6}{q['HEAD']:>6}   {p['data']['LIST']:>9} "
                     f"{p['timeline']['LIST']:>6}/{p['timeline']['GET']:<6} {p['mdt']['LIST']:>3}/{p['mdt']['GET']:<4} "
                     f"{m['mdt_logs']:>9} {m['seconds']:>8.3f}")
    a, b = r["listing"], r["metadata"]
    ratio = a["seconds"] / b["seconds"] if b["seconds"] > 0 else float("nan")
    c = r["metadata cold"]
    lines.append(f"metadata vs listing: {b['by_part']['data']['LIST']} data LIST (listing: "
                 f"{a['by_part']['data']['LIST']}), {b['by_part']['mdt']['GET']} MDT GETs beyond the timeline "
                 f"({b['mdt_logs']} MDT log files; a cold process: {c['by_part']['mdt']['GET']}, with the MDT's "
                 f"base file), plan time {ratio:.2f}x faster")
    return "\n".join(lines)


def run_from_args(args: argparse.Namespace) -> int:
    sections = [x.strip() for x in args.sections.split(",") if x.strip()]
    result = run(args.partitions, args.groups, args.commits, args.repeats, sections=sections, keys=args.keys,
                 share=args.share, files=args.files)
    print(report(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--partitions", type=int, default=40, help="data partitions (default 40)")
    p.add_argument("--groups", type=int, default=25, help="file groups per partition (default 25)")
    p.add_argument("--commits", type=int, default=2, help="upserts after the bulk insert: one log per group each "
                                                          "(default 2: 40 x 25 x 3 = 3,000 data files)")
    p.add_argument("--repeats", type=int, default=3, help="plans per mode, median time reported (default 3)")
    p.add_argument("--sections", default="listing",
                   help=f"comma-separated sections to run, of {', '.join(SECTIONS)} (default listing)")
    p.add_argument("--keys", type=int, default=1_000_000, help="record_index: keys in the table (default 1,000,000)")
    p.add_argument("--share", type=float, default=0.01, help="record_index: share of the keys upserted (default 0.01)")
    p.add_argument("--files", type=int, default=1000, help="column_stats: base files of the COW table (default 1,000)")
    p.add_argument("--json", metavar="OUT", help="also write the figures as JSON")


__all__ = ["SECTIONS", "add_arguments", "build", "classify", "column_stats_section", "listing_section",
           "record_index_section", "report", "run", "run_from_args"]
