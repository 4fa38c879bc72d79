"""Optimistic concurrency control: writers work in parallel, the table lock decides at commit.

Hudi's "Writer Expectations": a writer does not hold a lock while it writes
data files; it takes the table lock twice, briefly, to start and to finish.

    writer A                               writer B
    ── lock ─────────────────────────┐
    │ roll back dead pending writes  │
    │ snapshot S_A = latest completion
    │ <a>.deltacommit.requested/.inflight, heartbeat .hoodie/.heartbeat/<a>
    └────────────────────────────────┘
    write files (no lock)                  ── lock: snapshot S_B, <b> inflight ──
          │                                write files (no lock)
    ── lock ─────────────────────────┐           │
    │ writes completed after S_A that │     ── lock ──────────────────────────┐
    │ touched A's file groups? none   │     │ A completed after S_B and touched │
    │ → <a>_<c>.deltacommit  (commit) │     │ a file group B wrote → conflict:  │
    └─────────────────────────────────┘     │ remove B's files, roll back <b>,  │
                                            │ raise ConflictError("... <a> ...")│
                                            └───────────────────────────────────┘

**The conflict rule.** Two writes conflict when they write to the same file
group (partition path + file id, from the write stats of the completed
metadata).  A new file group of the default layout gets a fresh random id, so
inserts never conflict; with the bucket index the id is a function of the
bucket, so two writers touching one bucket do.  Completed compactions and log
compactions never conflict with a writer: their output belongs to the slice
that existed when they were planned, and logs that complete later attach to
the next slice (see `layout.fsview`).

**Liveness.** The heartbeat (`services.heartbeat`) is held from before the
instant appears until after it completed or was rolled back, so another
process never mistakes a slow writer for a dead one.

**Schema.** A concurrent writer may have added columns or widened types: the
schema recorded at commit is the one completed last evolved by this writer's
(merge/evolution.py: both writers' new columns, the wider of two promoted
types); a change no evolution rule reconciles is a `ConflictError`.

Simplified compared with Apache Hudi: one conflict resolution strategy
(Hudi's `SimpleConcurrentFileWritesConflictResolutionStrategy`), no
early conflict detection, no bucket-index "NBCC" (non-blocking concurrency
control) mode.

Taught in: notebooks/11_clustering.ipynb
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from lsm_lab.errors import ConflictError, SchemaError, TimelineError
from lsm_lab.format import keyindex
from lsm_lab.merge import evolution
from lsm_lab.services import heartbeat, markers, mdt_write
from lsm_lab.services.lock import check_table_lock, table_lock
from lsm_lab.services.rollback import delete_instant_files, rollback_failed_writes, rollback_pending
from lsm_lab.storage import TablePath, is_local, list_names
from lsm_lab.timeline.active import ActiveTimeline, InstantExistsError
from lsm_lab.timeline.instant import CLUSTERING, COMMIT, DELTA_COMMIT, REPLACE_COMMIT, Instant, normalize_time
from lsm_lab.timeline.metadata import iter_write_stats

# completed actions a writer can conflict with (compactions never conflict, see the module doc;
# a completed clustering replaced the file groups it read: services.clustering)
CONFLICTING_ACTIONS = (COMMIT, DELTA_COMMIT, REPLACE_COMMIT, CLUSTERING)


def touched_file_groups(metadata: Mapping[str, Any]) -> set[tuple[str, str]]:
    """(partition path, file id) of every file group a commit metadata wrote or replaced."""
    out = {(str(s.get("partitionPath") or ""), str(s.get("fileId"))) for s in iter_write_stats(metadata)
           if s.get("fileId")}
    for partition, ids in (metadata.get("partitionToReplaceFileIds") or {}).items():
        out.update((partition, fid) for fid in ids or [])
    return out


def find_conflict(timeline: ActiveTimeline, snapshot: str | None, mine: set[tuple[str, str]],
                  own_instant: str, *, seen: frozenset[str] | None = None) -> Instant | None:
    """The first write completed after `snapshot` that touched one of `mine`, or None.

    With `seen` (the begin times of the instants completed in the listing the snapshot came from) a write is
    "after the snapshot" when it is not among them, whatever its completion time says (no clock involved)."""
    if not mine:
        return None
    limit = normalize_time(snapshot) if snapshot else None
    for inst in timeline.completed(CONFLICTING_ACTIONS):
        if inst.begin_time == own_instant or inst.completion_time is None:
            continue
        if seen is not None:
            if inst.begin_time in seen:
                continue
        elif limit is not None and normalize_time(inst.completion_time) <= limit:
            continue
        if touched_file_groups(timeline.read_content(inst)) & mine:
            return inst
    return None


def merge_schemas(committed: pa.Schema | None, mine: pa.Schema) -> pa.Schema:
    """The schema to record at commit: the committed one evolved by this writer's schema (merge/evolution.py:
    its new columns, its promotions; a column a concurrent writer widened keeps the wider type).  Two
    writers whose changes no evolution rule reconciles: ConflictError."""
    if committed is None or committed.equals(mine):
        return mine
    try:
        return evolution.evolve_schema(committed, mine)
    except SchemaError as exc:
        raise ConflictError(f"a concurrent writer changed the schema in a way this write cannot follow: {exc}") \
            from None


_UNIQUE_ATTEMPTS = 20


@dataclass
class WriteTransaction:
    """One optimistic write: `begin()` under the lock, files without it, `commit()` under the lock again."""

    base_path: TablePath
    timeline: ActiveTimeline
    action: str
    requested_content: Mapping[str, Any] = field(default_factory=dict)
    instant: Instant | None = None
    snapshot: str | None = None
    heartbeat: heartbeat.Heartbeat | None = None
    #: begin times of the instants completed in the listing the snapshot was taken from (the conflict check)
    seen: frozenset[str] | None = None
    _closed: bool = False

    @property
    def begin_time(self) -> str:
        if self.instant is None:
            raise TimelineError("the write transaction has not begun")
        return self.instant.begin_time

    def _cleanup_due(self) -> bool:
        """Whether dead writers may have left something to roll back or sweep: a pending instant, a marker
        folder or a heartbeat (on an object store all three come from one kept listing of .hoodie/)."""
        meta = self.base_path / ".hoodie"
        return bool(self.timeline.pending() or list_names(meta / markers.TEMP_FOLDER)
                    or list_names(meta / heartbeat.HEARTBEAT_FOLDER))

    def begin(self, latest_completion: Callable[[], str | None]) -> WriteTransaction:
        """Clean up dead writers (under the table lock), take a snapshot, create the inflight instant.

        On an object store the lock is taken only when something may need cleaning up: the conflict check
        compares against the instants the snapshot saw (`seen`), not against a time, so no writer can
        complete unseen between the snapshot and the inflight instant, and the heartbeat is written before
        the requested instant, so a cleaner never takes this write for a dead one."""
        locked = is_local(self.base_path) or self._cleanup_due()
        with table_lock(self.base_path) if locked else contextlib.nullcontext():
            if locked:
                rollback_failed_writes(self.base_path, self.timeline)
            self.snapshot = latest_completion()
            self.seen = frozenset(i.begin_time for i in self.timeline.completed())
            for attempt in range(_UNIQUE_ATTEMPTS):
                begin = self.timeline.new_instant_time()
                self.heartbeat = heartbeat.Heartbeat(self.base_path, begin).start()
                try:
                    requested = self.timeline.request(self.action, dict(self.requested_content), begin_time=begin)
                    self.instant = self.timeline.start(requested)
                    break
                except InstantExistsError:
                    # object stores: the clock is per process, so another process may hold this time;
                    # the create-if-absent of the requested file said so — draw again
                    self.heartbeat.stop()
                    if attempt == _UNIQUE_ATTEMPTS - 1:
                        raise
                except BaseException:
                    self.heartbeat.stop()
                    raise
        return self

    def mark(self, partition: str, file_name: str, io_type: str) -> None:
        """Leave a marker before creating a data file (see `services.markers`)."""
        markers.create_marker(self.base_path, self.begin_time, partition, file_name, io_type)

    def commit(self, metadata: Mapping[str, Any], *, check_conflicts: bool = True) -> Instant:
        """Under the table lock: conflict check, then the completed instant (the commit point)."""
        assert self.instant is not None
        keyindex.index_commit(self.base_path, self.begin_time, metadata)  # before the commit point (crash safe)
        with table_lock(self.base_path):
            if check_conflicts:
                conflict = find_conflict(self.timeline, self.snapshot, touched_file_groups(metadata),
                                         self.begin_time, seen=self.seen)
                if conflict is not None:
                    rollback_pending(self.base_path, self.timeline, self.instant, check_heartbeat=False)
                    self._finish()
                    raise ConflictError(
                        f"write {self.begin_time} conflicts with {conflict.action} {conflict.begin_time} "
                        f"(completed {conflict.completion_time}), which wrote to the same file group(s) after "
                        f"this write started; it was rolled back — retry it")
            check_table_lock(self.base_path)  # object stores: the lease is still ours right before the commit
            mdt_write.update(self.base_path, self.instant, metadata, config=self.timeline.config)  # the metadata table first, as upstream
            done = self.timeline.complete(self.instant, metadata)
            markers.delete_markers(self.base_path, self.begin_time, mine_only=True)
        self._finish()
        return done

    def abort(self) -> None:
        """Undo an instant whose writing failed in this process (no rollback instant: nothing was visible)."""
        if self._closed or self.instant is None:
            self._finish()
            return
        with table_lock(self.base_path):
            mdt_write.rollback(self.base_path, self.begin_time, config=self.timeline.config)
            delete_instant_files(self.base_path, self.begin_time, pending=True)
            with contextlib.suppress(TimelineError):
                self.timeline.remove_pending(self.instant)
            markers.delete_markers(self.base_path, self.begin_time)
        self._finish()

    def _finish(self) -> None:
        self._closed = True
        if self.heartbeat is not None:
            self.heartbeat.stop()

    def __enter__(self) -> WriteTransaction:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if not self._closed:
            self.abort()


__all__ = ["ConflictError", "WriteTransaction", "find_conflict", "merge_schemas", "touched_file_groups"]
