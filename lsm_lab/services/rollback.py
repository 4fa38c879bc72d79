"""Rollback: undo a write that never completed.

A writer that dies between `<t>.deltacommit.inflight` and the completed file
leaves data files named with `t` behind.  Readers already ignore them (their
instant is not completed); rollback removes them for good and records what it
did, so the timeline tells the story:

    <t>.deltacommit.inflight            (dead writer)
    files *_<t>.parquet, *_<t>_1.parquet ...
          │ rollback_pending(t)
          ▼
    <r>.rollback.requested / .inflight / <r>_<c>.rollback   {"instantsRollback": [t], "deletedFiles": [...]}
    (the inflight/requested files of t are removed last)

The order makes rollback itself crash safe: data files go first, the rollback
instant completes, and only then the pending files of `t` disappear; a rollback
killed half way is simply done again by the next writer.

Simplified compared with Apache Hudi: no marker-based partial rollback of v1
log blocks (lsm_lab never appends to an existing file), no rollback of
completed instants here (restore does that).
"""

from __future__ import annotations

from pathlib import Path

from lsm_lab.layout.fsview import list_data_files
from lsm_lab.timeline.active import ActiveTimeline
from lsm_lab.timeline.instant import COMPACTION, LOG_COMPACTION, ROLLBACK, Instant, State


def files_of_instant(base_path: Path, begin_time: str) -> list[Path]:
    return [path for _, path, name in list_data_files(base_path) if name.instant == begin_time]


def rollback_pending(base_path: Path, timeline: ActiveTimeline, instant: Instant) -> Instant:
    """Remove the files of a pending write instant and record a completed rollback instant."""
    deleted = []
    for path in files_of_instant(base_path, instant.begin_time):
        path.unlink(missing_ok=True)
        deleted.append(str(path.relative_to(base_path)))
    req = timeline.request(ROLLBACK, {"instantToRollback": instant.begin_time, "action": instant.action})
    inflight = timeline.start(req)
    done = timeline.complete(inflight, {
        "instantsRollback": [{"commitTime": instant.begin_time, "action": instant.action}],
        "deletedFiles": sorted(deleted),
        "totalFilesDeleted": len(deleted),
    })
    timeline.remove_pending(instant)
    return done


def rollback_failed_writes(base_path: Path, timeline: ActiveTimeline, *, keep_plans: bool = True) -> list[Instant]:
    """Roll back every pending write (call with the table lock held: then every pending write is dead).

    A *requested* compaction or log compaction is a plan waiting to run, not a
    failed write, so it is kept; an *inflight* one is rolled back (its plan is
    re-run later from the requested file).
    """
    done = []
    for inst in timeline.pending():
        if inst.action in (COMPACTION, LOG_COMPACTION) and keep_plans:
            if inst.state is State.INFLIGHT:
                for path in files_of_instant(base_path, inst.begin_time):
                    path.unlink(missing_ok=True)
                # back to requested: remove only the inflight file
                (timeline.folder / inst.file_name).unlink(missing_ok=True)
            continue
        if inst.action == ROLLBACK:
            timeline.remove_pending(inst)
            continue
        if inst.is_write:
            done.append(rollback_pending(base_path, timeline, inst))
    return done
