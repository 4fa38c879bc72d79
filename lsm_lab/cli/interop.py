"""`lsm-lab interop ...`: compare with hudi-rs, upgrade to native logs, show log formats.

    lsm-lab interop compare PATH [--as-of T] [--read-optimized]   rows of lsm_lab vs hudi-rs (exit 1 on a difference)
    lsm-lab interop real-tables DEST [--shared DIR]               unpack ../shared/hudi-tables, compare every table
    lsm-lab interop upgrade PATH [--layout lsm_tree]               version 8 (v1 logs) -> version 9 (v2 logs)
    lsm-lab interop formats PATH [--as-of T | --as-of-completion C]  v1/v2 log files per file slice
    lsm-lab upgrade PATH                                           version 8/9 -> Hudi's version 10 (rewrite)
    lsm-lab upgrade PATH --instants-only                           JSON instant files and history rows -> upstream's Avro
    lsm-lab show formats PATH                                      the same, as a `show` subject
    lsm-lab show hudi-options PATH [--json]                        what a Spark/Flink Hudi writer must be passed
    lsm-lab bench interop [--rows N]                               v1 vs v2 bytes, lsm_lab vs hudi-rs read time

`lsm_lab/cli/app.py` calls `register(subparsers)`; `SHOW` adds `formats` and
`hudi-options` to `lsm-lab show`, `register_bench` adds `bench interop` and `bench peers`.

Taught in: notebooks/09_real_hudi_tables.ipynb
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from lsm_lab.cli.console import TABLE_HELP, add_as_of, as_of_arg
from lsm_lab.errors import InputError, UnsupportedFeatureError

# start-up: the library (lsm_lab.api, lsm_lab.interop, the benches) is imported by the command that runs


def _compare(path: str, as_of: str | None, read_optimized: bool) -> list[str]:
    from lsm_lab.api import open_table  # start-up: on first use
    from lsm_lab.interop.hudi_tables import compare_rows, hudi_rs_read  # start-up: on first use

    table = open_table(path)
    mine = table.read_optimized(as_of=as_of) if read_optimized else table.read(as_of=as_of)
    theirs = hudi_rs_read(path, as_of=as_of, read_optimized=read_optimized)
    problems = compare_rows(mine, theirs, table.config.record_key)
    what = "read-optimized" if read_optimized else ("time travel to " + as_of if as_of else "snapshot")
    print(f"{path}: {what}: lsm_lab {mine.num_rows} rows, hudi-rs {theirs.num_rows} rows, "
          f"{'equal' if not problems else f'{len(problems)} difference(s)'}")
    for p in problems:
        print(f"  {p}")
    return problems


def cmd_compare(args: argparse.Namespace) -> int:
    return 1 if _compare(args.path, args.as_of, args.read_optimized) else 0


def cmd_real_tables(args: argparse.Namespace) -> int:
    from lsm_lab.api import open_table  # start-up: on first use
    from lsm_lab.interop.hudi_tables import find_shared, unpack_tables  # start-up: on first use

    shared = Path(args.shared) if args.shared else find_shared()
    if shared is None or not (shared / "hudi-tables").is_dir():
        raise InputError("no shared/hudi-tables folder (pass --shared or set LSM_LAB_SHARED)")
    tables = unpack_tables(shared / "hudi-tables", args.dest)
    failures = 0
    for stem, path in tables.items():
        try:
            failures += bool(_compare(str(path), None, False))
            for inst in open_table(path).completed_writes():
                failures += bool(_compare(str(path), inst.completion_time, False))
        except UnsupportedFeatureError as exc:
            print(f"{stem}: not supported: {exc}")
    print(f"{len(tables)} tables, {failures} read(s) with differences")
    return 1 if failures else 0


def cmd_upgrade(args: argparse.Namespace) -> int:
    from lsm_lab.interop.upgrade import dump_formats, upgrade  # start-up: on first use

    table = upgrade(args.path, layout=args.layout)
    print(f"upgraded: {table!r}")
    print(dump_formats(table))
    return 0


def cmd_upgrade_v10(args: argparse.Namespace) -> int:
    from lsm_lab.api import open_table  # start-up: on first use
    from lsm_lab.interop.upgrade import avro_timeline, upgrade_to_v10  # start-up: on first use

    if args.instants_only:
        n = avro_timeline(args.path)
        print(f"{n} instant file(s) and history row(s) rewritten as Avro; lsm_lab.timeline.instant.format=avro")
        return 0
    before = open_table(args.path).config.version
    table = upgrade_to_v10(args.path)
    print(f"table version {before} -> {table.config.version}: {table!r}")
    return 0


def cmd_formats(args: argparse.Namespace) -> int:
    from lsm_lab.interop.upgrade import dump_formats  # start-up: on first use

    print(dump_formats(args.path, as_of_arg(args)))
    return 0


def show_formats(args: argparse.Namespace) -> int:
    return cmd_formats(args)


def show_hudi_options(args: argparse.Namespace) -> int:
    """The writer options a Spark/Flink Hudi writer needs for this table (`interop.writer_options`)."""
    from lsm_lab.api import open_table  # start-up: on first use
    from lsm_lab.interop.writer_options import hudi_writer_options  # start-up: on first use

    options = hudi_writer_options(open_table(args.path).config)
    if args.json:
        print(json.dumps(options, indent=2))
    else:
        for key, value in options.items():
            print(f"{key}={value}")
    return 0


SHOW = {"formats": show_formats, "hudi-options": show_hudi_options}


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("interop", help="Apache Hudi interoperability: compare with hudi-rs, upgrade, log formats",
                       description="Read real Hudi tables like hudi-rs does, upgrade compatibility tables to "
                                   "native (v2) logs, and show which log formats each file slice holds.")
    isub = p.add_subparsers(dest="interop", metavar="ACTION")
    isub.required = True

    c = isub.add_parser("compare", help="compare lsm_lab's rows with hudi-rs's (exit 1 on a difference)",
                        description="Read the table at PATH with lsm_lab and with hudi-rs and compare by record key.")
    c.add_argument("path", help="local table folder (hudi-rs reads it here)")
    c.add_argument("--as-of", help="time travel to this instant time (both readers: every completed write begun at or "
                                   "before it; hudi-rs's with_as_of_timestamp)")
    c.add_argument("--read-optimized", action="store_true", help="base files only")
    c.set_defaults(func=cmd_compare)

    r = isub.add_parser("real-tables", help="unpack the shared real Hudi tables and compare every one",
                        description="Unzip shared/hudi-tables/*.zip into DEST and compare snapshot and every "
                                    "time-travel read with hudi-rs.")
    r.add_argument("dest", help="folder to unpack into")
    r.add_argument("--shared", help="the shared folder (default: $LSM_LAB_SHARED or ../shared)")
    r.set_defaults(func=cmd_real_tables)

    u = isub.add_parser("upgrade", help="switch a version 8 table to v2 logs (table version 9)",
                        description="New log files become native Parquet (v2) logs in the same file groups; "
                                    "existing files are kept.")
    u.add_argument("path", help=TABLE_HELP)
    u.add_argument("--layout", choices=["lsm_tree", "default"], help="also switch the storage layout")
    u.set_defaults(func=cmd_upgrade)

    v = sub.add_parser("upgrade", help="rewrite an lsm_lab table to Apache Hudi's table version 10, in place",
                       description="Rewrite the latest snapshot of an lsm_lab table (version 8 or 9) into upstream "
                                   "Hudi's version 10 format as one replacecommit: Java-hash buckets, native log "
                                   "names and footers from then on. Crash-safe; run it again to finish an "
                                   "interrupted upgrade. Instant files and history rows still in JSON (tables created "
                                   "before lsm_lab wrote Avro) are rewritten as upstream's Avro records.")
    v.add_argument("path", help=TABLE_HELP)
    v.add_argument("--instants-only", action="store_true",
                   help="only rewrite JSON instant files and history rows as Avro (any version >= 8; the table "
                        "version stays)")
    v.set_defaults(func=cmd_upgrade_v10)

    f = isub.add_parser("formats", help="v1 and v2 log files per file slice",
                        description="One line per file slice: base file, v1 and v2 log counts, MIXED when both.")
    f.add_argument("path", help=TABLE_HELP)
    add_as_of(f)
    f.set_defaults(func=cmd_formats)


def register_bench(bsub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    b = bsub.add_parser("interop", help="v1 Avro log blocks vs v2 Parquet logs; lsm_lab vs hudi-rs MOR read",
                        description="Bytes on disk of the same records as v1 Avro blocks and v2 Parquet logs, and "
                                    "the read time of a MOR compatibility table, lsm_lab vs hudi-rs.")
    b.add_argument("--rows", type=int, default=1_000_000, help="rows of the MOR table (default 1000000)")
    b.add_argument("--update-fraction", type=float, default=0.1, help="fraction of rows updated per round")
    b.add_argument("--rounds", type=int, default=2, help="upsert rounds after the insert (default 2)")
    b.add_argument("--repeat", type=int, default=3, help="timed reads per reader (best is reported)")
    b.add_argument("--dir", help="work folder (default: a temporary folder)")
    b.add_argument("--json", action="store_true", help="print the figures as JSON")
    b.set_defaults(func=cmd_bench)
    b = bsub.add_parser("peers", help="upsert workload: lsm_lab vs Apache Paimon (Rust reader/writer) and hudi-rs",
                        description="The upsert workload of issue 16 (bulk insert, 3 x 10%% upserts, 1%% deletes, "
                                    "3 partitions x 4 buckets) against Paimon primary-key tables with the Rust reader "
                                    "and writer, run in the peers' venv (make bench-peers), plus hudi-rs on the v8 "
                                    "interop table; prints lsm_lab/peer ratios of the same run.")
    b.add_argument("--rows", type=int, default=1_000_000, help="rows of the bulk insert (default 1000000)")
    b.add_argument("--peer-python", help="the peers' interpreter (default $LSM_LAB_PEER_PYTHON or "
                                         ".venv-peers/bin/python)")
    b.add_argument("--no-hudi", action="store_true", help="skip the hudi-rs comparison")
    b.add_argument("--paimon-python", action="store_true", help="also time pure-Python pypaimon (slow)")
    b.add_argument("--dir", help="work folder, kept; an earlier run's tables there are replaced (default: a temporary folder, removed)")
    b.add_argument("--json", action="store_true", help="print the figures as JSON")
    b.set_defaults(func=cmd_bench_peers)


def cmd_bench_peers(args: argparse.Namespace) -> int:
    from lsm_lab.bench import peers  # start-up: on first use

    report = peers.run(rows=args.rows, peer_python=Path(args.peer_python) if args.peer_python else None,
                       hudi=not args.no_hudi, work_dir=args.dir, pure_python_paimon=args.paimon_python)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(peers.format_report(report))
    sys.stdout.flush()
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from lsm_lab.bench.interop import format_report, run  # start-up: on first use

    report = run(rows=args.rows, update_fraction=args.update_fraction, rounds=args.rounds, repeat=args.repeat,
                 work_dir=args.dir)
    if args.json:
        import json

        print(json.dumps(report, indent=2))
    else:
        print(format_report(report))
    sys.stdout.flush()
    return 0


__all__ = ["SHOW", "register", "register_bench"]
