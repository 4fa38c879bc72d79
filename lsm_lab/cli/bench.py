"""``lsm-lab bench storage`` and ``lsm-lab bench cdc``: the benchmarks of one `run` and one `report`.

    lsm-lab bench storage [--rows N] [--repeats R] [--json OUT]   local disk vs a local S3 server (moto)
    lsm-lab bench cdc [--rows N] [--repeats R] [--json OUT]       CDC log bytes and write/read times per mode

Each of these benchmarks (lsm_lab/bench/storage.py, lsm_lab/bench/cdc.py) is one
`run(rows=, repeats=)` that returns figures and one `report(figures)` that prints them;
this module turns such a pair into a subcommand.  The other benchmarks belong to the
command module of their feature (merge.py, lookup.py, interop.py, spark.py).

Taught in: notebooks/10_sorted_vs_hash_on_spark.ipynb
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lsm_lab.bench import cdc, storage


def report_bench(bench_subparsers: Any, name: str, summary: str, doc: str | None, *,
                 add_arguments: Callable[[argparse.ArgumentParser], None],
                 run: Callable[..., dict[str, Any]], report: Callable[[dict[str, Any]], str]) -> None:
    """Add ``lsm-lab bench NAME [--rows N] [--repeats R] [--json OUT]`` for a bench of one `run` and one `report`.

    `add_arguments` adds --rows, --repeats and --json (their defaults differ per bench);
    the command prints `report(run(rows=, repeats=))` and saves the figures as JSON if asked.
    """
    def run_from_args(args: argparse.Namespace) -> int:
        result = run(rows=args.rows, repeats=args.repeats)
        print(report(result))
        if args.json:
            Path(args.json).write_text(json.dumps(result, indent=2))
        return 0

    p = bench_subparsers.add_parser(name, help=summary, description=doc,
                                    formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(p)
    p.set_defaults(func=run_from_args)


def register_bench(bench_subparsers: Any) -> None:
    """Add ``storage`` and ``cdc`` under ``lsm-lab bench``."""
    report_bench(bench_subparsers, "storage",
                 "a table on local disk vs on a local S3 server (moto): seconds and requests per operation",
                 storage.__doc__, add_arguments=storage.add_arguments, run=storage.run, report=storage.report)
    report_bench(bench_subparsers, "cdc",
                 "CDC log bytes per logging mode, write time with/without CDC, read_cdc from logs vs inference",
                 cdc.__doc__, add_arguments=cdc.add_arguments, run=cdc.run, report=cdc.report)


__all__ = ["register_bench", "report_bench"]
