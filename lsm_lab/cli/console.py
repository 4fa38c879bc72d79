"""What the `lsm-lab` commands share: input and output files, `--option KEY=VALUE`, printing a frame.

    read_input_file(path)        .parquet / .csv / .jsonl  → pyarrow.Table   (InputError otherwise)
    open_input_stream(path)      the same, as a stream of batches (`lsm-lab write`)
    write_output_file(t, path)   pyarrow.Table → .parquet / .csv / .jsonl
    write_output_stream(r, path) a RecordBatchReader → the same, batch by batch
    parse_options(items)         ["k=v", ...] → {"k": "v"}
    print_frame(df, as_json)     a pandas DataFrame, as text or JSON records
    add_as_of(parser)            --as-of T (an instant time) | --as-of-completion C (a completion time)
    as_of_arg(args)              → T, CompletionTime(C) or None, for `as_of=`

cli/app.py and the feature command modules beside it import these; none of
them imports app.py, which sits on top and registers them all.

Taught in: notebooks/07_compaction.ipynb
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa

from lsm_lab.errors import InputError
from lsm_lab.timeline.instanttime import CompletionTime, TimeLike

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
        return CompletionTime(completion)
    return getattr(args, "as_of", None)


def read_input_file(path: str) -> pa.Table:
    """Read Parquet, CSV or JSON lines (by extension) into an Arrow table."""
    p = Path(path)
    if not p.is_file():
        raise InputError("no such file", path=p)
    suffix = p.suffix.lower()
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


#: the help text of every command's table argument (tables live on local disk or an object store)
TABLE_HELP = "table folder or URI (s3://bucket/prefix, gs://, az://)"

__all__ = ["TABLE_HELP", "open_input_stream", "parse_options", "print_frame", "read_input_file", "write_output_file", "write_output_stream"]
