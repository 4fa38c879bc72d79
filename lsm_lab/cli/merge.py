"""The ``lsm-lab merge`` and ``lsm-lab bench merge`` subcommands.

``lsm_lab/cli/app.py`` owns the top-level parser; it calls `register` with its
subparsers object and `register_bench` with the ``bench`` command's
subparsers. Each subcommand sets ``func`` (``args -> exit code``); errors a
user can make surface as `LsmLabError` with the file named, for cli.py to print.

    lsm-lab merge out.parquet run0.parquet run1.parquet --key id --ordering ts
    lsm-lab bench merge --rows 2000000 --k 2 4 8 --json /tmp/merge.json

Taught in: notebooks/10_sorted_vs_hash_on_spark.ipynb
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from lsm_lab.cli.bench import register_args_bench
from lsm_lab.cli.console import ENGINES, source_constant

# start-up: the merge engines and the merge bench are imported by the command that runs;
# the default batch is read from lsm_lab/merge/files.py's source (importing it loads pyarrow)
MERGE_BATCH_ROWS: int = source_constant("lsm_lab.merge.files", "MERGE_BATCH_ROWS")

_MERGE_HELP = "merge sorted Parquet runs into one sorted Parquet file (one row per key)"
_MERGE_EPILOG = """\
Inputs are given oldest first: when a key is in several runs, the later run
wins (or, with --ordering, the greater ordering value wins and ties go to the
later run). Every input must be sorted by the key with no key twice; an
unsorted input is reported with its file name. Engines give identical rows:
  sorted      streaming merge at Arrow speed, memory O(runs x batch) (default)
  loser_tree  RFC-103's per-record loser tree (slow, exact reference)
  hash        Hudi's classic hash merge (accepts unsorted input; sorts nothing)
  heapq       Python heapq.merge reference (slow)
Example: lsm-lab merge out.parquet base.parquet log1.parquet --key id --ordering ts
"""


def _run_merge(args: argparse.Namespace) -> int:
    from lsm_lab.merge.files import merge_parquet_files  # start-up: on first use

    stats = merge_parquet_files(args.out, args.inputs, key=args.key, ordering=args.ordering, engine=args.engine,
                                delete_column=args.delete_column, row_group_size=args.row_group_size,
                                batch_size=args.batch_size, progress=not args.quiet)
    if args.json:
        print(json.dumps(stats, indent=2, default=str))
    else:
        print(f"merged {stats['inputs']} file(s): {stats['rows_in']:,} rows in, {stats['rows_out']:,} rows out "
              f"({stats['row_groups']} row groups) in {stats['seconds']:.2f} s with {stats['engine']} "
              f"-> {stats['output']}")
    return 0


def register(subparsers: Any) -> None:
    """Add ``merge OUT IN1 IN2 ... --key K [--ordering F] [--engine E]`` to `subparsers`."""
    p = subparsers.add_parser("merge", help=_MERGE_HELP, description=_MERGE_HELP, epilog=_MERGE_EPILOG,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", metavar="OUT", help="output Parquet file (replaced if it exists)")
    p.add_argument("inputs", metavar="IN", nargs="+", help="sorted Parquet runs, oldest first")
    p.add_argument("--key", required=True, help="record key column (string, sorted in every input)")
    p.add_argument("--ordering", default=None,
                   help="ordering column: event-time ordering (greater wins); default: the later input wins")
    p.add_argument("--engine", choices=ENGINES, default="sorted", help="merge engine (default: sorted)")
    p.add_argument("--delete-column", default=None,
                   help="boolean column marking deletes (dropped keys); it is not written to OUT")
    p.add_argument("--row-group-size", type=int, default=131_072, help="rows per output row group")
    p.add_argument("--batch-size", type=int, default=MERGE_BATCH_ROWS,
                   help=f"rows per batch read from each input (default {MERGE_BATCH_ROWS:,}; memory is O(inputs x batch))")
    p.add_argument("--json", action="store_true", help="print the stats as JSON")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=_run_merge)


def _run_bench(args: argparse.Namespace) -> int:
    from lsm_lab.bench.merge import run_from_args  # start-up: on first use

    return run_from_args(args)


def register_bench(bench_subparsers: Any) -> None:
    """Add ``merge [--rows N] [--k K ...] [--overlap F] [--json OUT]`` under ``lsm-lab bench``."""
    summary = "benchmark merging k sorted Parquet runs against DuckDB, pyarrow and the I/O floor"

    register_args_bench(bench_subparsers, "merge", summary, "lsm_lab.bench.merge", _run_bench)  # its options live in the bench
