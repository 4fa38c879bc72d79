"""Spark's Python worker daemon, with pyarrow and lsm_lab imported before it forks any worker.

    executor JVM ── python -m lsm_lab.spark.daemon ── fork ──► worker (task 1)
                    (imports pyarrow, lsm_lab.spark.*  ── fork ──► worker (task 2)
                     once, then runs pyspark.daemon)    ...

Spark starts one Python daemon per executor and forks a worker from it for
each task (or keeps workers alive with `spark.python.worker.reuse=true`).
A forked worker that must import pyarrow, pandas and lsm_lab first spends
about a second of CPU on it; on a loaded machine that is several seconds of
wall time per task. With this module as the daemon
(`spark.python.daemon.module=lsm_lab.spark.daemon`), the imports happen once in
the daemon and every forked worker starts with them in place (shared
copy-on-write pages). The compaction benchmark uses it, so that its first
tasks do not pay for imports (it reuses workers: a fresh worker per task cost
about a second of start-up even with this daemon, see `lsm_lab.spark.jobs`).

What a worker holds before its first task is about the floor of any Python
worker that uses pyarrow (~120 MiB here: the interpreter, NumPy, pyarrow and
its Parquet module, pyspark, and pandas, which pyarrow imports at its first
conversion of Python values whether lsm_lab wants it or not). polars, which
only the decoding of v1 (#HUDI#) log blocks uses, is imported on the first
such block, not here (~25 MiB less per worker).

Simplified compared with a production set-up: nothing else is changed from
pyspark's own daemon (`pyspark.daemon.manager`).

Taught in: notebooks/10_sorted_vs_hash_on_spark.ipynb
"""

import pyarrow
import pyarrow.parquet  # noqa: F401
from pyspark.daemon import manager

import lsm_lab.spark.compact
import lsm_lab.spark.read
import lsm_lab.spark.write  # noqa: F401

if __name__ == "__main__":
    manager()
