"""What the `lsm-lab` commands share: input and output files, `--option KEY=VALUE`, printing a frame.

    read_input_file(path)        .parquet / .csv / .jsonl  → pyarrow.Table   (InputError otherwise)
    open_input_stream(path)      the same, as a stream of batches (`lsm-lab write`)
    write_output_file(t, path)   pyarrow.Table → .parquet / .csv / .jsonl
    write_output_stream(r, path) a RecordBatchReader → the same, batch by batch
    parse_options(items)         ["k=v", ...] → {"k": "v"}
    print_frame(df, as_json)     a pandas DataFrame, as text or JSON records
    print_rows(rows, as_json)    dict rows, laid out as print_frame would, without pandas
    add_as_of(parser)            --as-of T (an instant time) | --as-of-completion C (a completion time)
    as_of_arg(args)              → T, CompletionTime(C) or None, for `as_of=`
    LazySubParsers, add_lazy_parser   a subcommand whose options are added only when it is chosen
    source_constant(module, name)     a constant of a module's source, read without importing it (ENGINES)

cli/app.py and the feature command modules beside it import these; none of
them imports app.py, which sits on top and registers them all.

Start-up: building the parser (all of `lsm-lab --help`, `lsm-lab read --help`)
imports no pyarrow, numpy or pandas. This module and the command modules import
the library inside the functions that run a command; the options of a benchmark,
which its heavy lsm_lab/bench module defines, are added when it is chosen
(`LazySubParsers`); a constant the options need (the merge engines' names) is
read from its module's source (`source_constant`). tests/test_cli_startup.py
checks what each entry point imports.

Taught in: notebooks/07_compaction.ipynb
"""

from __future__ import annotations

import argparse
import ast
import functools
import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsm_lab.errors import InputError

if TYPE_CHECKING:  # start-up: pyarrow and the timeline load when a command runs
    import pyarrow as pa

    from lsm_lab.timeline.instanttime import TimeLike

AS_OF_HELP = ("time travel to this instant time (yyyyMMddHHmmssSSS, the values of _hoodie_commit_time and of the "
              "timeline; Spark's as.of.instant): every completed write begun at or before it; 0: before every instant")
AS_OF_COMPLETION_HELP = ("time travel to this completion time instead: every write completed at or before it, the "
                         "table exactly as it was then (the Hudi 1.0 spec's snapshot read time)")


def add_as_of(parser: argparse.ArgumentParser, what: str = "") -> None:
    """`--as-of` (an instant time) and `--as-of-completion` (a completion time), one or the other."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--as-of", metavar="T", help=AS_OF_HELP + what)
    group.add_argument("--as-of-completion", metavar="C", help=AS_OF_COMPLETION_HELP + what)


def as_of_arg(args: argparse.Namespace) -> TimeLike | None:
    """What `add_as_of`'s options ask for, as an `as_of=` value (None: now)."""
    completion = getattr(args, "as_of_completion", None)
    if completion is not None:
        from lsm_lab.timeline.instanttime import CompletionTime  # start-up: on first use

        return CompletionTime(completion)
    return getattr(args, "as_of", None)


def read_input_file(path: str) -> pa.Table:
    """Read Parquet, CSV or JSON lines (by extension) into an Arrow table."""
    p = Path(path)
    if not p.is_file():
        raise InputError("no such file", path=p)
    suffix = p.suffix.lower()
    import pyarrow as pa

    try:
        if suffix in (".parquet", ".pq"):
            import pyarrow.parquet as pq

            return pq.read_table(p)
        if suffix == ".csv":
            import pyarrow.csv as pcsv

            return pcsv.read_csv(p)
        if suffix in (".json", ".jsonl", ".ndjson"):
            import pyarrow.json as pjson

            return pjson.read_json(p)
    except (pa.ArrowInvalid, OSError) as exc:
        raise InputError(f"cannot read {suffix[1:]} file: {exc}", path=p) from None
    raise InputError("unknown file type (use .parquet, .csv or .jsonl)", path=p)


#: CSV / JSON lines read by `open_input_stream` in blocks of this many bytes (their types come from the first)
INPUT_BLOCK_BYTES = 64 << 20


def open_input_stream(path: str) -> Iterator[pa.RecordBatch]:
    """Parquet (row group by row group), CSV or JSON lines (block by block), by extension, as a stream of
    batches (`lsm-lab write`: the table writes it in bounded memory).  A file that cannot be read is an
    InputError, when it is opened or later, at the batch that fails."""
    p = Path(path)
    if not p.is_file():
        raise InputError("no such file", path=p)
    suffix = p.suffix.lower()
    if suffix not in (".parquet", ".pq", ".csv", ".json", ".jsonl", ".ndjson"):
        raise InputError("unknown file type (use .parquet, .csv or .jsonl)", path=p)

    def batches() -> Iterator[pa.RecordBatch]:
        import pyarrow as pa  # start-up: when a command reads its input

        try:
            if suffix in (".parquet", ".pq"):
                import pyarrow.parquet as pq

                with pq.ParquetFile(p, pre_buffer=False) as f:  # pre_buffer's cache keeps every row group read
                    yield from f.iter_batches()
            elif suffix == ".csv":
                import pyarrow.csv as pcsv

                yield from pcsv.open_csv(p, read_options=pcsv.ReadOptions(block_size=INPUT_BLOCK_BYTES))
            else:
                import pyarrow.json as pjson

                yield from pjson.open_json(p, read_options=pjson.ReadOptions(block_size=INPUT_BLOCK_BYTES))
        except (pa.ArrowInvalid, OSError) as exc:
            raise InputError(f"cannot read {suffix[1:]} file: {exc}", path=p) from None

    return batches()


def write_output_stream(reader: pa.RecordBatchReader, path: str) -> int:
    """Write a stream batch by batch to .parquet (`pq.ParquetWriter`) / .csv / .jsonl; the rows written.

    One batch in memory at a time (JSON lines: a batch's rows as Python values)."""
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix not in (".parquet", ".pq", ".csv", ".json", ".jsonl", ".ndjson"):
        raise InputError("unknown output type (use .parquet, .csv or .jsonl)", path=p)
    rows = 0
    if suffix in (".parquet", ".pq"):
        import pyarrow.parquet as pq

        with pq.ParquetWriter(p, reader.schema) as out:
            for batch in reader:
                out.write_batch(batch)
                rows += batch.num_rows
    elif suffix == ".csv":
        import pyarrow.csv as pcsv

        with pcsv.CSVWriter(p, reader.schema) as csv_out:
            for batch in reader:
                csv_out.write_batch(batch)
                rows += batch.num_rows
    else:
        with open(p, "w", encoding="utf-8") as fh:
            for batch in reader:
                fh.writelines(json.dumps(row, default=str) + "\n" for row in batch.to_pylist())
                rows += batch.num_rows
    return rows


def write_output_file(table: pa.Table, path: str) -> None:
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix in (".parquet", ".pq"):
        import pyarrow.parquet as pq

        pq.write_table(table, p)
    elif suffix == ".csv":
        import pyarrow.csv as pcsv

        pcsv.write_csv(table, p)
    elif suffix in (".json", ".jsonl", ".ndjson"):
        with open(p, "w", encoding="utf-8") as fh:
            for row in table.to_pylist():
                fh.write(json.dumps(row, default=str) + "\n")
    else:
        raise InputError("unknown output type (use .parquet, .csv or .jsonl)", path=p)


def parse_options(items: list[str] | None, flag: str = "--option") -> dict[str, str]:
    """`--option KEY=VALUE` items (repeatable) as a dict."""
    out = {}
    for item in items or []:
        if "=" not in item:
            raise InputError(f"{flag} expects key=value, got {item!r}")
        k, v = item.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def print_frame(df: Any, as_json: bool) -> None:
    """Print a pandas DataFrame as a table (at most 500 rows) or, with `as_json`, as JSON records."""
    if as_json:
        print(df.to_json(orient="records", indent=2, default_handler=str))
    else:
        import pandas as pd

        with pd.option_context("display.max_rows", 500, "display.max_columns", 50, "display.width", 200,
                               "display.max_colwidth", 60):
            print(df.to_string(index=False) if len(df) else "(empty)")


def _cell(value: Any) -> str:
    return "None" if value is None else str(value)


def _numeric(values: list[Any]) -> bool:
    """A column pandas would hold as int64 or bool (its header then gets the sign's leading space)."""
    return bool(values) and (all(isinstance(v, bool) for v in values)
                             or all(isinstance(v, int) and not isinstance(v, bool) for v in values))


def format_rows(rows: Sequence[dict[str, Any]]) -> str:
    """Dict rows (the keys of the first are the columns) as `print_frame` lays a DataFrame out, without pandas.

    pandas' `to_string(index=False)` for columns of str, int, bool and None: each column right-justified to
    its widest cell, one space between columns, a numeric column's header one space wider; "(empty)" for no
    rows. (Floats and ints mixed with None, which pandas turns into floats, are printed as given.)"""
    if not rows:
        return "(empty)"
    columns = list(rows[0])
    lines: list[list[str]] = [[] for _ in range(len(rows) + 1)]
    for col in columns:
        values = [r.get(col) for r in rows]
        cells = [(" " if _numeric(values) else "") + str(col), *(_cell(v) for v in values)]
        width = max(len(c) for c in cells)
        for line, c in zip(lines, cells):
            line.append(c.rjust(width))
    return "\n".join(" ".join(line) for line in lines)


def print_rows(rows: Sequence[dict[str, Any]], as_json: bool) -> None:
    """Print dict rows as `print_frame` prints a frame of them (text or JSON records), without loading pandas."""
    if as_json:
        print(json.dumps(list(rows), indent=2, separators=(",", ":"), default=str))
    else:
        print(format_rows(rows))


class LazySubParsers(argparse._SubParsersAction):  # type: ignore[type-arg]
    """Subcommands whose options are added only when the command line chooses them.

    `add_lazy_parser(subparsers, name, fill, ...)` creates the parser (its name and one-line help show in the
    parent's --help) and keeps `fill(parser)`, which adds its options and description; parsing that name
    calls `fill` first. With `lazy = False` (a parser a test walks) `fill` runs at once."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = True
        self.pending: dict[str, Callable[[argparse.ArgumentParser], None]] = {}

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        name = values[0] if values else None
        fill = self.pending.pop(name, None) if isinstance(name, str) else None
        if fill is not None and isinstance(name, str):
            fill(self._name_parser_map[name])
        super().__call__(parser, namespace, values, option_string)


def add_lazy_parser(subparsers: Any, name: str, fill: Callable[[argparse.ArgumentParser], None],
                    **kwargs: Any) -> argparse.ArgumentParser:
    """`subparsers.add_parser(name, **kwargs)`, with `fill(parser)` run when `name` is chosen (lazy
    `LazySubParsers`) or now (any other subparsers object)."""
    parser: argparse.ArgumentParser = subparsers.add_parser(name, **kwargs)
    if isinstance(subparsers, LazySubParsers) and subparsers.lazy:
        subparsers.pending[name] = fill
    else:
        fill(parser)
    return parser


@functools.cache
def source_constant(module: str, name: str) -> Any:
    """The literal value of `name = ...` in lsm_lab module `module`, read from its source without importing
    it (importing lsm_lab.merge.policy would run lsm_lab.merge's __init__, which loads pyarrow); imported
    after all if the value is not a literal."""
    parts = module.split(".")
    path = Path(__file__).resolve().parents[1].joinpath(*parts[1:])
    path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AnnAssign) and node.value is not None else []
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            try:
                return ast.literal_eval(node.value)  # type: ignore[attr-defined]
            except ValueError:
                break
    import importlib

    return getattr(importlib.import_module(module), name)


#: the merge engines' names (lsm_lab.merge.ENGINES), for `--merge` and `--engine` choices
ENGINES: tuple[str, ...] = tuple(source_constant("lsm_lab.merge.policy", "ENGINES"))

#: the help text of every command's table argument (tables live on local disk or an object store)
TABLE_HELP = "table folder or URI (s3://bucket/prefix, gs://, az://)"

__all__ = ["ENGINES", "TABLE_HELP", "LazySubParsers", "add_lazy_parser", "format_rows", "open_input_stream", "parse_options",
           "print_frame", "print_rows", "read_input_file", "source_constant", "write_output_file",
           "write_output_stream"]
