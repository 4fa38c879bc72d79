"""`lsm-lab bench NAME ...`: the benchmarks that belong to no feature command (storage, cdc, scan).

Every command module of cli/ contributes to the parser the same way (app.py's `FEATURES`):
`register(subparsers)` for its commands, `register_bench(bench_subparsers)` for its
benchmarks, `SHOW` for its `lsm-lab show` subjects. This module has only benchmarks;
`register_report_bench` is the shape most of them share (one `run`, one `report`).

Taught in: no chapter (README, "Measured")
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lsm_lab.bench import cdc, latency, storage
from lsm_lab.bench import scan as scan_bench


def register_report_bench(bench_subparsers: Any, name: str, summary: str, doc: str | None, *,
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
    """`lsm-lab bench storage`, `lsm-lab bench cdc`, `lsm-lab bench scan` and `lsm-lab bench latency`."""
    register_report_bench(bench_subparsers, "storage",
                          "a table on local disk vs on a local S3 server (moto): seconds and requests per operation",
                          storage.__doc__, add_arguments=storage.add_arguments, run=storage.run, report=storage.report)
    register_report_bench(bench_subparsers, "cdc",
                          "CDC log bytes per logging mode, write time with/without CDC, read_cdc from logs vs inference",
                          cdc.__doc__, add_arguments=cdc.add_arguments, run=cdc.run, report=cdc.report)
    register_report_bench(bench_subparsers, "scan",
                          "scan().to_reader() batch by batch vs read(): peak RSS, throughput, first batch",
                          scan_bench.__doc__, add_arguments=scan_bench.add_arguments, run=scan_bench.run,
                          report=scan_bench.report)
    latency.register(bench_subparsers)


__all__ = ["register_bench", "register_report_bench"]
