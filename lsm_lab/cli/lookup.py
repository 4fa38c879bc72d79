"""Command-line entry points of the lookup package (registered by lsm_lab/cli/app.py).

    lsm-lab lookup PATH KEY [KEY ...] [--as-of T | --as-of-completion C] [--columns a,b] [--explain] [--json]
        the rows of the keys, then what the reader did (files skipped by range,
        bloom or bucket; row groups read; bytes); --explain prints every decision
    lsm-lab show blooms PATH
        one line per data file: rows, key range, row groups, bloom size, probes,
        fill and expected false-positive rate, or why there is no usable bloom
    lsm-lab bench lookup [--rows N] [--lookups N] [--dir D] [--json OUT] [--cumulative]
        the lookup benchmark (lsm_lab/bench/lookup.py)

`lsm-lab read PATH --key K` (cli.py) is the same lookup as `lsm-lab lookup`,
with the read command's output options.

Simplified compared with Apache Hudi: Hudi has no point-lookup command; its
CLI inspects files and metadata, and lookups run as Spark queries.

Taught in: notebooks/08_point_lookups.ipynb
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from lsm_lab.cli.bench import register_args_bench
from lsm_lab.cli.console import TABLE_HELP, add_as_of, as_of_arg, print_frame
from lsm_lab.errors import CorruptFileError

# start-up: the library (lsm_lab.api, the table layer, the lookup bench) is imported by the command that runs


def cmd_lookup(args: argparse.Namespace) -> int:
    from lsm_lab.api import open_table  # start-up: on first use
    from lsm_lab.table.stats import LookupStats  # start-up: on first use

    table = open_table(args.path)
    columns = [c.strip() for c in args.columns.split(",")] if args.columns else None
    stats = LookupStats(trace=[] if args.explain else None)
    result = table.lookup(args.keys, as_of=as_of_arg(args), columns=columns, stats=stats,
                          indexes=not args.no_indexes)
    print_frame(result.to_pandas(), args.json)
    if stats.trace:
        print("\n".join(stats.trace), file=sys.stderr)
    print(f"({result.num_rows} rows) {stats.summary()}", file=sys.stderr)
    print(stats.index_summary(), file=sys.stderr)
    if stats.slices_pruned_record_index:
        print(f"record index: {stats.slices_pruned_record_index} file slice(s) skipped", file=sys.stderr)
    return 0


def bloom_lines(path: str) -> list[str]:
    """`show blooms`: one line per Parquet data file with its key range and bloom facts."""
    from lsm_lab.filegroup import fsview  # start-up: on first use
    from lsm_lab.storage import as_path  # start-up: on first use
    from lsm_lab.table.footer import FooterCache  # start-up: on first use

    target = as_path(path)  # a folder, a file, or an object-store URI (options: --storage-option)
    items: list[tuple[str, Any]]
    if target.is_file():
        items = [("", target)]
    else:
        items = [(p, fp) for p, fp, name in fsview.list_data_files(target)
                 if name.ext == "parquet" and not (name.is_log and name.log_format == 1)]
    cache = FooterCache()
    lines = []
    for partition, fp in items:
        try:
            info = cache.get(fp)
        except CorruptFileError as exc:
            lines.append(f"{partition}/{fp.name}: unreadable footer ({exc.message})")
            continue
        bloom = info.bloom()
        where = f"{partition}/{fp.name}" if partition else fp.name
        rows = sum(info.rg_rows)
        head = (f"{where}  rows={rows} row_groups={info.num_row_groups} keys=[{info.min_key}, {info.max_key}]"
                f"{' sorted' if info.is_sorted else ''}")
        if bloom is None:
            lines.append(f"{head}  bloom: {info.bloom_status}")
        else:
            lines.append(f"{head}  bloom: {len(bloom.bits):,} bytes k={bloom.num_probes} n={bloom.num_keys} "
                         f"fill={bloom.fill_ratio:.3f} fpp~{bloom.expected_fpp:.4f}")
    return lines or ["(no Parquet data files)"]


def show_blooms(args: argparse.Namespace) -> int:
    for line in bloom_lines(args.path):
        print(line)
    return 0


SHOW = {"blooms": show_blooms}


def register(sub: Any) -> None:
    """Add `lookup` to the `lsm-lab` command parser."""
    p = sub.add_parser("lookup", help="look record keys up, reading only what can hold them",
                       description="Look up record keys in the table at PATH (composite keys as f1:v1,f2:v2) "
                                   "and report what was read: files skipped by bucket, key range and bloom "
                                   "filter, row groups read, bytes.")
    p.add_argument("path", help=TABLE_HELP)
    p.add_argument("keys", nargs="+", metavar="KEY", help="record key(s)")
    add_as_of(p)
    p.add_argument("--columns", help="comma separated columns")
    p.add_argument("--explain", action="store_true", help="print every pruning decision (stderr)")
    p.add_argument("--no-indexes", action="store_true",
                   help="do not use the metadata table's record index (read every file slice's keys)")
    p.add_argument("--json", action="store_true", help="print JSON records")
    p.set_defaults(func=cmd_lookup)


def _run_bench(args: argparse.Namespace) -> int:
    from lsm_lab.bench.lookup import run  # start-up: on first use

    return run(args)


def register_bench(bench_subparsers: Any) -> None:
    """Add `lookup` under `lsm-lab bench`."""
    summary = "point lookups: lsm_tree (sorted, bucketed) against the default layout, same data"

    register_args_bench(bench_subparsers, "lookup", summary, "lsm_lab.bench.lookup", _run_bench)  # its options live in the bench


__all__ = ["SHOW", "bloom_lines", "register", "register_bench"]
