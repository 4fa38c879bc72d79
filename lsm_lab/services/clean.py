"""Cleaning: delete data files no retained read can need any more.

Every compaction and every copy-on-write update leaves the previous file
slice behind, so that readers who started earlier, and time travel, still
find it.  The cleaner removes old versions once the retention policy says
nobody may ask for them:

    KEEP_LATEST_COMMITS (n = hoodie.cleaner.commits.retained, 10)
        retained read times = completion times of the last n write instants
        keep every file that the snapshot at one of those times reads
        → time travel to any of the last n commits still works

    KEEP_LATEST_FILE_VERSIONS (n = hoodie.cleaner.fileversions.retained, 3)
        keep the files of the latest n slices of every file group

    always kept: the latest snapshot, the snapshot of every savepoint, the
    snapshot each pending writer started from, the files named by pending
    compaction plans, and files of instants that have not completed (those
    belong to rollback, not to the cleaner)

"Files a snapshot reads" come from the same file-system view the reader
uses, built once per retained time from one listing of the table, so the
cleaner can never disagree with a reader about what is needed — including
logs hidden by a later log compaction, which are needed only by snapshots
taken before it.

The clean is an instant like any other:

    <t>.clean.requested   HoodieCleanerPlan  {"earliestInstantToRetain": {...}, "policy": ...,
                                              "filePathsToBeDeletedPerPartition": {p: [{"filePath": ...}]}}
    <t>.clean.inflight    (files being deleted, heartbeat held; on an object store the
                          whole clean runs in one hold of the table lock instead, `_run_held`)
    <t>_<c>.clean         HoodieCleanMetadata {"totalFilesDeleted": n, "partitionMetadata": {...}}

A cleaner killed half way leaves the plan pending; the next `clean` finishes
that plan before it makes a new one (deleting a file twice is harmless).

Simplified compared with Apache Hudi: no KEEP_LATEST_BY_HOURS policy, no
incremental cleaning (every clean looks at the whole table), no partition
deletion, no bootstrap base files.

Taught in: notebooks/12_object_storage.ipynb
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from lsm_lab.errors import CorruptTableError, StorageError
from lsm_lab.filegroup import fsview
from lsm_lab.format import keyindex, naming
from lsm_lab.services import clean_plan, heartbeat, mdt_write

# the planning half lives in clean_plan.py (the metadata table's writer uses it); its names stay importable here
from lsm_lab.services.clean_plan import KEEP_LATEST_COMMITS as KEEP_LATEST_COMMITS
from lsm_lab.services.clean_plan import KEEP_LATEST_FILE_VERSIONS as KEEP_LATEST_FILE_VERSIONS
from lsm_lab.services.clean_plan import PLAN_VERSION as PLAN_VERSION
from lsm_lab.services.clean_plan import POLICIES as POLICIES
from lsm_lab.services.clean_plan import Views
from lsm_lab.services.clean_plan import files_in_plan as files_in_plan
from lsm_lab.services.clean_plan import plan_clean as plan_clean
from lsm_lab.services.clean_plan import resolve_policy as resolve_policy
from lsm_lab.services.lock import check_table_lock, table_lock
from lsm_lab.services.rollback import rollback_failed_writes
from lsm_lab.storage import StoragePath, paths
from lsm_lab.table.state import TableState
from lsm_lab.timeline.instant import (
    CLEAN,
    Instant,
    State,
    file_name_for,
)


# --------------------------------------------------------------------------- running a plan
def _execute(table: TableState, inflight: Instant, plan: Mapping[str, Any], started: float,
             sidecar_keys: list[str] | None = None) -> Instant:
    """Delete the plan's files and complete the clean.  `sidecar_keys` (object stores, a clean planned in
    this lock hold): the key index sidecars the deletion leaves without files, deleted in the same bulk
    DELETE; without them the sidecars are pruned after the completion from a new listing."""
    deleted: dict[str, list[str]] = {}
    failed: dict[str, list[str]] = {}
    remote: list[tuple[str, str, StoragePath]] = []
    for partition, entries in (plan.get("filePathsToBeDeletedPerPartition") or {}).items():
        for entry in entries:
            path = paths.inside(table.path, entry["filePath"], field="filePath",  # the path guard
                                file=table.active_timeline.folder / inflight.file_name)
            if naming.parse(path.name) is None:  # the cleaner deletes data files, nothing else
                raise CorruptTableError(f"{entry['filePath']!r} is not a data file name", field="filePath",
                                        path=table.active_timeline.folder / inflight.file_name)
            if isinstance(path, StoragePath):  # deleted together below: S3 takes 1,000 keys per request
                remote.append((partition, entry["filePath"], path))
                continue
            try:
                paths.unlink(path, missing_ok=False)
                deleted.setdefault(partition, []).append(entry["filePath"])
            except FileNotFoundError:
                deleted.setdefault(partition, []).append(entry["filePath"])  # an earlier attempt got it
            except OSError:
                failed.setdefault(partition, []).append(entry["filePath"])
    pruned = False  # the sidecars went with the data files
    if remote:  # an object store answers a DELETE of a missing key as done: no HEAD is needed to know
        try:
            store = remote[0][2].storage
            together = sidecar_keys if sidecar_keys and isinstance(table.path, StoragePath) \
                and table.path.storage is store else []
            store.delete_many([path.key for _, _, path in remote] + together)
            pruned = sidecar_keys is not None and len(together) == len(sidecar_keys)
            for partition, rel, _ in remote:
                deleted.setdefault(partition, []).append(rel)
        except (OSError, StorageError):
            for partition, rel, _ in remote:
                failed.setdefault(partition, []).append(rel)
    meta = clean_plan.completed_metadata(inflight.begin_time, time.monotonic() - started, plan, deleted, failed)
    with table_lock(table.path):
        check_table_lock(table.path)  # object stores: the lease is still ours (else the next cleaner resumes it)
        mdt_write.update(table.path, inflight, meta, config=table.config)  # the metadata table first, as upstream
        done = table.active_timeline.complete(inflight, meta)
    if pruned:
        return done
    # key index sidecars of instants whose files are all gone (listed after the sidecars: see prune_sidecars)
    keyindex.prune_sidecars(table.path, (path.name for _, path, _ in fsview.list_data_files(table.path)))
    return done


def _run(table: TableState, instant: Instant, hb: heartbeat.Heartbeat) -> Instant:
    """Run a pending clean plan whose heartbeat the caller holds."""
    timeline = table.active_timeline
    started = time.monotonic()
    try:
        if instant.state is State.REQUESTED:
            with table_lock(table.path):
                instant = timeline.start(instant)
        plan = timeline.read_content(instant, State.REQUESTED)
        return _execute(table, instant, plan, started)
    finally:
        hb.stop()


def clean(table: TableState, *, policy: str | None = None, retained: int | None = None) -> Instant | None:
    """Finish a pending clean left by a dead cleaner, or plan and run a new one; None when nothing to delete."""
    chosen, n = resolve_policy(table.config.props, policy, retained)
    resumed: Instant | None = None
    for _ in range(8):  # finish pending plans first (there is normally at most one)
        done, was_pending = _clean_once(table, chosen, n)
        if not was_pending:
            return done or resumed
        resumed = done
    return resumed


def _clean_once(table: TableState, chosen: str, n: int) -> tuple[Instant | None, bool]:
    timeline = table.active_timeline
    pending = False
    with table_lock(table.path):
        rollback_failed_writes(table.path, timeline)
        for inst in timeline.pending():
            if inst.action == CLEAN and not heartbeat.is_alive(table.path, inst.begin_time):
                hb = heartbeat.Heartbeat(table.path, inst.begin_time).start()
                req = Instant.make(inst.begin_time, CLEAN, State.REQUESTED, None, file_name_for(
                    inst.begin_time, CLEAN, State.REQUESTED, timeline_layout=table.config.timeline_layout))
                target = req if inst.state is State.REQUESTED else inst
                pending = True
                break
        else:
            remote = isinstance(table.path, StoragePath)
            # the sidecars, listed before the data files (as keyindex.prune_sidecars needs)
            sidecars = keyindex.sidecar_instants(table.path) if remote else []
            views = Views(table)
            plan = plan_clean(table, chosen, n, views=views)
            if not files_in_plan(plan):
                return None, False
            begin = timeline.new_instant_time()
            if remote:
                return _run_held(table, plan, begin, sidecars, [path.name for _, path, _ in views.files]), False
            hb = heartbeat.Heartbeat(table.path, begin).start()
            try:
                target = timeline.request(CLEAN, plan, begin_time=begin)
            except BaseException:
                hb.stop()
                raise
    return _run(table, target, hb), pending


def _run_held(table: TableState, plan: dict[str, Any], begin: str, sidecars: list[str],
              listed: list[str]) -> Instant:
    """Object stores: request, run and complete a new clean inside the lock hold that planned it.

    No heartbeat (its GET, PUT and DELETE): another process judges a pending clean only under the table
    lock, which this one holds from the plan to the completion, so while it lives nobody sees the clean
    pending; if it dies, the lock's lease runs out and the next cleaner finds a pending clean without a
    heartbeat and resumes it, as it would after a dead heartbeat.  A lease lost while alive (its renewal
    failed) is caught before the completion (`check_table_lock`); a second cleaner that resumed the plan
    meanwhile deletes the same files, which is harmless.  The deletion is one bulk DELETE per 1,000 keys,
    the sidecars the deletion empties included (`listed`: the data files of the plan's listing)."""
    started = time.monotonic()
    timeline = table.active_timeline
    inflight = timeline.start(timeline.request(CLEAN, plan, begin_time=begin))
    going = [rel.rsplit("/", 1)[-1] for rel in files_in_plan(plan)]
    assert isinstance(table.path, StoragePath)
    keys = keyindex.sidecars_left_without_files(table.path, sidecars, listed, going)
    return _execute(table, inflight, plan, started, sidecar_keys=keys)


def maybe_clean(table: TableState) -> Instant | None:
    """Automatic cleaning after a write, when `hoodie.clean.automatic=true`."""
    if str(table.config.props.get("hoodie.clean.automatic", "false")).lower() != "true":
        return None
    return clean(table)
