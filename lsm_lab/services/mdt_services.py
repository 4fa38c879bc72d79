"""The metadata table's own table services: cleaning its old file slices and archiving its timeline.

The MDT is a MOR table, so it ages like one: every MDT compaction (`mdt_write.compact_if_due`) starts
a new slice in each file group, and the old base file and logs stay behind; every data instant adds
an MDT deltacommit to the MDT's active timeline.  Upstream's `HoodieBackedTableMetadataWriter
.performTableServices` runs, inside the data table's write, the MDT's clean (`cleanIfNecessary`) and
archival (`HoodieTimelineArchiver` on the MDT), in that order: clean, compaction, archival.  lsm_lab
does the same from `mdt_write.update`, under the data table's lock, before the instant's MDT deltacommit:

    MDT file group   [base c1 + logs]   [base c2 + logs]   [base c3 + logs ← readers]
                      └── MDT clean: <x>.clean.requested → .inflight → <x>_<d>.clean ──┘
    MDT timeline     00…0 t1 t2 c1 t3 … │ c3 t9 t10 …
                     └── archived ──────┘ stops before: the last MDT compaction, the data table's
                                          first active commit and first pending instant, the MDT
                                          clean's earliestInstantToRetain, the last min+1 instants

**Clean** (`HoodieBackedTableMetadataWriter.cleanIfNecessary`): only once at least 3 MDT instants
follow the last full MDT compaction (by begin time, the deltacommit about to be written included, as upstream
counts after it; upstream's grace for readers that opened the previous slice just before the compaction), with the data table's policy scaled as the newest upstream's
`HoodieMetadataWriteUtils.createMetadataWriteConfig` scales it: KEEP_LATEST_COMMITS keeps
max(`HoodieMetadataConfig.DEFAULT_METADATA_CLEANER_COMMITS_RETAINED` = 20, 1.2 × the data table's
`hoodie.cleaner.commits.retained`) MDT commits; KEEP_LATEST_FILE_VERSIONS keeps ⌈1.2 × n⌉ versions.
`hoodie.metadata.cleaner.commits.retained` (upstream 0.x's option) overrides it with KEEP_LATEST_COMMITS.
The plan is the data cleaner's (`services/clean_plan.py`) run on the MDT as a table: it never names a
file of the latest slices, which are all any reader of the MDT reads, so a kill at any point leaves
readers unaffected; a pending MDT clean is finished by the next MDT write before anything else
(deleting a file twice is harmless), as an MDT compaction must not start over a pending instant.

**Archive** (`HoodieTimelineArchiver`, the metadata-table branch): the MDT keeps the data table's
`hoodie.keep.min.commits` + 1 / `hoodie.keep.max.commits` + 1 completed instants, and archives a prefix
(by completion) that ends before (upstream) the data table's first active commit and first pending
instant (`TimelineUtils.getEarliestInstantForMetadataArchival`: an MDT deltacommit still named by the
data table's timeline stays, for `HoodieTableMetadataUtil.processRollbackMetadata`), the MDT clean's
earliestInstantToRetain and any pending MDT instant, and (lsm_lab) the latest completed full MDT compaction
(`last_compaction`: not one of the `files` partition alone, `mdt_write.compact_if_due`, which leaves the
other partitions' slices where they were):
lsm_lab's valid-instant rule (`mdt_listing.valid_instants`) reads the MDT's active timeline, so the
deltacommits of the logs in the latest slices must stay active.  Archived instants go to the MDT's
LSM timeline (`.hoodie/metadata/.hoodie/timeline/history/`, `timeline/archive.py`) before their
active files are removed, as the data table's archival does (`services/archiver.py`).

Simplified compared with Apache Hudi: no KEEP_LATEST_BY_HOURS; the clean and archive times come from
the data table's clock (upstream: the data instant's time with a `002` suffix); the three services run
before the instant's MDT deltacommit (upstream: after it); the clean deletes one file per request on an
object store (no bulk DELETE).

The other direction is upstream's too: the data table's archival (`services/archiver.py`) stops before
the MDT's latest full compaction (`data_archival_barrier`), so every MDT log block still in a latest slice
keeps its data instant active.

Taught in: notebooks/14_metadata_table.ipynb (and docs/FORMAT.md, "The metadata table (write)")
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import Any

from lsm_lab.errors import CorruptTableError, InputError
from lsm_lab.format import naming
from lsm_lab.services import clean_plan
from lsm_lab.storage import TablePath, list_names, paths
from lsm_lab.table.state import TableState
from lsm_lab.timeline.active import ActiveTimeline
from lsm_lab.timeline.archive import DEFAULT_BATCH, PLAN_STATES, ArchivedTimeline
from lsm_lab.timeline.config import TableConfig, read_config
from lsm_lab.timeline.instant import (
    CLEAN,
    COMMIT,
    COMPACTION,
    DELTA_COMMIT,
    REPLACE_COMMIT,
    SAVEPOINT,
    Instant,
    State,
    file_name_for,
    normalize_time,
    parse_file_name,
)

#: upstream 0.x `HoodieMetadataConfig.CLEANER_COMMITS_RETAINED`; lsm_lab: an override of the derived retention
PROP_RETAINED = "hoodie.metadata.cleaner.commits.retained"
#: `HoodieMetadataConfig.DEFAULT_METADATA_CLEANER_COMMITS_RETAINED`
DEFAULT_RETAINED = 20
#: `cleanIfNecessary`: completed MDT instants after the last MDT compaction before its clean may run
GRACE_INSTANTS = 3
#: commit actions of the data table that pin MDT archival (`getCommitsTimeline`)
_COMMITS = (COMMIT, DELTA_COMMIT, REPLACE_COMMIT, "clustering")


def clean_policy(data_props: Mapping[str, str]) -> tuple[str, int]:
    """(policy, retained) of the MDT's cleaner, from the data table's (module docstring)."""
    override = data_props.get(PROP_RETAINED)
    if override not in (None, ""):
        try:
            n = int(str(override))
        except ValueError:
            raise InputError(f"{PROP_RETAINED}={override!r} is not an integer") from None
        if n < 1:
            raise InputError(f"{PROP_RETAINED} must be at least 1 (got {n})")
        return clean_plan.KEEP_LATEST_COMMITS, n
    policy, n = clean_plan.resolve_policy(data_props, None, None)
    if policy == clean_plan.KEEP_LATEST_COMMITS:
        return policy, max(DEFAULT_RETAINED, int(n * 1.2))
    return policy, math.ceil(n * 1.2)


#: extraMetadata key of an MDT compaction that took in only some partitions (`mdt_write.compact_if_due`'s early
#: compaction of `files`): its value names them.  A compaction without it took in every partition (a full one).
PARTIAL_KEY = "lsm_lab.mdt.compacted.partitions"
#: completed compaction file → whether it was partial (instant files are written once, never rewritten)
_PARTIAL: dict[str, bool] = {}


def is_partial(timeline: ActiveTimeline, inst: Instant) -> bool:
    """Whether completed MDT compaction `inst` took in only some partitions (one GET, once per process)."""
    key = str(timeline.folder / inst.file_name)
    known = _PARTIAL.get(key)
    if known is None:
        extra = timeline.read_content(inst).get("extraMetadata") or {}
        known = bool(extra.get(PARTIAL_KEY))
        if len(_PARTIAL) > 100_000:
            _PARTIAL.clear()
        _PARTIAL[key] = known
    return known


def last_compaction(timeline: ActiveTimeline, instants: list[Instant], *, full: bool = True) -> Instant | None:
    """The latest completed MDT compaction; with `full`, the latest that took in every partition — the one
    where every latest slice of every partition starts (or later), which the barriers of the clean, the MDT's
    archival and the data table's archival need.  Reads back from the newest compaction until a full one."""
    done = sorted((i for i in instants if i.is_completed and i.action in (COMMIT, COMPACTION)),
                  key=lambda i: i.begin_time, reverse=True)
    for inst in done:
        if not full or not is_partial(timeline, inst):
            return inst
    return None


def resume_cleans(folder: TablePath, timeline: ActiveTimeline) -> list[Instant]:
    """Finish the MDT cleans a killed writer left pending (their plans name only old slices)."""
    return [_run(folder, timeline, inst) for inst in timeline.pending() if inst.action == CLEAN]


def clean_if_due(base_path: TablePath, data_config: TableConfig, folder: TablePath) -> Instant | None:
    """Plan and run an MDT clean when due (module docstring); None when there is nothing to delete."""
    mdt = TableState(folder, read_config(folder))
    timeline = mdt.active_timeline
    instants = timeline.instants()
    if any(not i.is_completed for i in instants):
        return None
    # upstream's grace counts from upstream's compaction, a full one: by begin time the deltacommit written with
    # a compaction of `files` alone begins before it, so with that compaction every 2 writes the grace would
    # never pass; the previous `files` slice is kept by the retention (20 MDT commits by default)
    last = last_compaction(timeline, instants)
    if last is None:  # one slice per file group: nothing is old yet
        return None
    # upstream counts after the instant's deltacommit; lsm_lab runs before it, so that one counts as well
    if sum(1 for i in instants if i.begin_time > last.begin_time) + 1 < GRACE_INSTANTS:
        return None
    policy, retained = clean_policy(data_config.props)
    if _nothing_new(timeline, instants, policy, retained):
        return None
    plan = clean_plan.plan_clean(mdt, policy, retained)
    if not clean_plan.files_in_plan(plan):
        return None
    begin = ActiveTimeline(base_path, data_config).new_instant_time()
    return _run(folder, timeline, timeline.request(CLEAN, plan, begin_time=begin))


def _nothing_new(timeline: ActiveTimeline, instants: list[Instant], policy: str, retained: int) -> bool:
    """True when a KEEP_LATEST_COMMITS plan certainly finds nothing the last MDT clean left: a slice stops
    being read once the next slice's compaction completed at or before the oldest retained commit, so files
    become cleanable only when that commit passes a compaction.  Saves the plan (a listing and one view per
    retained commit) in most writes; any doubt (no clean yet, its retention archived) plans."""
    if policy != clean_plan.KEEP_LATEST_COMMITS:
        return False
    cleans = [i for i in instants if i.action == CLEAN and i.is_completed]
    writes = [i for i in instants if i.is_completed and i.action in (DELTA_COMMIT, COMMIT, COMPACTION)]
    if not cleans:
        return len(writes) <= retained
    if len(writes) <= retained:
        return True
    done = {i.begin_time: normalize_time(i.completion_time or i.begin_time) for i in writes}
    earliest = (timeline.read_content(cleans[-1], State.REQUESTED).get("earliestInstantToRetain") or {}).get("timestamp")
    if not earliest or str(earliest) not in done:
        return False
    lo, hi = done[str(earliest)], done[writes[-retained].begin_time]
    return not any(i.action in (COMMIT, COMPACTION) and lo < done[i.begin_time] <= hi for i in writes)


def _run(folder: TablePath, timeline: ActiveTimeline, inst: Instant) -> Instant:
    """Delete a pending MDT clean's files and complete it (a `HoodieCleanMetadata`)."""
    started = time.monotonic()
    inflight = timeline.start(inst) if inst.state is State.REQUESTED else inst
    plan = timeline.read_content(inflight, State.REQUESTED)
    source = timeline.folder / file_name_for(inflight.begin_time, CLEAN, State.REQUESTED,
                                             timeline_layout=timeline.config.timeline_layout)
    deleted: dict[str, list[str]] = {}
    for partition, entries in (plan.get("filePathsToBeDeletedPerPartition") or {}).items():
        for entry in entries:
            rel = str(entry.get("filePath") or "")
            path = paths.inside(folder, rel, field="filePath", file=source)  # the path guard
            if naming.parse(path.name) is None:  # an MDT base file or log, nothing else
                raise CorruptTableError(f"{rel!r} is not a metadata table file name", field="filePath", path=source)
            paths.unlink(path, missing_ok=True)  # an earlier attempt may have got it
            deleted.setdefault(str(partition), []).append(rel)
    meta = clean_plan.completed_metadata(inflight.begin_time, time.monotonic() - started, plan, deleted)
    return timeline.complete(inflight, meta)


# ------------------------------------------------------------------------------------- archival
def _int(props: Mapping[str, str], key: str, default: int) -> int:
    try:
        return max(1, int(props.get(key) or default))
    except ValueError:
        return default


def archive_barriers(data: TableState, mdt: TableState) -> dict[str, str]:
    """The times the MDT's archival must stay below, by reason (module docstring)."""
    out: dict[str, str] = {}
    data_instants = data.active_timeline.instants()
    commits = [i.begin_time for i in data_instants if i.action in _COMMITS]
    if commits:
        out["data table's first active commit"] = min(map(normalize_time, commits))
    pending = [i.begin_time for i in data_instants if not i.is_completed]
    if pending:
        out["data table's first pending instant"] = min(map(normalize_time, pending))
    timeline = mdt.active_timeline
    mine = timeline.instants()
    mdt_pending = [i.begin_time for i in mine if not i.is_completed]
    if mdt_pending:
        out["pending MDT instant"] = min(map(normalize_time, mdt_pending))
    last = last_compaction(timeline, mine)
    out["latest MDT compaction"] = normalize_time(last.begin_time) if last is not None else ""
    cleans = timeline.completed([CLEAN])
    if cleans:
        earliest = (timeline.read_content(cleans[-1], State.REQUESTED).get("earliestInstantToRetain") or {})
        if earliest.get("timestamp"):
            out["MDT clean retention"] = normalize_time(str(earliest["timestamp"]))
    return out


def archive_if_due(base_path: TablePath, data_config: TableConfig, folder: TablePath) -> list[Instant]:
    """Archive the MDT's oldest completed instants when more than the data table's `hoodie.keep.max.commits`
    + 1 are active, down to `hoodie.keep.min.commits` + 1, never past a barrier; returns the archived ones."""
    mdt = TableState(folder, read_config(folder))
    history = ArchivedTimeline(folder, mdt.config)
    if not history.supported:
        return []
    keep_min = _int(data_config.props, "hoodie.keep.min.commits", 20) + 1
    keep_max = max(keep_min, _int(data_config.props, "hoodie.keep.max.commits", 30) + 1)
    timeline = mdt.active_timeline
    completed = timeline.completed()
    if len(completed) <= keep_max:
        return []
    limits = archive_barriers(TableState(base_path, data_config), mdt)
    chosen: list[Instant] = []
    for inst in completed[:len(completed) - keep_min]:
        begin = normalize_time(inst.begin_time)
        done = normalize_time(inst.completion_time or inst.begin_time)
        if inst.action == SAVEPOINT or any(begin >= t or done >= t for t in limits.values()):
            break
        chosen.append(inst)
    if not chosen:
        return []
    rows = []
    for inst in chosen:
        plan = b""
        for state in PLAN_STATES.get(inst.action, ()):
            path = timeline.folder / file_name_for(inst.begin_time, inst.action, state,
                                                   timeline_layout=mdt.config.timeline_layout)
            plan = (path.read_bytes() if path.exists() else b"") or plan
        rows.append({"instantTime": inst.begin_time, "completionTime": inst.completion_time, "action": inst.action,
                     "metadata": (timeline.folder / inst.file_name).read_bytes(), "plan": plan or None})
    history.append(rows)  # the commit point: from here the instants are in both
    names = list_names(timeline.folder)
    rank = {State.REQUESTED: 0, State.INFLIGHT: 1, State.COMPLETED: 2}  # never looks pending
    gone = {i.begin_time for i in chosen}
    doomed = sorted((rank[p[2]], name) for name in names
                    if (p := parse_file_name(name)) is not None and p[0] in gone)
    for _, name in doomed:
        paths.unlink(timeline.folder / name, missing_ok=True)
    history.compact(_int(data_config.props, "hoodie.timeline.compaction.batch.size", DEFAULT_BATCH))
    return chosen


def data_archival_barrier(base_path: TablePath, data_config: TableConfig) -> str | None:
    """Where the data table's own archival must stop for its MDT (upstream `HoodieTimelineArchiver`: "limiting
    archiving of instants to latest compaction on metadata table"): the begin time of the MDT's latest
    completed FULL compaction (`last_compaction`), "" when it has none (nothing is archived), None when the
    table has no MDT."""
    folder = base_path / ".hoodie" / "metadata"
    declared = [p.strip() for p in data_config.props.get("hoodie.table.metadata.partitions", "").split(",")]
    if "files" not in declared or not (folder / ".hoodie" / "hoodie.properties").exists():
        return None
    timeline = ActiveTimeline(folder, read_config(folder))
    last = last_compaction(timeline, timeline.instants())
    return normalize_time(last.begin_time) if last is not None else ""


def view_files(folder: TablePath) -> dict[str, list[str]]:
    """MDT partition → its file names on disk (tests and `show`: what the MDT clean left)."""
    out: dict[str, list[str]] = {}
    for name in list_names(folder):
        if name.startswith(".") or not (folder / name).is_dir():
            continue
        out[name] = sorted(f for f in list_names(folder / name) if naming.parse(f) is not None)
    return out


def describe(data_props: Mapping[str, str]) -> dict[str, Any]:
    """The MDT services' settings for a data table's properties (policy, retention, archival bounds)."""
    policy, retained = clean_policy(data_props)
    keep_min = _int(data_props, "hoodie.keep.min.commits", 20) + 1
    return {"clean_policy": policy, "retained": retained, "keep_min": keep_min,
            "keep_max": max(keep_min, _int(data_props, "hoodie.keep.max.commits", 30) + 1),
            "grace_instants": GRACE_INSTANTS}


__all__ = ["DEFAULT_RETAINED", "GRACE_INSTANTS", "PARTIAL_KEY", "PROP_RETAINED", "archive_barriers", "archive_if_due",
           "clean_if_due", "clean_policy", "data_archival_barrier", "describe", "is_partial", "last_compaction",
           "resume_cleans", "view_files"]
