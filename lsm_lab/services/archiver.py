"""Archival: which completed instants leave the active timeline, and moving them.

    active timeline (oldest → newest, by completion)
    ┌────────────────────────────────────────────┬──────────────────────────────┐
    │ archivable prefix                          │ kept active                  │
    └────────────────────────────────────────────┴──────────────────────────────┘
                                                 ▲ the first instant that hits a barrier, or
                                                   the last `hoodie.keep.min.commits` instants

Only a *prefix* (by completion time) is archived, and it stops at the first of
these barriers:

* the oldest pending instant: an instant that completed after a pending
  writer began may still be needed by that writer's conflict check, and a
  pending instant must stay visible in the active timeline;
* the oldest savepointed instant (a savepoint pins its instant and
  everything after it, so that `restore` finds them);
* the cleaner's `earliestInstantToRetain` (the last completed clean plan);
* on a table with a metadata table, its latest completed compaction (upstream's
  `HoodieTimelineArchiver`: an MDT log block not yet compacted keeps its data
  instant active; no MDT compaction yet, nothing is archived);
* the last `keep` completed instants.

Data files are never touched: archiving is about timeline files only.
Completion times stay readable in the archive, so every data file still
resolves to its instant (see `timeline.archive`).

Automatic archival after a write (`hoodie.archive.automatic=true`) runs when
more than `hoodie.keep.max.commits` (30) completed instants are active and
archives down to `hoodie.keep.min.commits` (20); a level of the LSM timeline
is compacted once it holds `hoodie.timeline.compaction.batch.size` (10) files.

Simplified compared with Apache Hudi: Hudi also keeps the instants needed by
incremental cleaning, which lsm_lab does not have, and lsm_lab does not archive
table version 6 timelines.  The metadata table's own timeline is archived by
`services/mdt_services.py` with upstream's rules for it.

Taught in: notebooks/02_timeline.ipynb
"""

from __future__ import annotations

from collections.abc import Mapping

from lsm_lab import checks
from lsm_lab.errors import InputError, UnsupportedFeatureError
from lsm_lab.services import mdt_services
from lsm_lab.services.lock import table_lock
from lsm_lab.services.rollback import remove_timeline_files
from lsm_lab.table.state import TableState
from lsm_lab.timeline.archive import DEFAULT_BATCH, PLAN_STATES, ArchivedTimeline
from lsm_lab.timeline.instant import CLEAN, SAVEPOINT, Instant, State, file_name_for, normalize_time


def _int(props: Mapping[str, str], key: str, default: int) -> int:
    raw = props.get(key)
    if raw in (None, ""):
        return default
    try:
        value = int(raw)
    except ValueError:
        raise InputError(f"{key}={raw!r} is not an integer") from None
    if value < 1:
        raise InputError(f"{key} must be at least 1 (got {value})")
    return value


def barriers(table: TableState) -> dict[str, str]:
    """The times archival must stay below, by reason (begin times; see the module doc)."""
    timeline = table.active_timeline
    out: dict[str, str] = {}
    pending = timeline.pending()
    if pending:
        out["pending instant"] = min(normalize_time(i.begin_time) for i in pending)
    savepointed = [str(sp.get("savepointedInstant")) for sp in table.savepoints()]
    if savepointed:
        out["savepoint"] = min(normalize_time(t) for t in savepointed)
    cleans = timeline.completed([CLEAN])
    if cleans:
        plan = timeline.read_content(cleans[-1], State.REQUESTED)
        earliest = (plan.get("earliestInstantToRetain") or {}).get("timestamp")
        if earliest:
            out["clean retention"] = normalize_time(str(earliest))
    mdt = mdt_services.data_archival_barrier(table.path, table.config)
    if mdt is not None:
        out["metadata table compaction"] = mdt
    return out


def _plan_bytes(table: TableState, inst: Instant) -> bytes | None:
    plan = b""
    for state in PLAN_STATES.get(inst.action, ()):
        path = table.active_timeline.folder / file_name_for(inst.begin_time, inst.action, state,
                                                            timeline_layout=table.config.timeline_layout)
        data = path.read_bytes() if path.exists() else b""
        plan = data or plan
    return plan or None


def archive(table: TableState, *, keep: int | None = None, automatic: bool = False) -> list[Instant]:
    """Move old completed instants into the LSM timeline; returns the archived instants."""
    props = table.config.props
    keep_min = _int(props, "hoodie.keep.min.commits", 20)
    keep_max = _int(props, "hoodie.keep.max.commits", 30)
    batch = _int(props, "hoodie.timeline.compaction.batch.size", DEFAULT_BATCH)
    if keep is not None:
        checks.int_arg(keep, "keep")
    if keep is not None and keep < 1:
        raise InputError("keep must be at least 1: the latest instant always stays active")
    target = keep if keep is not None else keep_min
    history = ArchivedTimeline(table.path, table.config)
    if not history.supported:
        raise UnsupportedFeatureError("archiving a table version 6 timeline is not supported", path=table.path)
    timeline = table.active_timeline
    with table_lock(table.path):
        completed = timeline.completed()
        if automatic and len(completed) <= keep_max:
            return []
        excess = len(completed) - target
        if excess <= 0:
            return []
        limits = barriers(table)
        chosen: list[Instant] = []
        for inst in completed[:excess]:
            begin = normalize_time(inst.begin_time)
            done = normalize_time(inst.completion_time or inst.begin_time)
            if any(begin >= t or done >= t for t in limits.values()):
                break
            if inst.action == SAVEPOINT:
                break
            chosen.append(inst)
        if not chosen:
            return []
        rows = []
        for inst in chosen:
            metadata = (timeline.folder / inst.file_name).read_bytes()
            rows.append({"instantTime": inst.begin_time, "completionTime": inst.completion_time,
                         "action": inst.action, "metadata": metadata, "plan": _plan_bytes(table, inst)})
        history.append(rows)  # the archive commit point: from here the instants are in both
        for inst in chosen:
            remove_timeline_files(timeline, inst.begin_time, completed_last=True)
        history.compact(batch)
        return chosen


def maybe_archive(table: TableState) -> list[Instant]:
    """Automatic archival after a write, when `hoodie.archive.automatic=true`."""
    if str(table.config.props.get("hoodie.archive.automatic", "false")).lower() != "true":
        return []
    if not ArchivedTimeline(table.path, table.config).supported:
        return []
    return archive(table, automatic=True)
