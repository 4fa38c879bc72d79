"""Clustering on Spark: the driver plans and commits, each input group is one Spark task.

    driver                                          Spark (one task per input group)
    ──────                                          ────────────────────────────────
    finish dead pending clustering plans first
    schedule(): <t>.clustering.requested (lock)
    <t>.clustering.inflight, heartbeat <t>
    spark.range(n, numPartitions=n) ───────────────► task i: services.clustering.run_group(ctx, groups[i])
                                                        k-way merge of the group's slices, key-sorted
                                                        output files, write token <i>-<stage>-<attempt>
    ◄── write stats ────────────────────────────────
    reconcile: delete files of <t> no stat names
    conflict check, <t>_<c>.replacecommit (table lock)

As with compaction (spark/compact.py), Spark merges nothing itself: the task
runs the library's `run_group`, the function `Table.cluster` runs locally, so
both produce the same files (only the write tokens differ).

Simplified compared with Apache Hudi's Spark clustering: one input group per
Spark partition, no splitting of a group's output over several tasks.

Taught in: no chapter (Spark clustering; README, Spark, and notebooks/11_clustering.ipynb for clustering itself)
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from lsm_lab.api import open_table
from lsm_lab.services import clustering
from lsm_lab.spark.compact import SPARK_METADATA
from lsm_lab.spark.jobs import TaskClock, TaskHook, active_session, job_progress, reconcile, reraise
from lsm_lab.timeline.instant import Instant
from lsm_lab.timeline.metadata import WriteStat


@dataclass(frozen=True)
class ClusterTask:
    """mapInArrow function over group numbers: run `services.clustering.run_group` for each."""

    ctx: clustering.ClusteringContext
    groups: tuple[clustering.ClusteringGroup, ...]
    hook: TaskHook | None = None

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for i in batch.column(0).to_pylist():
                clock = TaskClock(i)
                stats = clustering.run_group(self.ctx, self.groups[i], i, token=clock.identity.token)
                if self.hook is not None:
                    self.hook(clock.identity)
                yield pa.RecordBatch.from_arrays(
                    [pa.array([json.dumps(s.to_json()) for s in stats] or [None], pa.string())],  # type: ignore[list-item]  # one null row when nothing was written
                    names=["stat"])


def cluster_runner(spark: Any, *, progress: bool | None = None,
                   hook: TaskHook | None = None) -> clustering.GroupRunner:
    """The `GroupRunner` that runs a clustering plan's input groups as Spark tasks (one per group); the
    services run everything around it (`services.clustering.execute`)."""

    def on_spark(ctx: clustering.ClusteringContext, groups: tuple[clustering.ClusteringGroup, ...],
                 inflight: Instant) -> list[WriteStat]:
        stats: list[WriteStat] = []
        if groups:
            frame = spark.range(0, len(groups), 1, len(groups)).mapInArrow(ClusterTask(ctx, groups, hook),
                                                                          "stat string")
            with job_progress(spark, f"clustering {inflight.begin_time}", enabled=progress):
                try:
                    rows = frame.collect()
                except Exception as exc:  # noqa: BLE001
                    reraise(exc, f"clustering {inflight.begin_time}")
            stats = [WriteStat(**json.loads(r["stat"])) for r in rows if r["stat"] is not None]
        reconcile(ctx.base_path, inflight.begin_time, stats)  # files of failed task attempts go
        return stats

    return on_spark


def cluster_table(path: str | Path, spark: Any = None, *, options: Mapping[str, str] | None = None,
                  merge: str | None = None, progress: bool | None = None,
                  task_hook: TaskHook | None = None) -> Instant | None:
    """Plan a clustering on the driver, run each input group as a Spark task, commit the replacecommit.

    Pending plans nobody runs are finished first.  Returns the last completed
    clustering instant, or None when there was nothing to cluster.
    """
    table = open_table(path)
    spark = active_session(spark)
    return clustering.cluster(table, options=options, merge=merge,
                              runner=cluster_runner(spark, progress=progress, hook=task_hook),
                              extra_metadata=SPARK_METADATA)


__all__ = ["ClusterTask", "cluster_runner", "cluster_table"]
