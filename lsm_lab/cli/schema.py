"""`lsm-lab show schema PATH [--as-of T] [--history] [--json]`: the table schema, now, as of T, or its history.

    lsm-lab show schema T                 one line per column: name, type, nullable
    lsm-lab show schema T --as-of 2026…   the schema a time-travel read at that time uses
    lsm-lab show schema T --history       one row per instant where the schema changed (Table.schema_history)

`lsm_lab/cli/app.py` registers `SHOW` under `lsm-lab show`; `register` adds the
`--history` option to the `show` command.

Taught in: no chapter (docs/FORMAT.md "Schema evolution")
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from lsm_lab.cli.console import as_of_arg, print_frame

if TYPE_CHECKING:  # start-up: pyarrow and the table layer load when the command runs
    import pyarrow as pa


def schema_frame(schema: pa.Schema) -> pa.Table:
    """One row per column of `schema`: column, type, nullable."""
    import pyarrow as pa  # start-up: on first use

    return pa.table({"column": pa.array(schema.names, pa.string()),
                     "type": pa.array([str(f.type) for f in schema], pa.string()),
                     "nullable": pa.array([f.nullable for f in schema], pa.bool_())})


def show_schema(args: argparse.Namespace) -> int:
    from lsm_lab.api import open_table  # start-up: on first use

    table = open_table(args.path)
    if getattr(args, "history", False):
        history = table.schema_history()
        shown = history if args.json else history.drop_columns(["schema"])
        print_frame(shown.to_pandas(), args.json)
        print(f"({history.num_rows} schema version(s))", file=sys.stderr)
        return 0
    at = table.resolve_time(as_of_arg(args))
    table.check_retained(at)
    schema = table.schema_at(at)
    if schema is None or (at is not None and not table.visible_writes(at)):
        when = "yet" if at is None else f"at {at}"
        print(f"{args.path}: no schema {when} (no write had completed)")
        return 0
    print_frame(schema_frame(schema).to_pandas(), args.json)
    return 0


SHOW = {"schema": show_schema}


def register(sub: Any) -> None:
    """Add `--history` to `lsm-lab show` (for the `schema` subject)."""
    sub.choices["show"].add_argument(
        "--history", action="store_true",
        help="schema: one row per instant where the table schema changed (columns added, types promoted)")


__all__ = ["SHOW", "register", "schema_frame", "show_schema"]
