"""Rollback: undo an instant — a write that never completed, or the latest one that did.

A writer that dies between `<t>.deltacommit.inflight` and the completed file
leaves data files named with `t` behind.  Readers already ignore them (their
instant is not completed); rollback removes them for good and records what it
did, so the timeline tells the story:

    <t>.deltacommit.inflight            dead writer (its heartbeat lock is free)
    files *_<t>.parquet, *_<t>_1.parquet ... (named by markers in .hoodie/.temp/<t>/)
          │ rollback_pending(t)
          ▼
    <r>.rollback.requested / .inflight / <r>_<c>.rollback
        {"commitsRollback": [t], "instantsRollback": [{"commitTime": t, "action": ...}],
         "partitionMetadata": {p: {"successDeleteFiles": [...]}}, "totalFilesDeleted": n}
    (the inflight/requested files of t are removed last)

The order makes rollback itself crash safe: data files go first, the rollback
instant completes, and only then the pending files of `t` disappear.  A
*completed* instant is first made invisible (its completed file goes first),
then treated like a pending one; for readers it is gone from the moment the
rollback's requested plan exists (timeline/visibility.py), so a rollback
killed half way is finished by the next writer with its own plan
(`resume_rollback`), never dropped — as Hudi re-runs a pending rollback.

Who may roll back what:

* a pending write whose owner is alive (its heartbeat is held) is never
  touched — `ConflictError`;
* a *requested* compaction, log compaction or clustering is a plan waiting to
  run, not a failed write: it is kept; an inflight one whose runner died goes
  back to requested (its output files removed) and is run again later;
* a pending restore is finished (restore is all-or-nothing; readers see its
  "after" state from its requested plan on, timeline/visibility.py), a pending
  clean is left for the next cleaner, which resumes it;
* a pending write that looks *committed* — its data files exist but it left
  no markers, which a crashed writer always leaves — is never rolled back
  automatically: its completed file was deleted, and rolling it back would
  delete committed data.  `LostCommitError` names it; `Table.rollback(t)` /
  `lsm-lab rollback PATH --instant t` still rolls it back when asked to
  (`refuse_lost_commits`).

The latest completed write may be a replacecommit (insert_overwrite,
insert_overwrite_table, clustering): the same steps apply — a file group is
replaced only by a *completed* replacecommit's `partitionToReplaceFileIds`, so
once its completed file is gone (for readers: once the rollback's plan exists)
the groups it replaced are live again, and its new files are deleted by name
(a bucket table's new slices too).  Upstream rolls a completed instant back
the same way (`CopyOnWriteRollbackActionExecutor`: back to inflight, then
its files deleted) and refuses a savepointed one
(`BaseRollbackActionExecutor.validateSavepointRollbacks`), as `Table.rollback` does;
`Table.rollback` also refuses the upgrade to version 10 (a replacecommit after
which `hoodie.properties` says version 10: services/upgrade.py).

Simplified compared with Apache Hudi: no rollback command blocks appended to
v1 logs (lsm_lab never appends to an existing file), no rollback plan
separate from the rollback instant's requested file, and only the latest
completed write can be rolled back directly (older ones: `restore`).

Taught in: notebooks/07_compaction.ipynb
"""

from __future__ import annotations

import time
from typing import Any

from lsm_lab.errors import ConflictError, InputError, LsmLabError
from lsm_lab.filegroup.fsview import list_data_files
from lsm_lab.filegroup.planner import pending_plans
from lsm_lab.format import keyindex, naming
from lsm_lab.services import heartbeat, markers, mdt_write, staging
from lsm_lab.storage import TablePath, as_path, list_names, paths, temp_leftovers
from lsm_lab.table import mdt_listing
from lsm_lab.timeline import visibility
from lsm_lab.timeline.active import ActiveTimeline
from lsm_lab.timeline.config import read_config
from lsm_lab.timeline.instant import (
    CLEAN,
    CLUSTERING,
    COMPACTION,
    LOG_COMPACTION,
    RESTORE,
    ROLLBACK,
    SAVEPOINT,
    Instant,
    State,
    parse_file_name,
)
from lsm_lab.timeline.metadata import iter_write_stats


def _table_version(base_path: TablePath) -> int:
    try:
        return read_config(base_path).version
    except LsmLabError:
        return 9


def _lists_from_metadata(base_path: TablePath) -> bool:
    """Whether the table's listing comes from its metadata table's `files` partition (table/mdt_listing.py)."""
    try:
        config = read_config(base_path)
    except LsmLabError:
        return False
    return mdt_listing.switched_on(None) and mdt_listing.FILES in mdt_listing.declared(config, base_path)


def files_of_instant(base_path: TablePath, begin_time: str, *, table_version: int | None = None,
                     planned: list[str] | None = None, pending: bool = False) -> list[Any]:
    """Data files an instant wrote: those its markers name plus any file carrying its time in the name.

    `table_version`: the table's version when the caller has read `hoodie.properties` already (else read).
    On a table listed from its metadata table (issue 32: no LIST of the data folders) the folders are not
    listed when the instant's files are known otherwise: a `pending` write's markers name every file it
    wrote (a writer marks a file before it creates it, so no marker = no file), and a completed instant's
    rollback plan names the files its commit metadata lists (`planned`, table-relative paths)."""
    base_path = as_path(base_path)
    # In table version 6 a v1 log is named for its *base* instant, not for the instant that wrote it
    # (a log written during a pending compaction c is even named for c): only markers identify it.
    v1_named_for_writer = (table_version if table_version is not None else _table_version(base_path)) >= 8
    found: set[Any] = set()
    if not ((pending or planned is not None) and _lists_from_metadata(base_path)):
        found = {path for _, path, name in list_data_files(base_path)
                 if name.instant == begin_time and (v1_named_for_writer or name.log_format != 1)}
    for rel in planned or []:
        path = base_path / rel
        if path.is_file():
            found.add(path)
    for partition, file_name, _ in markers.marked_files(base_path, begin_time):
        path = (base_path / partition / file_name) if partition else base_path / file_name
        if path.is_file():
            found.add(path)
    return sorted(found, key=str)


def delete_instant_files(base_path: TablePath, begin_time: str, *, table_version: int | None = None,
                         planned: list[str] | None = None, pending: bool = False) -> list[str]:
    """Delete an instant's data files (and temp files of marked ones); returns paths relative to the table.

    `table_version`, `planned`, `pending`: as for `files_of_instant`."""
    base_path = as_path(base_path)
    deleted = []
    for partition, file_name, _ in markers.marked_files(base_path, begin_time):
        folder = base_path / partition if partition else base_path
        for tmp in temp_leftovers(folder, file_name):  # a writer killed inside write_parquet (a store has none)
            paths.unlink(tmp)  # never through a partition folder linked out of the table
    for path in files_of_instant(base_path, begin_time, table_version=table_version, planned=planned,
                                 pending=pending):
        if not paths.unlink(path, missing_ok=True):
            continue
        deleted.append(path.relative_to(base_path).as_posix())
    keyindex.remove_sidecar(base_path, begin_time)  # the key index entries of the files just deleted
    return sorted(deleted)


def rollback_requests(timeline: ActiveTimeline, instant: Instant) -> list[dict[str, Any]]:
    """The rollback plan's `RollbackRequests` (upstream's `HoodieRollbackPlan`) for a completed instant: per file
    group, the data files its commit metadata lists (`filesToBeDeleted`, table-relative paths).  [] when its
    metadata cannot be read (the files are then found by listing)."""
    try:
        meta = timeline.read_content(instant)
    except LsmLabError:
        return []
    by_group: dict[tuple[str, str], list[str]] = {}
    for stat in iter_write_stats(meta):
        rel = str(stat.get("path") or "")
        if rel:
            by_group.setdefault((str(stat.get("partitionPath") or ""), str(stat.get("fileId") or "")), []).append(rel)
    return [{"partitionPath": p, "fileId": f or None, "latestBaseInstant": None, "filesToBeDeleted": sorted(files),
             "logBlocksToBeDeleted": None} for (p, f), files in sorted(by_group.items())]


def planned_files(plan: dict[str, Any]) -> list[str] | None:
    """The files a rollback plan names (`RollbackRequests` → `filesToBeDeleted`), or None when it names none."""
    requests = plan.get("RollbackRequests") or []
    files = [str(f) for r in requests if isinstance(r, dict) for f in (r.get("filesToBeDeleted") or [])]
    return files or None


def sweep(base_path: TablePath, timeline: ActiveTimeline) -> None:
    """Remove marker folders and heartbeat files that no pending instant owns (left by a kill after commit), and
    the staging folders of dead write jobs (services/staging.py)."""
    base_path = as_path(base_path)
    pending = {i.begin_time for i in timeline.pending()}
    for folder, remove in ((base_path / ".hoodie" / markers.TEMP_FOLDER, markers.delete_markers),
                           (base_path / ".hoodie" / heartbeat.HEARTBEAT_FOLDER, heartbeat.clear)):
        for entry in list_names(folder):  # (a missing folder lists empty)
            if paths.is_instant_time(entry) and entry not in pending and not heartbeat.is_alive(base_path, entry):
                remove(base_path, entry)
    staging.sweep(base_path, timeline.config.props)  # a dead Spark job's staged rows (services/staging.py)


def remove_timeline_files(timeline: ActiveTimeline, begin_time: str, *, keep_requested: bool = False,
                          completed_last: bool = False) -> None:
    """Remove every timeline file of `begin_time`.

    By default the completed file goes first (the instant stops being visible
    at once, as rollback needs); `completed_last=True` removes it last (the
    instant never looks pending, as archival needs).
    """
    rank = {State.COMPLETED: 0, State.INFLIGHT: 1, State.REQUESTED: 2}
    if completed_last:
        rank = {State.REQUESTED: 0, State.INFLIGHT: 1, State.COMPLETED: 2}
    names = []
    for name in list_names(timeline.folder):
        parsed = parse_file_name(name)
        if parsed is not None and parsed[0] == begin_time:
            names.append((rank[parsed[2]], name, parsed[2]))
    for _, name, state in sorted(names):
        if keep_requested and state is State.REQUESTED:
            continue
        paths.unlink(timeline.folder / name)


def rollback_metadata(instant: Instant, deleted: list[str], started: float) -> dict[str, Any]:
    """A `HoodieRollbackMetadata`-shaped dict for one rolled back instant."""
    by_partition: dict[str, dict[str, Any]] = {}
    for rel in deleted:
        partition = rel.rsplit("/", 1)[0] if "/" in rel else ""
        entry = by_partition.setdefault(partition, {"partitionPath": partition, "successDeleteFiles": [],
                                                    "failedDeleteFiles": []})
        entry["successDeleteFiles"].append(rel)
    return {
        "startRollbackTime": instant.begin_time,
        "timeTakenInMillis": int((time.monotonic() - started) * 1000),
        "totalFilesDeleted": len(deleted),
        "commitsRollback": [instant.begin_time],
        "instantsRollback": [{"commitTime": instant.begin_time, "action": instant.action}],
        "partitionMetadata": by_partition,
        "version": 1,
    }


def _check_dead(base_path: TablePath, instant: Instant) -> None:
    if heartbeat.is_alive(base_path, instant.begin_time):
        raise ConflictError(f"{instant} belongs to a live process (its heartbeat is held); "
                            "it cannot be rolled back", path=heartbeat.heartbeat_path(base_path, instant.begin_time))


def rollback_pending(base_path: TablePath, timeline: ActiveTimeline, instant: Instant, *,
                     check_heartbeat: bool = True) -> Instant:
    """Remove the files of a pending write instant and record a completed rollback instant.

    Call with the table lock held.  `check_heartbeat=False` is for the owner
    rolling back its own instant (it holds the heartbeat itself).
    """
    base_path = as_path(base_path)
    if instant.is_completed:
        raise InputError(f"{instant} is completed; use rollback_completed")
    if check_heartbeat:
        _check_dead(base_path, instant)
    started = time.monotonic()
    deleted = delete_instant_files(base_path, instant.begin_time, pending=True)
    req = timeline.request(ROLLBACK, {"instantToRollback": {"commitTime": instant.begin_time,
                                                            "action": instant.action}})
    inflight = timeline.start(req)
    mdt_write.rollback(base_path, instant.begin_time, config=timeline.config)
    done = timeline.complete(inflight, rollback_metadata(instant, deleted, started))
    remove_timeline_files(timeline, instant.begin_time)
    markers.delete_markers(base_path, instant.begin_time)
    if check_heartbeat:
        heartbeat.clear(base_path, instant.begin_time)
    return done


def rollback_completed(base_path: TablePath, timeline: ActiveTimeline, instant: Instant) -> Instant:
    """Roll back a completed instant: invisible first (its completed file goes), then files, then the rest."""
    base_path = as_path(base_path)
    if not instant.is_completed:
        raise InputError(f"{instant} is not completed; use rollback_pending")
    started = time.monotonic()
    requests = rollback_requests(timeline, instant)  # the files, from its commit metadata (kept in the plan)
    plan: dict[str, Any] = {"instantToRollback": {"commitTime": instant.begin_time, "action": instant.action}}
    if requests:
        plan["RollbackRequests"] = requests
    req = timeline.request(ROLLBACK, plan)
    inflight = timeline.start(req)
    remove_timeline_files(timeline, instant.begin_time, keep_requested=True)  # invisible from here on
    mdt_write.rollback(base_path, instant.begin_time, config=timeline.config)
    deleted = delete_instant_files(base_path, instant.begin_time, planned=planned_files(plan))
    done = timeline.complete(inflight, rollback_metadata(instant, deleted, started))
    remove_timeline_files(timeline, instant.begin_time)
    markers.delete_markers(base_path, instant.begin_time)
    return done


def resume_rollback(base_path: TablePath, timeline: ActiveTimeline, instant: Instant) -> Instant | None:
    """Finish a rollback whose process died, with its own plan (table lock held by the caller).

    Readers hide the instant a pending rollback names (timeline/visibility.py), so the rollback must
    happen: dropping it would bring a completed instant back after readers saw it gone.  A rollback
    whose plan cannot be read is discarded (nothing was hidden for it).  Hudi re-uses a pending
    rollback instant too (`HoodieTable.rollbackInflightInstant`, `HoodiePendingRollbackInfo`).
    """
    base_path = as_path(base_path)
    try:
        plan = timeline.read_content(instant, State.REQUESTED)
        target = plan.get("instantToRollback")
    except LsmLabError:
        plan, target = {}, None
    if not isinstance(target, dict) or not target.get("commitTime"):
        remove_timeline_files(timeline, instant.begin_time)
        return None
    begin, action = str(target["commitTime"]), str(target.get("action") or "")
    if heartbeat.is_alive(base_path, begin):
        return None  # (a live owner rolling back its own write: it finishes itself)
    started = time.monotonic()
    if instant.state is State.REQUESTED:
        instant = timeline.start(instant)
    remove_timeline_files(timeline, begin, keep_requested=True)  # invisible (to readers it is already)
    mdt_write.rollback(base_path, begin, config=timeline.config)
    deleted = delete_instant_files(base_path, begin, planned=planned_files(plan))
    done = timeline.complete(instant, rollback_metadata(Instant.make(begin, action, State.COMPLETED, begin),
                                                        deleted, started))
    remove_timeline_files(timeline, begin)
    markers.delete_markers(base_path, begin)
    heartbeat.clear(base_path, begin)
    return done


def drop_plans_reading(base_path: TablePath, timeline: ActiveTimeline, begin_time: str) -> None:
    """Remove pending (log) compaction plans that read files of `begin_time` (before rolling it back)."""
    for inst, plan in pending_plans(timeline):
        names = [n for op in plan.operations for n in ([op.base_file] if op.base_file else []) + list(op.log_files)]
        if any((parsed := naming.parse(n)) is not None and parsed.instant == begin_time for n in names):
            _check_dead(as_path(base_path), inst)
            reset_compaction(base_path, timeline, inst)
            remove_timeline_files(timeline, inst.begin_time)


def reset_compaction(base_path: TablePath, timeline: ActiveTimeline, instant: Instant) -> None:
    """An inflight (log) compaction whose runner died: remove its output and go back to requested."""
    base_path = as_path(base_path)
    mdt_write.rollback(base_path, instant.begin_time, config=timeline.config)
    delete_instant_files(base_path, instant.begin_time, pending=True)
    remove_timeline_files(timeline, instant.begin_time, keep_requested=True)
    markers.delete_markers(base_path, instant.begin_time)
    heartbeat.clear(base_path, instant.begin_time)


def rollback_failed_writes(base_path: TablePath, timeline: ActiveTimeline, *, keep_plans: bool = True) -> list[Instant]:
    """Clean up after dead processes; call with the table lock held.

    Pending instants whose heartbeat is held by a live process are left alone.
    Returns the rollback instants created.
    """
    base_path = as_path(base_path)
    sweep(base_path, timeline)
    pending = timeline.pending()
    if any(i.action in (RESTORE, ROLLBACK) for i in pending):
        for inst in pending:  # a restore or rollback killed half way is finished first (readers see it done)
            if inst.action == RESTORE and not heartbeat.is_alive(base_path, inst.begin_time):
                resume_restore(base_path, timeline, inst)
            elif inst.action == ROLLBACK and not heartbeat.is_alive(base_path, inst.begin_time):
                resume_rollback(base_path, timeline, inst)
        pending = timeline.pending()
    refuse_lost_commits(base_path, timeline, pending)
    done = []
    for inst in pending:
        if heartbeat.is_alive(base_path, inst.begin_time):
            continue
        if inst.action in (COMPACTION, LOG_COMPACTION, CLUSTERING) and keep_plans:  # plans wait to be run
            if inst.state is State.INFLIGHT:
                reset_compaction(base_path, timeline, inst)
            continue
        if inst.action in (ROLLBACK, SAVEPOINT):
            remove_timeline_files(timeline, inst.begin_time)
            heartbeat.clear(base_path, inst.begin_time)
            continue
        if inst.action in (CLEAN, RESTORE):
            continue  # the next cleaner resumes a pending clean plan
        if inst.is_write:
            done.append(rollback_pending(base_path, timeline, inst))
    return done


def refuse_lost_commits(base_path: TablePath, timeline: ActiveTimeline, pending: list[Instant]) -> None:
    """`LostCommitError` if a dead pending write looks committed (data files, no markers): never roll it back.

    A crashed writer always leaves markers next to its data files; a completed write whose completed file
    was deleted has none (timeline/visibility.py).  Instants a pending rollback or restore is removing are
    exempt: those are completed instants being rolled back on purpose.
    """
    base_path = as_path(base_path)
    hidden = visibility.being_removed(timeline)
    dead = [i for i in pending if i.is_write and i.begin_time not in hidden
            and not heartbeat.is_alive(base_path, i.begin_time)]
    # a requested (log) compaction or clustering plan has written nothing (its runner marks files first), and a
    # write with markers crashed rather than lost its commit (`lost_commits` passes over those): only the
    # others need the folders listed
    dead = [i for i in dead if not (i.state is State.REQUESTED and i.action in (COMPACTION, LOG_COMPACTION, CLUSTERING))
            and not visibility.has_markers(base_path, i.begin_time)]
    if not dead:
        return
    lost = visibility.lost_commits(base_path, timeline, list_data_files(base_path), candidates=dead)
    if lost:
        raise visibility.lost_commit_error(base_path, *lost[0], timeline_layout=timeline.config.timeline_layout)


# --------------------------------------------------------------------------- restore (services/savepoint.py)
def _erase(base_path: TablePath, timeline: ActiveTimeline, begin: str, action: str) -> dict[str, Any]:
    """Roll one instant back as part of a restore (idempotent)."""
    started = time.monotonic()
    remove_timeline_files(timeline, begin, keep_requested=True)  # invisible first
    mdt_write.rollback(base_path, begin, config=timeline.config)
    deleted = delete_instant_files(base_path, begin)
    remove_timeline_files(timeline, begin)
    markers.delete_markers(base_path, begin)
    heartbeat.clear(base_path, begin)
    return rollback_metadata(Instant.make(begin, action, State.COMPLETED, begin), deleted, started)


def _run_restore(base_path: TablePath, timeline: ActiveTimeline, inflight: Instant, plan: dict[str, Any]) -> Instant:
    started = time.monotonic()
    results: dict[str, list[dict[str, Any]]] = {}
    for entry in plan.get("instantsToRollback") or []:
        results[entry["commitTime"]] = [_erase(base_path, timeline, entry["commitTime"], entry["action"])]
    for sp in plan.get("savepointsToDelete") or []:
        remove_timeline_files(timeline, sp)
    meta = {
        "startRestoreTime": inflight.begin_time,
        "timeTakenInMillis": int((time.monotonic() - started) * 1000),
        "instantsToRollback": [e["commitTime"] for e in plan.get("instantsToRollback") or []],
        "hoodieRestoreMetadata": results,
        "restoreInstantInfo": list(plan.get("instantsToRollback") or []),
        "savepointToRestoreTimestamp": plan.get("savepointToRestoreTimestamp"),
        "version": 1,
    }
    return timeline.complete(inflight, meta)


def resume_restore(base_path: TablePath, timeline: ActiveTimeline, instant: Instant) -> Instant:
    """Finish a restore whose process died (table lock held by the caller)."""
    plan = timeline.read_content(instant, State.REQUESTED)
    if instant.state is State.REQUESTED:
        instant = timeline.start(instant)
    return _run_restore(as_path(base_path), timeline, instant, plan)

