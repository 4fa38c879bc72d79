"""Benchmarks that print ratios against peers measured in the same run (see each module).

Taught in: notebooks/10_sorted_vs_hash_on_spark.ipynb
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any


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


__all__ = ["register_report_bench"]
