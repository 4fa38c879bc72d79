"""Compaction on Spark: the driver plans and commits, each operation is one Spark task.

    driver                                          Spark (one task per operation)
    ──────                                          ──────────────────────────────
    finish dead pending plans first
    schedule(): plan = planner.make_plan(...)
      <t>.compaction.requested   (table lock)
    <t>.compaction.inflight, heartbeat <t>
    spark.range(n, numPartitions=n) ───────────────► task i: run_full(ctx, ops[i])   L0 + L1 → L1
      (row i → operation i of the plan)                   or run_log(ctx, ops[i])    L0 → L0
                                                        write token <i>-<stage>-<attempt>,
                                                        markers, the library's merge engine
    ◄── write stats + TaskReport (seconds, peak RSS) ──
    reconcile: delete files of <t> no stat names
    <t>_<c>.commit (table lock)
    any failure: the plan goes back to requested (its files deleted); it runs again later

Nothing is merged by Spark: the task runs `services.compaction.run_full` /
`run_log`, the same functions `Table.compact` runs one after the other, so a
Spark compaction and a local one produce the same base files (only the write
token in the file names differs). The `sorted` engine streams every file of
the slice (memory O(files x batch) per task); `hash` holds the log records
in a map (Hudi's way), which is what the compaction benchmark compares.

Simplified compared with Apache Hudi's Spark compactor: one operation per
Spark partition with no packing of small operations, no compaction
"strategies" by IO budget, and the plan is executed by the driver that asks
for it (no async compaction service).

Taught in: notebooks/10_sorted_vs_hash_on_spark.ipynb
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from lsm_lab.api import open_table
from lsm_lab.filegroup.planner import Operation
from lsm_lab.services import compaction
from lsm_lab.spark.jobs import TaskClock, TaskHook, TaskReport, active_session, job_progress, reconcile, reraise
from lsm_lab.storage import TablePath
from lsm_lab.timeline.instant import Instant
from lsm_lab.timeline.metadata import WriteStat


@dataclass
class CompactionRun:
    """The outcome of `run_compaction`: the completed instant and what every task reported."""

    instant: Instant | None
    reports: list[TaskReport] = field(default_factory=list)
    seconds: float = 0.0
    job_seconds: float = 0.0  # of `seconds`, the Spark jobs (tasks and their scheduling); the rest is the driver's

    @property
    def peak_rss_mib(self) -> float | None:
        """The largest Python-worker peak RSS over the tasks (MiB)."""
        return max((r.peak_rss_mib for r in self.reports), default=None)


@dataclass(frozen=True)
class CompactTask:
    """mapInArrow function over operation numbers: run the library's per-operation function."""

    ctx: compaction.CompactionContext
    operations: tuple[Operation, ...]
    hook: TaskHook | None = None

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for i in batch.column(0).to_pylist():
                clock = TaskClock(i)
                op = self.operations[i]
                stats = compaction.run_operation(self.ctx, op, i, token=clock.identity.token)
                if self.hook is not None:
                    self.hook(clock.identity)
                report = json.dumps(clock.report(sum(s.numWrites for s in stats)).to_json())
                yield pa.RecordBatch.from_arrays(
                    [pa.array([json.dumps(s.to_json()) for s in stats] or [None], pa.string()),  # type: ignore[list-item]  # one null row when nothing was written
                     pa.array([report] * max(1, len(stats)), pa.string())], names=["stat", "report"])


SPARK_METADATA: Mapping[str, str] = {"lsm_lab.engine": "spark"}  # in the commit metadata of work done on Spark


def spark_runner(spark: Any, *, progress: bool | None = None, hook: TaskHook | None = None,
                 run: CompactionRun | None = None) -> compaction.OperationRunner:
    """The `OperationRunner` that runs a compaction's operations as Spark tasks (one per operation); the
    services run everything around it (`services.compaction.execute`). `run` collects the tasks' reports."""

    def on_spark(ctx: compaction.CompactionContext, ops: tuple[Operation, ...], inflight: Instant) -> list[WriteStat]:
        stats: list[WriteStat] = []
        if ops:
            task = CompactTask(ctx, ops, hook)
            frame = spark.range(0, len(ops), 1, len(ops)).mapInArrow(task, "stat string, report string")
            t0 = time.perf_counter()
            with job_progress(spark, f"{inflight.action} {inflight.begin_time}", enabled=progress):
                try:
                    rows = frame.collect()
                except Exception as exc:  # noqa: BLE001
                    reraise(exc, f"{inflight.action} {inflight.begin_time}")
            seen: set[str] = set()
            for r in rows:
                if r["stat"] is not None:
                    stats.append(WriteStat(**json.loads(r["stat"])))
                if run is not None and r["report"] not in seen:
                    seen.add(r["report"])
                    run.reports.append(TaskReport(**json.loads(r["report"])))
            if run is not None:
                run.job_seconds += time.perf_counter() - t0
        reconcile(ctx.base_path, inflight.begin_time, stats)  # files of failed task attempts go
        return stats

    return on_spark


def run_compaction(path: str | TablePath, spark: Any = None, strategy: str = "hybrid", merge: str | None = None, *,
                   options: Mapping[str, str] | None = None, progress: bool | None = None,
                   task_hook: TaskHook | None = None,
                   storage_options: Mapping[str, Any] | None = None) -> CompactionRun:
    """`compact`, returning the instant together with the tasks' reports (time, rows, peak RSS)."""
    table = open_table(path, storage_options)
    spark = active_session(spark)
    run = CompactionRun(None)
    t0 = time.perf_counter()
    run.instant = compaction.compact(table, strategy=strategy, merge=merge, options=options, progress=progress,
                                     runner=spark_runner(spark, progress=progress, hook=task_hook, run=run),
                                     extra_metadata=SPARK_METADATA)
    run.seconds = time.perf_counter() - t0
    return run


def compact_table(path: str | TablePath, spark: Any = None, strategy: str = "hybrid", merge: str | None = None, *,
            options: Mapping[str, str] | None = None, progress: bool | None = None,
            task_hook: TaskHook | None = None, storage_options: Mapping[str, Any] | None = None) -> Instant | None:
    """Plan a compaction on the driver, run each operation as a Spark task, commit; returns the instant.

    `strategy`: hybrid (FULL or LOG per file group), full or log; `merge`:
    force an engine (sorted, hash, ...; default: the plan's, `sorted` for
    lsm_tree); `options`: planner threshold overrides. None when there was
    nothing to compact.
    """
    return run_compaction(path, spark, strategy, merge, options=options, progress=progress,
                          task_hook=task_hook, storage_options=storage_options).instant


__all__ = ["SPARK_METADATA", "CompactTask", "CompactionRun", "compact_table", "run_compaction", "spark_runner"]
