"""Savepoints and restore: pin a snapshot, and later put the whole table back to it.

    writes ──●───●───●(sp)───●───●───●──► time
                     │        └───┴───┴── rolled back by restore(sp)
                     └ savepoint: its snapshot's files are never cleaned,
                       its instant (and everything after) is never archived

A **savepoint** records the files the snapshot at one completed write reads
(`HoodieSavepointMetadata`: `partitionMetadata` → `savepointDataFile`).  The
cleaner keeps them whatever its policy, so the table can always go back.

A **restore** is many rollbacks in one instant, newest first:

    <r>.restore.requested   {"savepointToRestoreTimestamp": t, "instantsToRollback": [...newest first...]}
    <r>.restore.inflight    for each instant: completed file removed first (invisible at once),
                            then its data files, then its requested/inflight files
    <r>_<c>.restore         HoodieRestoreMetadata {"instantsToRollback": [...], "hoodieRestoreMetadata": {...}}

Every pending instant is rolled back too (their owners must be dead: a
restore refuses to run while a live writer holds a heartbeat), and savepoints
taken after the target go with the instants they pinned.  The requested
plan is the commit point for readers: from the moment it exists they see the
"after" state (every instant it lists hidden, timeline/visibility.py), so a
restore is one atomic change even when it is killed half way.  A killed
restore is finished by the next writer or table service before anything else
happens (never abandoned: after its first deletion the "before" state is gone
from disk, while the "after" state is fully known from the plan), so nobody
builds on a half-restored table.

Apache Hudi (`BaseHoodieWriteClient`): `startCommit` refuses to start while a
restore is pending, and `scheduleAndGetRestorePlan` re-uses a failed
restore's plan when restoring to the same savepoint again; its readers do not
hide the instants of a pending restore.

Simplified compared with Apache Hudi: a savepoint gets its own instant time
(Hudi gives it the savepointed commit's time; two instants with one time do
not fit lsm_lab's timeline loader), and the instant it pins is in its
metadata (`savepointedInstant`); restore targets savepoints only.

Taught in: no chapter (savepoint and restore; README, Table services)
"""

from __future__ import annotations

import getpass
import time
from typing import Any

from lsm_lab.errors import ConflictError, InputError, TimelineError
from lsm_lab.services import heartbeat
from lsm_lab.services.lock import table_lock
from lsm_lab.services.rollback import _run_restore, remove_timeline_files, resume_restore, rollback_failed_writes
from lsm_lab.table.state import TableState, list_savepoints
from lsm_lab.timeline.active import ActiveTimeline
from lsm_lab.timeline.archive import is_archived
from lsm_lab.timeline.instant import CLEAN, RESTORE, SAVEPOINT, Instant, State, normalize_time
from lsm_lab.timeline.instanttime import CompletionTime


# --------------------------------------------------------------------------- savepoints
def _target_write(table: TableState, instant: Any) -> Instant:
    writes = table.completed_writes()
    if not writes:
        raise InputError("the table has no completed write to savepoint")
    if instant is None:
        return writes[-1]
    begin = instant.begin_time if isinstance(instant, Instant) else str(instant)
    for inst in writes:
        if inst.begin_time == begin:
            return inst
    raise InputError(f"no completed write instant {begin} on the timeline")


def create_savepoint(table: TableState, instant: Any = None, *, user: str | None = None,
                     comment: str = "") -> Instant:
    """Savepoint a completed write (default: the latest); returns the savepoint instant."""
    timeline = table.active_timeline
    with table_lock(table.path):
        rollback_failed_writes(table.path, timeline)
        target = _target_write(table, instant)
        done = target.completion_time or target.begin_time
        for sp in list_savepoints(timeline):
            if sp["savepointedInstant"] == target.begin_time:
                raise InputError(f"instant {target.begin_time} is already savepointed (savepoint {sp['instant']})")
        cleans = timeline.completed([CLEAN])
        if cleans:
            earliest = (timeline.read_content(cleans[-1], State.REQUESTED).get("earliestInstantToRetain") or {})
            stamp = earliest.get("timestamp")
            if stamp and normalize_time(target.begin_time) < normalize_time(str(stamp)):
                raise InputError(f"instant {target.begin_time} is older than the cleaner's earliest retained "
                                 f"instant {stamp}: its files may be gone")
        files: dict[str, list[str]] = {}
        for g in table.file_groups(as_of=CompletionTime(done)):  # the snapshot as the instant completed
            for f in g.latest.files:
                files.setdefault(g.partition, []).append(f.path.name)
        meta = {
            "savepointedBy": user or _user(),
            "savepointedAt": int(time.time()),
            "comments": comment,
            "partitionMetadata": {p: {"partitionPath": p, "savepointDataFile": sorted(v)} for p, v in files.items()},
            "version": 1,
            "savepointedInstant": target.begin_time,
            "savepointedCompletionTime": done,
        }
        req = timeline.request(SAVEPOINT, {"savepointedInstant": target.begin_time})
        return timeline.complete(timeline.start(req), meta)


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # pragma: no cover - no passwd entry in some containers
        return "lsm_lab"


def _find_savepoint(timeline: ActiveTimeline, instant: Any) -> dict[str, Any]:
    begin = instant.begin_time if isinstance(instant, Instant) else str(instant)
    for sp in list_savepoints(timeline):
        if begin in (sp["instant"], sp["savepointedInstant"]):
            return sp
    raise InputError(f"{begin} is not a savepoint nor a savepointed instant "
                     f"(savepoints: {', '.join(s['savepointedInstant'] for s in list_savepoints(timeline)) or 'none'})")


def delete_savepoint(table: TableState, instant: Any) -> None:
    """Remove a savepoint (its files become cleanable again)."""
    with table_lock(table.path):
        sp = _find_savepoint(table.active_timeline, instant)
        remove_timeline_files(table.active_timeline, sp["instant"])


# --------------------------------------------------------------------------- restore
def restore(table: TableState, instant: Any) -> Instant:
    """Put the table back to the snapshot of a savepoint; returns the completed restore instant."""
    timeline = table.active_timeline
    with table_lock(table.path):
        rollback_failed_writes(table.path, timeline)
        sp = _find_savepoint(timeline, instant)
        limit = normalize_time(str(sp["savepointedCompletionTime"]))
        live = [i for i in timeline.pending() if heartbeat.is_alive(table.path, i.begin_time)]
        if live:
            raise ConflictError(f"cannot restore while {live[0]} is being worked on by a live process")
        later = [i for i in table.completed_writes()
                 if normalize_time(i.completion_time or i.begin_time) > limit]
        if any(is_archived(i) for i in later):
            raise TimelineError("instants after the savepoint were archived; cannot restore")
        pending = [i for i in timeline.pending() if i.action not in (CLEAN, RESTORE)]
        victims = sorted(later + pending, key=lambda i: i.sort_key, reverse=True)
        doomed_sp = [s["instant"] for s in list_savepoints(timeline)
                     if normalize_time(str(s["savepointedCompletionTime"])) > limit]
        plan = {"savepointToRestoreTimestamp": sp["savepointedInstant"],
                "instantsToRollback": [{"commitTime": i.begin_time, "action": i.action} for i in victims],
                "savepointsToDelete": doomed_sp, "version": 1}
        begin = timeline.new_instant_time()
        with heartbeat.Heartbeat(table.path, begin):
            req = timeline.request(RESTORE, plan, begin_time=begin)
            inflight = timeline.start(req)
            return _run_restore(table.path, timeline, inflight, plan)


__all__ = ["create_savepoint", "delete_savepoint", "list_savepoints", "restore", "resume_restore"]
