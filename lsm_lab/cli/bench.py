"""`lsm-lab bench NAME ...`: the benchmarks that belong to no feature command (storage, cdc, scan, startup, scale,
write-stream).

Every command module of cli/ contributes to the parser the same way (app.py's `FEATURES`):
`register(subparsers)` for its commands, `register_bench(bench_subparsers)` for its
benchmarks, `SHOW` for its `lsm-lab show` subjects. This module has only benchmarks;
`register_report_bench` is the shape most of them share (one `run`, one `report`);
`register_module_bench` is the same with the bench module imported only when its
bench is chosen, so that `lsm-lab --help` and `lsm-lab bench --help` import no
benchmark (start-up, lsm_lab/cli/console.py). `startup` and `scale` have options
of their own (`add_arguments`, `run_from_args` in their modules), added the same lazy way.

Taught in: no chapter (README, "Measured")
"""

from __future__ import annotations

import argparse
import importlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from lsm_lab.cli.console import add_lazy_parser


def register_report_bench(bench_subparsers: Any, name: str, summary: str, doc: str | None, *,
                          add_arguments: Callable[[argparse.ArgumentParser], None],
                          run: Callable[..., dict[str, Any]], report: Callable[[dict[str, Any]], str],
                          extra_args: Sequence[str] = ()) -> None:
    """Add ``lsm-lab bench NAME [--rows N] [--repeats R] [--json OUT]`` for a bench of one `run` and one `report`.

    `add_arguments` adds --rows, --repeats and --json (their defaults differ per bench);
    the command prints `report(run(rows=, repeats=))` and saves the figures as JSON if asked;
    `extra_args` names more parsed options passed to `run` by name.
    (`register_module_bench` is the same with the bench module imported only when the bench is chosen.)
    """
    p = bench_subparsers.add_parser(name, help=summary, description=doc,
                                    formatter_class=argparse.RawDescriptionHelpFormatter)
    _fill_report_bench(p, add_arguments=add_arguments, run=run, report=report, extra_args=extra_args)


def _fill_report_bench(p: argparse.ArgumentParser, *, add_arguments: Callable[[argparse.ArgumentParser], None],
                       run: Callable[..., dict[str, Any]], report: Callable[[dict[str, Any]], str],
                       extra_args: Sequence[str] = ()) -> None:
    def run_from_args(args: argparse.Namespace) -> int:
        extra = {k: getattr(args, k) for k in extra_args}
        result = run(rows=args.rows, repeats=args.repeats, **extra)
        print(report(result))
        if args.json:
            Path(args.json).write_text(json.dumps(result, indent=2))
        return 0

    add_arguments(p)
    p.set_defaults(func=run_from_args)


def register_module_bench(bench_subparsers: Any, name: str, summary: str, module: str,
                          extra_args: Sequence[str] = ()) -> None:
    """`register_report_bench` for the bench module `module` (its `__doc__`, `add_arguments`, `run`, `report`),
    imported when `lsm-lab bench NAME` is chosen: `lsm-lab --help` and `lsm-lab bench --help` import no bench."""
    def fill(p: argparse.ArgumentParser) -> None:
        mod = importlib.import_module(module)
        p.description = mod.__doc__
        _fill_report_bench(p, add_arguments=mod.add_arguments, run=mod.run, report=mod.report, extra_args=extra_args)

    add_lazy_parser(bench_subparsers, name, fill, help=summary, formatter_class=argparse.RawDescriptionHelpFormatter)


def register_args_bench(bench_subparsers: Any, name: str, summary: str, module: str,
                        run_from_args: Callable[[argparse.Namespace], int] | None = None) -> None:
    """``lsm-lab bench NAME`` for the bench module `module` with options of its own: its `__doc__`,
    `add_arguments(parser)` and `run_from_args(args) -> exit code` (or the one given), imported when the
    bench is chosen."""
    def fill(p: argparse.ArgumentParser) -> None:
        mod = importlib.import_module(module)
        p.description = mod.__doc__ or summary
        mod.add_arguments(p)
        p.set_defaults(func=run_from_args or mod.run_from_args)

    add_lazy_parser(bench_subparsers, name, fill, help=summary, formatter_class=argparse.RawDescriptionHelpFormatter)


def register_bench(bench_subparsers: Any) -> None:
    """`lsm-lab bench storage`, `latency`, `cdc`, `scan`, `startup`, `scale`, `write-stream` and `metadata`."""
    register_module_bench(bench_subparsers, "storage",
                          "a table on local disk vs on a local S3 server (moto): seconds and requests per operation",
                          "lsm_lab.bench.storage")
    register_module_bench(bench_subparsers, "latency",
                          "lsm_lab vs hudi-rs reading from a local S3 server behind a per-request latency (a proxy)",
                          "lsm_lab.bench.latency", extra_args=("latency_ms",))
    register_module_bench(bench_subparsers, "cdc",
                          "CDC log bytes per logging mode, write time with/without CDC, read_cdc from logs vs inference",
                          "lsm_lab.bench.cdc")
    register_module_bench(bench_subparsers, "scan",
                          "scan().to_reader() batch by batch vs read(): peak RSS, throughput, first batch",
                          "lsm_lab.bench.scan", extra_args=("hudi_rs",))
    register_args_bench(bench_subparsers, "startup",
                        "the start-up of each entry point (whole processes); with --peer-python, the whole-process "
                        "snapshot read vs Paimon's Rust reader", "lsm_lab.bench.startup")
    register_args_bench(bench_subparsers, "scale",
                        "bulk insert, upsert 10%%, snapshot read, full compaction at growing sizes: time and peak "
                        "RSS, the fitted exponent (time ~ N^e)", "lsm_lab.bench.scale")
    register_args_bench(bench_subparsers, "write-stream",
                        "writing N rows from a RecordBatchReader vs from one in-memory table: peak RSS and time, each "
                        "in its own process", "lsm_lab.bench.write_stream")
    register_args_bench(bench_subparsers, "metadata",
                        "the metadata table on a local S3 server: requests (LIST, GET, HEAD) and time to plan a "
                        "snapshot of 2,000+ data files from the MDT vs by listing", "lsm_lab.bench.metadata")


__all__ = ["register_args_bench", "register_bench", "register_module_bench", "register_report_bench"]
