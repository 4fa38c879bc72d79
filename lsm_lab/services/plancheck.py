"""Is a compaction plan still the truth?  Check it against the file-system view before running it.

A plan (`<t>.compaction.requested`) names, per file group, the base file and the
log files to merge, in merge order.  Compaction writes a new base at `t` and
the view then hides everything the plan read; so a plan that lost a log file,
names a file of another group, or lists the logs in another order would make
committed rows disappear or the wrong version win — silently.  Before a plan
runs, every operation is compared with the slice it was made from:

    plan operation (partition, fileId, base, logs)      view now: slice of (partition, fileId) at base
            │                                             logs that completed before t
            └──────────────── equal (same files, same order)? ──── no ──► CorruptTableError(plan, field)

Logs that completed after `t` belong to the slice the compaction opens and are
not part of the plan.  A plan file that is missing from the folder (cleaned,
deleted by hand) fails here too.

Simplified compared with Apache Hudi: Hudi trusts the plan (it is written under
a lock, and its files are protected from the cleaner); lsm_lab re-derives it.

Taught in: notebooks/07_compaction.ipynb
"""

from __future__ import annotations

from collections.abc import Sequence

from lsm_lab.errors import CorruptTableError
from lsm_lab.filegroup.fsview import FileGroup
from lsm_lab.filegroup.planner import Operation
from lsm_lab.storage import TablePath
from lsm_lab.timeline.instant import normalize_time


def verify(groups: Sequence[FileGroup], operations: Sequence[Operation], begin_time: str, *, plan_file: TablePath) -> None:
    """CorruptTableError unless every operation names exactly the files of its slice, in merge order."""
    by_group = {(g.partition, g.file_id): g for g in groups}
    limit = normalize_time(begin_time)
    for i, op in enumerate(operations):
        field = f"operations[{i}]"
        group = by_group.get((op.partition, op.file_id))
        if group is None:
            raise CorruptTableError(f"names file group {op.partition}/{op.file_id}, which has no visible file",
                                    path=plan_file, field=field)
        wanted_base = op.base_file or None
        chosen = None
        for fs in group.slices:
            base = fs.base_file.path.name if fs.base_file else None
            if base == wanted_base and (wanted_base is not None or fs.base_instant == op.base_instant
                                        or not op.base_instant):
                chosen = fs
        if chosen is None:
            raise CorruptTableError(f"names base file {wanted_base!r}, which is not the base of a slice of "
                                    f"{op.partition}/{op.file_id}", path=plan_file, field=f"{field}.dataFilePath")
        logs = [f.path.name for f in chosen.log_files
                if f.name.content != "cdc"
                and normalize_time(f.completion_time or f.instant) < limit]  # v6 v1 logs: named by base
        if list(op.log_files) != logs:
            raise CorruptTableError(f"lists the logs {list(op.log_files)} but the slice holds {logs} (in merge "
                                    "order) before the plan's instant", path=plan_file, field=f"{field}.deltaFilePaths")


__all__ = ["verify"]
