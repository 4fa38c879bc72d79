"""`lsm-lab`: the command line.  Every command has `--help`.

    lsm-lab demo [--dir D] [--rows N]                 the main job (see lsm_lab.lab.demo)
    lsm-lab create PATH --name N --key K [...]        a new table
    lsm-lab write PATH FILE --op upsert|insert|delete|bulk_insert
    lsm-lab read PATH [--as-of T | --as-of-completion C] [--columns a,b] [--filter F] [--key K ...] [--out F]
    lsm-lab read PATH --cdc --start T [--end T]       the change stream (op, before, after)
    lsm-lab show timeline|fsview|levels|footers|schema PATH [--json]
    lsm-lab merge OUT IN1 IN2 ... --key K             merge sorted Parquet runs
    lsm-lab bench merge ...                           benchmarks

A user mistake (any `LsmLabError`, and any OSError such as a missing output
folder) ends with one line `error: <file>: <problem>` and exit code 2, never a
traceback; set LSM_LAB_DEBUG=1 to see the traceback anyway.  A closed pipe
(`lsm-lab show levels T | head`) ends quietly.

Taught in: notebooks/01_build_a_table.ipynb, notebooks/07_compaction.ipynb, notebooks/11_clustering.ipynb
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import lsm_lab
from lsm_lab.cli import bench as bench_command
from lsm_lab.cli import interop as interop_command
from lsm_lab.cli import lookup as lookup_command
from lsm_lab.cli import merge as merge_command
from lsm_lab.cli import metadata as metadata_command
from lsm_lab.cli import schema as schema_command
from lsm_lab.cli import services as services_command
from lsm_lab.cli import spark as spark_command
from lsm_lab.cli.console import (
    ENGINES,
    TABLE_HELP,
    LazySubParsers,
    add_as_of,
    as_of_arg,
    open_input_stream,
    parse_options,
    print_frame,
    print_rows,
    write_output_file,
    write_output_stream,
)
from lsm_lab.errors import InputError, LsmLabError

if TYPE_CHECKING:  # start-up: the parser is built from light modules; each command imports what it uses
    import pyarrow as pa

# the command modules beside this one, in the order their commands appear in `lsm-lab --help`
FEATURES: tuple[Any, ...] = (merge_command, services_command, interop_command, lookup_command, spark_command,
                             bench_command, metadata_command, schema_command)

# --------------------------------------------------------------------------- commands
def cmd_demo(args: argparse.Namespace) -> int:
    from lsm_lab.lab.demo import demo_folder, run_demo  # start-up: on first use

    if args.storage == "s3" and args.figures:
        raise InputError("--figures draws a local table; the S3 demo's bucket is gone when the demo ends")
    if args.storage == "s3":  # the table lives in the local S3 server's memory: no folder to keep or remove
        if args.dir or args.keep:
            raise InputError("--dir and --keep keep a local table; the S3 demo's bucket is gone when the demo ends")
        run_demo(None, rows=args.rows, rounds=args.rounds, engine=args.engine, storage="s3")
        return 0
    with demo_folder(args.dir, keep=args.keep) as folder:
        table = run_demo(folder, rows=args.rows, rounds=args.rounds, engine=args.engine,
                         storage=args.storage)
        if args.figures:
            from lsm_lab.viz import write_figures  # matplotlib: imported only with --figures

            write_figures(table, args.figures)
    return 0


def cmd_create(args: argparse.Namespace) -> int:
    from lsm_lab.api import create_table  # start-up: on first use

    options: dict[str, Any] = dict(parse_options(args.option))  # extra hoodie properties (strings)
    table = create_table(args.path, name=args.name, record_key=args.key, partition_by=args.partition_by,
                         ordering_field=args.ordering, table_type=args.type, layout=args.layout,
                         hive_style=not args.no_hive_style, num_buckets=args.buckets, properties=options,
                         cdc=args.cdc is not None, cdc_mode=args.cdc or "DATA_BEFORE_AFTER")
    print(f"created {table!r}")
    return 0


def cmd_write(args: argparse.Namespace) -> int:
    from lsm_lab.api import open_table  # start-up: on first use
    from lsm_lab.services.commit import describe_write  # start-up: on first use

    if args.partition and args.op != "insert_overwrite":
        raise InputError(f"--partition (a static partition overwrite) takes --operation insert_overwrite, "
                         f"not {args.op}")
    table = open_table(args.path)
    data = open_input_stream(args.file)  # written in chunks of --buffer-rows rows, as one commit
    if args.partition:
        instant = table.insert_overwrite(data, buffer_rows=args.buffer_rows, partitions=args.partition)
    else:
        instant = getattr(table, args.op)(data, buffer_rows=args.buffer_rows)
    print(f"{describe_write(table.instant_metadata(instant))} → {instant}")
    return 0


#: rows printed at a time by `lsm-lab read --limit 0` (each chunk formatted on its own, as it arrives)
PRINT_CHUNK_ROWS = 500


def _read_streaming(args: argparse.Namespace, table: lsm_lab.Table, columns: list[str] | None) -> int:
    """A snapshot read (`--filter`, `--as-of`) as a stream: `--out` writes batch by batch, `--limit N` stops
    reading after N rows, `--limit 0` prints chunk after chunk."""
    import pyarrow as pa

    from lsm_lab.table import stream  # start-up: on first use
    from lsm_lab.table.filtertext import parse_filter  # start-up: on first use

    flt = parse_filter(args.filter) if args.filter is not None else None
    batch = PRINT_CHUNK_ROWS if args.limit == 0 or args.limit > PRINT_CHUNK_ROWS else max(1, args.limit)
    scan = table.scan(as_of=as_of_arg(args), columns=columns, filter=flt, merge=args.merge,
                      batch_size=batch if not args.out else stream.BATCH_ROWS, indexes=not args.no_indexes)
    used = table.last_read_stats
    if used is not None and used.indexes_used:  # the metadata table's indexes (table/mdt_use.py)
        print(f"indexes: {', '.join(used.indexes_used)}: {used.files_skipped_column_stats} of "
              f"{used.files_judged_column_stats} base-only slices skipped by column stats, "
              f"{used.slices_skipped_index} slices by the record index", file=sys.stderr)
    reader = scan.to_reader()
    if args.out:
        rows = write_output_stream(reader, args.out)
        print(f"{rows} rows written to {args.out}")
        return 0
    if args.json or args.limit:  # the first --limit rows (JSON: one document), the rest never read
        taken: list[pa.RecordBatch] = []
        rows = 0
        for b in reader:
            taken.append(b if not args.limit else b.slice(0, args.limit - rows))
            rows += taken[-1].num_rows
            if args.limit and rows >= args.limit:
                break
        reader.close()
        shown = pa.Table.from_batches(taken, scan.schema)
        print_frame(shown.to_pandas(integer_object_nulls=True), args.json)
        more = " (--limit; 0 prints every row)" if args.limit and rows >= args.limit else ""
        print(f"({rows} rows{more})", file=sys.stderr)
        return 0
    rows = 0
    for b in reader:  # --limit 0: chunk after chunk, the header once
        text = b.to_pandas(integer_object_nulls=True).to_string(index=False, header=rows == 0)
        print(text, flush=True)
        rows += b.num_rows
    if not rows:
        print("(empty)")
    print(f"({rows} rows)", file=sys.stderr)
    return 0


def cmd_read(args: argparse.Namespace) -> int:
    from lsm_lab.api import open_table  # start-up: on first use
    from lsm_lab.table.lookup import LookupStats  # start-up: on first use

    if args.limit < 0:
        raise InputError(f"--limit must be 0 (every row) or more, not {args.limit}")
    table = open_table(args.path, strict=args.strict, use_metadata=False if args.no_metadata else None)
    columns = [c.strip() for c in args.columns.split(",")] if args.columns else None
    lookup_stats = None
    if not args.cdc and (args.start is not None or args.end is not None):
        raise InputError("--start and --end bound a change stream: add --cdc")
    if args.filter is not None and (args.cdc or args.key):
        raise InputError("--filter applies to snapshot, time-travel and read-optimized reads; it cannot be combined "
                         "with --cdc or --key")
    if not (args.cdc or args.key or args.read_optimized):
        return _read_streaming(args, table, columns)
    if args.cdc:
        if args.key or args.read_optimized or as_of_arg(args) is not None:
            raise InputError("--cdc reads the changes between --start and --end; it cannot be combined with "
                             "--key, --read-optimized, --as-of or --as-of-completion")
        if args.start is None:
            raise InputError("--cdc needs --start (a completion time yyyyMMddHHmmssSSS, or 0 for the beginning)")
        result = table.read_cdc(args.start, args.end, columns=columns)  # "0", "000", 14/17 zeros: the beginning
        if not args.json and not (args.out and not args.out.endswith(".csv")):
            result = result.flatten()  # before.v, after.v: one column per field for the printed table and CSV
    elif args.key:
        if args.read_optimized:
            raise InputError("--key looks keys up in the snapshot; it cannot be combined with --read-optimized")

        lookup_stats = LookupStats()
        result = table.lookup(args.key, as_of=as_of_arg(args), columns=columns, stats=lookup_stats,
                              indexes=not args.no_indexes)
    else:
        from lsm_lab.table.filtertext import parse_filter  # start-up: on first use

        result = table.read_optimized(columns=columns, as_of=as_of_arg(args), indexes=not args.no_indexes,
                                      filter=parse_filter(args.filter) if args.filter is not None else None)
    if lookup_stats is not None:
        print(f"lookup: {lookup_stats.summary()}", file=sys.stderr)
        print(f"lookup: {lookup_stats.index_summary()}", file=sys.stderr)
    if args.out:
        write_output_file(result, args.out)
        print(f"{result.num_rows} rows written to {args.out}")
    else:
        shown = result.slice(0, args.limit) if args.limit else result
        df = shown.to_pandas(integer_object_nulls=True)  # an int column with nulls prints as ints, not floats
        print_frame(df, args.json)
        print(f"({result.num_rows} rows)", file=sys.stderr)
    return 0


# `show` subjects contributed by feature modules: name -> handler(args) -> exit code
SHOW_HANDLERS: dict[str, Callable[[argparse.Namespace], int]] = {}


def cmd_show(args: argparse.Namespace) -> int:
    known = ["timeline", "fsview", "levels", "footers", "uncommitted", *SHOW_HANDLERS]
    if args.what not in known:
        raise InputError(f"cannot show {args.what!r}; choose one of {', '.join(known)}")
    if args.what in SHOW_HANDLERS:
        return SHOW_HANDLERS[args.what](args)

    if args.what == "footers":
        from lsm_lab.table.inspect import footers  # start-up: on first use

        print_frame(footers(args.path), args.json)
        return 0
    from lsm_lab.api import open_table  # start-up: on first use

    table = open_table(args.path)
    if args.what == "timeline":  # rows, not a frame: `show timeline` loads no pandas
        print_rows(table.timeline_rows(archived=args.archived), args.json)
    elif args.what == "fsview":
        print_frame(table.file_slices(as_of=as_of_arg(args)), args.json)
    elif args.what == "levels":
        if args.json:
            print_frame(table.file_slices(as_of=as_of_arg(args)), True)
        else:
            print(table.dump_levels(as_of=as_of_arg(args)))
    elif args.what == "uncommitted":
        stray = table.uncommitted_files()
        print_rows([{"partition": f.partition, "file": f.path.name, "instant": f.instant, "bytes": f.size}
                    for f in stray], args.json)
        print(f"({len(stray)} file(s) no completed instant committed: not part of the table, every read and "
              "write ignores them)", file=sys.stderr)
    return 0


# --------------------------------------------------------------------------- parser
def build_parser(*, lazy: bool = False) -> argparse.ArgumentParser:
    """The whole `lsm-lab` parser.  `lazy`: each benchmark's options are added only when it is chosen (what
    `main` does, so that `lsm-lab --help` imports no benchmark); else every parser is complete (tests walk it)."""
    parser = argparse.ArgumentParser(
        prog="lsm-lab",
        description="lsm_lab: the LSM tree layout of Apache Hudi RFC-103 — build, inspect and benchmark tables.",
    )
    parser.add_argument("--version", action="version", version=f"lsm-lab {lsm_lab.__version__}",
                        help="print the version of lsm_lab and exit")
    parser.add_argument("--storage-option", action="append", metavar="KEY=VALUE",
                        help="object-store setting for s3://, gs://, az:// tables (repeatable, may follow any "
                             "command), e.g. aws_endpoint_url=http://127.0.0.1:9000; the standard AWS_* "
                             "variables are read too")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    p = sub.add_parser("demo", help="run the main job: build a trips table, change it, read it, check it",
                       description="Generate trips, create an lsm_tree MOR table, insert, upsert, delete, print the "
                                   "timeline and levels, and check snapshot and time-travel reads against a model.")
    p.add_argument("--dir", help="folder for the table, kept (default: a temporary folder, removed at the end)")
    p.add_argument("--keep", action="store_true", help="keep the temporary folder and print where it is")
    p.add_argument("--rows", type=int, default=100_000, help="trips to insert (default 100000)")
    p.add_argument("--rounds", type=int, default=3, help="upsert rounds (default 3)")
    p.add_argument("--engine", choices=["local", "spark"], default="local", help="run writes locally or on Spark")
    p.add_argument("--storage", choices=["local", "s3"], default="local",
                   help="s3: start a local S3 server (moto), run the demo in a bucket, print request counts, stop it")
    p.add_argument("--figures", metavar="DIR", help="also write the main pictures into DIR")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("create", help="create a new table", description="Create a new lsm_lab table.")
    p.add_argument("path", help=TABLE_HELP)
    p.add_argument("--name", required=True, help="table name")
    p.add_argument("--key", required=True, help="record key field(s), comma separated")
    p.add_argument("--partition-by", help="partition field(s), comma separated")
    p.add_argument("--ordering", help="ordering field (event-time ordering); omit for commit-time ordering")
    p.add_argument("--type", default="MERGE_ON_READ", help="MERGE_ON_READ (default) or COPY_ON_WRITE")
    p.add_argument("--layout", default="lsm_tree", choices=["lsm_tree", "default"], help="storage layout")
    p.add_argument("--buckets", type=int, default=4, help="number of buckets per partition (lsm_tree)")
    p.add_argument("--no-hive-style", action="store_true", help="plain partition folders (chennai, not city=chennai)")
    p.add_argument("--cdc", nargs="?", const="DATA_BEFORE_AFTER", metavar="MODE",
                   help="write CDC logs (read them with `lsm-lab read --cdc`); MODE: DATA_BEFORE_AFTER (default), "
                        "DATA_BEFORE or OP_KEY_ONLY")
    p.add_argument("--option", action="append", metavar="KEY=VALUE", help="extra hoodie property (repeatable)")
    p.set_defaults(func=cmd_create)

    p = sub.add_parser("write", help="write a Parquet/CSV/JSON-lines file into a table",
                       description="Write the records of FILE (.parquet, .csv, .jsonl) into the table at PATH.")
    p.add_argument("path", help=TABLE_HELP)
    p.add_argument("file", help="input file (.parquet, .csv, .jsonl)")
    p.add_argument("--op", "--operation", dest="op", default="upsert",
                   choices=["upsert", "insert", "delete", "bulk_insert", "insert_overwrite", "insert_overwrite_table"],
                   help="write operation (default upsert); for delete the file holds the keys; insert_overwrite "
                        "replaces the partitions the rows go to, insert_overwrite_table the whole table (a "
                        "replacecommit)")
    p.add_argument("--buffer-rows", type=int, metavar="N",
                   help="rows read and routed at a time: the file is streamed and written as one commit in bounded "
                        "memory (default: the table property lsm_lab.write.buffer.rows, else 250,000)")
    p.add_argument("--partition", action="append", metavar="PATH",
                   help="with insert_overwrite: replace exactly this partition (e.g. city=pune; repeatable), even "
                        "with no row for it; a row outside the partitions named is an error")
    p.set_defaults(func=cmd_write)

    p = sub.add_parser("read", help="read a snapshot (or time travel)", description="Read the table at PATH.")
    p.add_argument("path", help=TABLE_HELP)
    add_as_of(p)
    p.add_argument("--columns", help="comma separated columns")
    p.add_argument("--filter", metavar="F",
                   help="rows to keep, e.g. \"fare > 50 and city = 'chennai'\": column op value joined by 'and'; "
                        "ops = != < <= > >= in (...) not in (...); values 'text', numbers, true, false. Prunes "
                        "partitions, keys and (MOR-safe) file slices by statistics")
    p.add_argument("--merge", choices=ENGINES, help="force a merge engine")
    p.add_argument("--no-indexes", action="store_true",
                   help="do not use the metadata table's column stats, record and secondary indexes to skip "
                        "file slices (the same rows)")
    p.add_argument("--read-optimized", action="store_true", help="base files only")
    p.add_argument("--strict", action="store_true",
                   help="fail on a corrupt block in a v1 (#HUDI#) log instead of skipping it as Hudi's reader does")
    p.add_argument("--no-metadata", action="store_true",
                   help="list the data folders even when the table's metadata table lists its files "
                        "(also: LSM_LAB_METADATA_LISTING=0)")
    p.add_argument("--cdc", action="store_true",
                   help="the change stream of the instants completed in (--start, --end]: op, ts_ms, commit_time, "
                        "record_key, before, after, inferred")
    p.add_argument("--start", help="with --cdc: changes completed after this time (0, 000 or Hudi's 00000000000000000: "
                        "from the beginning)")
    p.add_argument("--end", help="with --cdc: changes completed up to this time (default: the latest)")
    p.add_argument("--key", action="append", metavar="K",
                   help="look up this record key (repeatable; composite keys as f1:v1,f2:v2): reads only the "
                        "files and row groups that can hold it")
    p.add_argument("--out", help="write rows to a .parquet/.csv/.jsonl file instead of printing (batch by batch)")
    p.add_argument("--limit", type=int, default=20, help="rows to print (default 20, 0 = all)")
    p.add_argument("--json", action="store_true", help="print JSON records")
    p.set_defaults(func=cmd_read)

    p = sub.add_parser("show", help="inspect a table: timeline, fsview, levels, footers, uncommitted",
                       description="Inspect the table at PATH.")
    p.add_argument("what", help="timeline, fsview, levels, footers, uncommitted (data files no completed "
                                "instant committed: a copied folder, a stray file; reads ignore them), formats "
                                "(v1/v2 logs per slice), hudi-options (what a Spark/Flink Hudi writer must be "
                                "passed to write into this table), metadata (Hudi's metadata table: its partitions, "
                                "or with --partition NAME the records of one), schema (the table schema, as of --as-of, or with "
                                "--history every instant where it changed) (and plan)")
    p.add_argument("path", help=TABLE_HELP + " (for footers: also one Parquet file)")
    add_as_of(p, " (fsview, levels, schema)")
    p.add_argument("--json", action="store_true", help="JSON output")
    p.add_argument("--archived", action="store_true", help="timeline: include archived (LSM history) instants")
    p.add_argument("--partition", metavar="NAME",
                   help="metadata: one partition of Hudi's metadata table (files, column_stats, partition_stats, "
                        "record_index, secondary_index_<name>, bloom_filters)")
    p.set_defaults(func=cmd_show)

    for register in _plugins(lazy):
        register(sub)
    return parser


def _plugins(lazy: bool) -> list[Callable[[argparse._SubParsersAction[argparse.ArgumentParser]], None]]:
    """What the feature modules contribute, all the same way: `register(subparsers)` (their commands),
    `register_bench(bench_subparsers)` (their benchmarks under `lsm-lab bench`), `SHOW` (their subjects of
    `lsm-lab show`)."""
    out: list[Callable[[argparse._SubParsersAction[argparse.ArgumentParser]], None]] = [
        mod.register for mod in FEATURES if hasattr(mod, "register")]
    bench_registrars = [mod.register_bench for mod in FEATURES if hasattr(mod, "register_bench")]
    for mod in FEATURES:
        SHOW_HANDLERS.update(getattr(mod, "SHOW", {}))

    def register_bench(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
        p = sub.add_parser("bench", help="benchmarks (ratios against baselines measured in the same run)",
                           description="Run a benchmark; each reports ratios against a baseline of the same run.")
        # a benchmark's options are added when it is chosen (they live in its heavy lsm_lab/bench module)
        bsub = p.add_subparsers(dest="bench", metavar="BENCHMARK", action=LazySubParsers)
        if isinstance(bsub, LazySubParsers):
            bsub.lazy = lazy
        bsub.required = True
        for reg in bench_registrars:
            reg(bsub)

    out.append(register_bench)
    return out


def _storage_options(argv: list[str]) -> tuple[list[str], dict[str, str]]:
    """Take every `--storage-option KEY=VALUE` out of `argv` (it may follow any command)."""
    rest: list[str] = []
    items: list[str] = []
    it = iter(argv)
    for arg in it:
        if arg == "--storage-option":
            items.append(next(it, ""))
        elif arg.startswith("--storage-option="):
            items.append(arg.split("=", 1)[1])
        else:
            rest.append(arg)
    return rest, parse_options(items, flag="--storage-option")


class _WarningsToStderr(logging.Handler):
    """`warning: <message>` on stderr for each warning of the library's loggers while a command runs."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)

    def emit(self, record: logging.LogRecord) -> None:
        print(f"warning: {record.getMessage()}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(argv)
    finally:
        for handler in [h for h in logging.getLogger("lsm_lab").handlers if isinstance(h, _WarningsToStderr)]:
            logging.getLogger("lsm_lab").removeHandler(handler)


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser(lazy=True)
    try:
        rest, storage = _storage_options(list(sys.argv[1:] if argv is None else argv))
    except LsmLabError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    args = parser.parse_args(rest)
    shown = _WarningsToStderr()  # the library's loggers have a NullHandler: the command shows their warnings
    logging.getLogger("lsm_lab").addHandler(shown)
    from lsm_lab.storage import default_options  # pyarrow.fs: after the parser, which --help leaves in

    try:
        with default_options(storage):
            return int(args.func(args) or 0)
    except LsmLabError as exc:
        if os.environ.get("LSM_LAB_DEBUG"):
            raise
        one_line = " ".join(str(exc).split("\n"))  # a quoted CSV row or an Arrow message may hold newlines
        print(f"error: {one_line}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `lsm-lab show levels T | head`: the reader left; end quietly
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())  # so that flushing stdout at exit raises nothing
        except OSError:
            pass
        return 141 if os.name == "posix" else 1
    except OSError as exc:  # a folder that does not exist, a full disk, no permission: one line, no traceback
        if os.environ.get("LSM_LAB_DEBUG"):
            raise
        where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
        print(f"error: {where}{exc.strerror or exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
