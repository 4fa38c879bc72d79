"""What readers see while a restore or rollback is pending, and a write whose completed file was lost.

**A pending restore is one atomic change.**  A restore removes many
instants, one after the other (services/rollback.py): completed file first,
then data files, then pending files.  A reader that looked at the table half
way through — or after the restore process was killed — would see some of
those instants gone and others not: a state that is neither before nor after.
So the restore's *requested* plan, written before anything is deleted, is the
commit point for readers:

    <r>.restore.requested  {"instantsToRollback": [{"commitTime": t3}, {"commitTime": t2}]}
         │   readers: t2 and t3 are gone from here on (the "after" state, known from the plan alone)
         ▼
    <r>.restore.inflight   t3 erased, t2 erased ... (killed anywhere: readers still see "after")
         ▼
    <r>_<c>.restore        nothing left to hide

The next writer (or table service) finishes a killed restore before it does
anything else, under the table lock (`rollback.rollback_failed_writes`), so no
write ever builds on the half-deleted files; re-running `restore` does the
same.  Finishing rather than abandoning is the crash-safe choice: after the
first deletion the "before" state no longer exists on disk, while the "after"
state is fully determined by the plan, and every step of the restore is
idempotent.  A pending `rollback` of a completed instant is hidden the same
way (its plan names `instantToRollback`).

**A write whose completed file was lost.**  If someone deletes
`<t>_<c>.deltacommit` by hand, `t` looks like a write that crashed: its
requested and inflight files are there, its data files too.  Reading without
it silently brings back the rows it deleted, and the next writer's rollback
would delete its data files for good.  What tells the two apart is the
markers (services/markers.py): a writer creates `.hoodie/.temp/<t>/...` before
each data file and removes the folder only *after* the completed file exists,
and every rollback deletes the data files *before* the markers.  So

    pending write t, data files named for t exist, no marker of t   →   t was committed

and both readers (`check_lost_commits`) and the rollback of failed writes raise
`LostCommitError` naming `t` instead.  A pending instant that a pending
rollback or restore is removing is exempt (those remove completed instants
on purpose, markers long gone).  Two re-checks rule out the races with live
processes: the files must still exist after the markers were found missing
(every cleanup deletes files before markers), and the instant must still not
be completed (a writer completes, then deletes its markers).

Hudi beside it: `BaseHoodieWriteClient.startCommit` refuses to start a
commit while a restore is pending ("Found pending restore in active timeline.
Please complete the restore fully before proceeding"), and
`scheduleAndGetRestorePlan` re-uses the plan of a failed restore to the same
savepoint; Hudi's file-system view does not hide the instants of a pending
restore, so its readers may see the half-done state — lsm_lab's readers hide
them.  A pending rollback is re-run with its own plan (`HoodieTable.rollbackInflightInstant`,
`HoodiePendingRollbackInfo`), as lsm_lab's `resume_rollback` does.  A missing
completed file is not detected by Hudi: the instant is a failed write to it,
and the next rollback of failed writes (at once with the EAGER policy, after
its heartbeat expired with LAZY) deletes its data files.

Taught in: no chapter (README, Table services: savepoint and restore)
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from lsm_lab.errors import LostCommitError, LsmLabError
from lsm_lab.storage import TablePath, list_names
from lsm_lab.timeline.active import ActiveTimeline
from lsm_lab.timeline.instant import (
    COMPLETED_ACTION,
    RESTORE,
    ROLLBACK,
    WRITE_ACTIONS,
    Instant,
    State,
    normalize_time,
    parse_file_name,
)

#: `.hoodie/<this>/<instant>/` holds an instant's markers (services/markers.py writes them)
MARKER_FOLDER = ".temp"


def being_removed(timeline: ActiveTimeline, instants: Iterable[Instant] | None = None) -> frozenset[str]:
    """Begin times of the instants a pending restore or rollback removes: gone for readers from its plan on.

    `instants`: the timeline listing the caller has already (default: list it)."""
    out: set[str] = set()
    for inst in (timeline.pending() if instants is None else [i for i in instants if not i.is_completed]):
        if inst.action == RESTORE:
            plan = timeline.read_content(inst, State.REQUESTED)  # a restore without its plan cannot finish: raise
            for entry in plan.get("instantsToRollback") or []:
                if isinstance(entry, dict) and entry.get("commitTime"):
                    out.add(str(entry["commitTime"]))
        elif inst.action == ROLLBACK:
            try:
                plan = timeline.read_content(inst, State.REQUESTED)
            except LsmLabError:
                continue  # a rollback without a readable plan is discarded by the next writer
            target = plan.get("instantToRollback")
            if isinstance(target, dict) and target.get("commitTime"):
                out.add(str(target["commitTime"]))
    return frozenset(out)


def has_markers(base_path: TablePath, begin_time: str) -> bool:
    """Does `.hoodie/.temp/<begin_time>/` hold anything (one LIST on an object store)?"""
    return bool(list_names(base_path / ".hoodie" / MARKER_FOLDER / begin_time))


def _completed_now(timeline: ActiveTimeline, begin_time: str) -> bool:
    """A fresh listing (not the pinned one): has `begin_time` completed meanwhile?"""
    for name in list_names(timeline.folder):
        parsed = parse_file_name(name)
        if parsed is not None and parsed[0] == begin_time and parsed[2] is State.COMPLETED:
            return True
    return False


def lost_commits(base_path: TablePath, timeline: ActiveTimeline, files: Iterable[tuple[Any, ...]], *,
                 candidates: Iterable[Instant] | None = None,
                 read_time: str | None = None) -> list[tuple[Instant, list[Any]]]:
    """(instant, its data files) of every pending write that looks committed (see the module docstring).

    `files`: the data-file listing, tuples of (partition, path, parsed name, ...); `candidates`: the
    pending instants to judge (default: every pending write not being removed); `read_time`: only
    instants that could be visible at that time (begun at or before it).
    """
    if candidates is None:
        listed = timeline.instants()
        pending = [i for i in listed if not i.is_completed and i.action in WRITE_ACTIONS]
        if not pending:
            return []
        hidden = being_removed(timeline, listed)
        candidates = [i for i in pending if i.begin_time not in hidden]
    wanted = {i.begin_time: i for i in candidates
              if read_time is None or normalize_time(i.begin_time) <= normalize_time(read_time)}
    if not wanted:
        return []
    # table version 6 names a v1 log for its base instant (even for a pending compaction's): not its writer's
    v1_named_for_writer = timeline.config.version >= 8
    by_instant: dict[str, list[Any]] = {}
    for entry in files:
        name = entry[2]
        if name.instant in wanted and (v1_named_for_writer or name.log_format != 1):
            by_instant.setdefault(name.instant, []).append(entry[1])
    out = []
    for begin, paths in sorted(by_instant.items()):
        if has_markers(base_path, begin):
            continue  # a writer that crashed (or is still writing): its markers are there
        still = [p for p in paths if p.is_file()]  # cleanups delete files before markers: gone now, no commit
        if not still or _completed_now(timeline, begin):
            continue
        out.append((wanted[begin], sorted(still, key=str)))
    return out


def lost_commit_error(base_path: TablePath, instant: Instant, files: list[Any], *,
                      timeline_layout: int = 2) -> LostCommitError:
    names = ", ".join(str(p.name) for p in files[:3]) + (f" and {len(files) - 3} more" if len(files) > 3 else "")
    done = COMPLETED_ACTION.get(instant.action, instant.action)
    completed = f"{instant.begin_time}_<completion time>.{done}" if timeline_layout >= 2 else f"{instant.begin_time}.{done}"
    return LostCommitError(
        f"write {instant.begin_time} ({instant.action}) looks committed but its completed instant file is missing: "
        f"{len(files)} data file(s) of it exist ({names}) and it left no markers in .hoodie/{MARKER_FOLDER}/ "
        "(a crashed writer always does). Reading without it would bring back what it deleted, rolling it back "
        f"would delete its data for good. Restore the completed file ({completed}) from a backup, or, to "
        f"discard this write, roll it back explicitly: lsm-lab rollback <table> --instant {instant.begin_time}",
        instant=instant.begin_time, path=base_path)


def check_lost_commits(base_path: TablePath, timeline: ActiveTimeline, files: Iterable[tuple[Any, ...]],
                       read_time: str | None = None) -> None:
    """Raise `LostCommitError` for the first pending write that looks committed (readers call this)."""
    for instant, found in lost_commits(base_path, timeline, files, read_time=read_time):
        raise lost_commit_error(base_path, instant, found, timeline_layout=timeline.config.timeline_layout)


__all__ = ["MARKER_FOLDER", "being_removed", "check_lost_commits", "has_markers", "lost_commit_error",
           "lost_commits"]
