"""The ``lsm-lab spark ...`` commands and ``lsm-lab bench compaction``.

    lsm-lab spark write PATH FILE [--op upsert] [--master URL]     a file's rows through the Spark writer
    lsm-lab spark compact PATH [--strategy hybrid] [--merge sorted] [--master URL]
    lsm-lab spark clustering PATH [--merge sorted] [--option K=V] [--master URL]   clustering, one task per group
    lsm-lab spark read PATH [--as-of T | --as-of-completion C] [--columns a,b] [--read-optimized] [--limit 20] [--master URL]
    lsm-lab spark cluster [--workers 2] [--cores 1] [--memory 1g]  a standalone cluster on 127.0.0.1, until Ctrl-C
    lsm-lab bench compaction --engine spark [--rows N] [--k 1 4 16] [--json OUT] [--plot PNG]

`--master` (or the `SPARK_MASTER` environment variable) points the command at
a cluster, e.g. the URL `lsm-lab spark cluster` prints; the default is local
Spark. `lsm_lab/cli/app.py` loads this module and calls `register` and
`register_bench`.

Taught in: notebooks/10_sorted_vs_hash_on_spark.ipynb
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from lsm_lab.cli.console import TABLE_HELP, add_as_of, add_lazy_parser, as_of_arg, parse_options, read_input_file

# start-up: pyspark, the table layer and the compaction bench are imported by the command that runs


def _spark(args: argparse.Namespace) -> Any:
    from lsm_lab.spark.session import spark_session  # pyspark (the spark extra): only when a command runs

    conf = {"spark.master": args.master} if getattr(args, "master", None) else {}
    return spark_session(**conf)


def _cmd_write(args: argparse.Namespace) -> int:
    data = read_input_file(args.file)
    from lsm_lab.spark.write import write_table  # pyspark: the spark extra

    done = write_table(data, args.path, op=args.op, spark=_spark(args))
    print(f"{args.op}: {data.num_rows:,} rows → {done}")
    return 0


def _cmd_compact(args: argparse.Namespace) -> int:
    from lsm_lab.spark.compact import run_compaction  # pyspark: the spark extra

    run = run_compaction(args.path, spark=_spark(args), strategy=args.strategy, merge=args.merge)
    if run.instant is None:
        print("nothing to compact")
        return 0
    peak = run.peak_rss_mib
    print(f"{run.instant} in {run.seconds:.1f} s, {len(run.reports)} task(s)"
          + (f", peak Python worker RSS {peak:.0f} MiB" if peak is not None else ""))
    return 0


def _cmd_clustering(args: argparse.Namespace) -> int:
    from lsm_lab.api import open_table  # start-up: on first use
    from lsm_lab.services import clustering  # start-up: on first use
    from lsm_lab.spark.clustering import cluster_table  # pyspark: the spark extra

    done = cluster_table(args.path, spark=_spark(args), options=parse_options(args.option), merge=args.merge)
    if done is None:
        print("nothing to cluster")
    else:
        print(clustering.format_result(done, open_table(args.path).instant_metadata(done)))
    return 0


def _cmd_read(args: argparse.Namespace) -> int:
    columns = [c.strip() for c in args.columns.split(",")] if args.columns else None
    from lsm_lab.spark.read import read_table  # pyspark: the spark extra

    frame = read_table(args.path, spark=_spark(args), as_of=as_of_arg(args), columns=columns,
                       read_optimized=args.read_optimized)
    if args.out:
        frame.write.mode("overwrite").parquet(args.out)
        print(f"rows written to {args.out}")
        return 0
    print(f"{frame.count():,} rows")
    frame.show(args.limit, truncate=40)
    return 0


def _cmd_cluster(args: argparse.Namespace) -> int:
    from lsm_lab.spark.cluster import StandaloneCluster  # pyspark: the spark extra

    with StandaloneCluster(workers=args.workers, cores=args.cores, memory=args.memory) as cluster:
        print(f"master {cluster.master_url}   (status: {cluster.ui_url})")
        print(f"use it:  lsm-lab spark read PATH --master {cluster.master_url}   or   "
              f"SPARK_MASTER={cluster.master_url} lsm-lab demo --engine spark")
        print("Ctrl-C stops the master and the workers", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            print("stopping", file=sys.stderr)
    return 0


def register(subparsers: Any) -> None:
    """Add ``spark {write,compact,clustering,read,cluster}``."""
    p = subparsers.add_parser("spark", help="run writes, compaction and reads on Spark (local or a cluster)",
                              description="Run lsm_lab's writes, compaction, clustering and reads as Spark jobs: "
                                          "plans on the driver, one task per file group, one commit. --master "
                                          "local[N] (default) or spark://host:port (`lsm-lab spark cluster` starts "
                                          "one on this machine).")
    sub = p.add_subparsers(dest="spark_command", metavar="ACTION")
    sub.required = True

    def master(q: argparse.ArgumentParser) -> None:
        q.add_argument("--master", help="Spark master URL, e.g. spark://127.0.0.1:7077 (default: local or "
                                        "$SPARK_MASTER)")

    q = sub.add_parser("write", help="write a Parquet/CSV/JSON-lines file through the Spark writer")
    q.add_argument("path", help=TABLE_HELP + ", reachable from every executor")
    q.add_argument("file", help="input file (.parquet, .csv, .jsonl)")
    q.add_argument("--op", default="upsert", choices=["upsert", "insert", "delete", "bulk_insert"],
                   help="write operation (default upsert); for delete the file holds the keys")
    master(q)
    q.set_defaults(func=_cmd_write)

    q = sub.add_parser("compact", help="plan on the driver, one Spark task per file group, commit")
    q.add_argument("path", help=TABLE_HELP)
    q.add_argument("--strategy", default="hybrid", choices=["hybrid", "full", "log"],
                   help="hybrid: FULL or LOG per file group (default); full: L0+L1 → L1; log: L0 → L0")
    q.add_argument("--merge", choices=["sorted", "hash", "loser_tree", "heapq"], help="force a merge engine")
    master(q)
    q.set_defaults(func=_cmd_compact)

    q = sub.add_parser("clustering", help="plan clustering on the driver, one Spark task per input group, commit",
                       description="Cluster the table at PATH on Spark (as `lsm-lab cluster`, with the groups "
                                   "rewritten by Spark tasks): pending plans first, then a new one.")
    q.add_argument("path", help=TABLE_HELP)
    q.add_argument("--merge", choices=["sorted", "hash", "loser_tree", "heapq"], help="force a merge engine")
    q.add_argument("--option", action="append", default=[], metavar="K=V",
                   help="plan limit override, e.g. hoodie.clustering.plan.strategy.small.file.limit=1048576")
    master(q)
    q.set_defaults(func=_cmd_clustering)

    q = sub.add_parser("read", help="snapshot (per-slice merge in tasks) or read-optimized read into Spark")
    q.add_argument("path", help=TABLE_HELP)
    add_as_of(q)
    q.add_argument("--columns", help="comma separated columns")
    q.add_argument("--read-optimized", action="store_true", help="base files only, with Spark's Parquet reader")
    q.add_argument("--limit", type=int, default=20, help="rows to show (default 20)")
    q.add_argument("--out", help="write the rows as Parquet into this folder instead of showing them")
    master(q)
    q.set_defaults(func=_cmd_read)

    q = sub.add_parser("cluster", help="start a standalone master and workers on 127.0.0.1 until Ctrl-C")
    q.add_argument("--workers", type=int, default=2, help="worker processes to start (default 2)")
    q.add_argument("--cores", type=int, default=1, help="cores per worker")
    q.add_argument("--memory", default="1g", help="memory per worker")
    q.set_defaults(func=_cmd_cluster)


def _run_bench(args: argparse.Namespace) -> int:
    from lsm_lab.bench.compaction import run_from_args  # start-up: on first use

    return run_from_args(args)


def register_bench(bench_subparsers: Any) -> None:
    """Add ``compaction`` under ``lsm-lab bench``."""
    summary = "full compaction on Spark: sorted merge vs hash merge vs a window-function job"

    def fill(p: argparse.ArgumentParser) -> None:  # when `bench compaction` is chosen: its options live in the bench
        from lsm_lab.bench import compaction  # start-up: on first use

        p.description = compaction.__doc__
        compaction.add_arguments(p)
        p.set_defaults(func=_run_bench)

    add_lazy_parser(bench_subparsers, "compaction", fill, help=summary,
                    formatter_class=argparse.RawDescriptionHelpFormatter)


__all__ = ["register", "register_bench"]
