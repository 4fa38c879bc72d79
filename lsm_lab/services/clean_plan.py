"""Planning a clean: which files no retained read can need any more (the policy, and the plan).

    policy + retention ──► retained read times ──► files each of those snapshots reads
                                                   (+ savepoints, pending writers, pending plans)
    every other completed data file ──► HoodieCleanerPlan.filePathsToBeDeletedPerPartition

`services/clean.py` runs the plan on a data table (an instant, heartbeats, the metadata table
updated first); `services/mdt_services.py` runs it on the metadata table itself, whose own
file groups age the same way.  Kept apart from the runner because the metadata table's writer
(`services/mdt_write.py`) uses it, and the runner itself updates the metadata table.

Simplified compared with Apache Hudi: see `services/clean.py` (no KEEP_LATEST_BY_HOURS, no
incremental planning).

Taught in: notebooks/12_object_storage.ipynb
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from lsm_lab import checks
from lsm_lab.errors import InputError
from lsm_lab.filegroup import fsview
from lsm_lab.filegroup.planner import pending_plans
from lsm_lab.storage import TablePath
from lsm_lab.table.state import TableState
from lsm_lab.timeline.instant import (
    CLUSTERING,
    COMPACTION,
    LOG_COMPACTION,
    REPLACE_COMMIT,
    Instant,
    normalize_time,
)

KEEP_LATEST_COMMITS = "KEEP_LATEST_COMMITS"
KEEP_LATEST_FILE_VERSIONS = "KEEP_LATEST_FILE_VERSIONS"
POLICIES = (KEEP_LATEST_COMMITS, KEEP_LATEST_FILE_VERSIONS)
PLAN_VERSION = 2


def _setting(props: Mapping[str, str], names: Iterable[str], default: str) -> str:
    for name in names:
        value = props.get(name)
        if value not in (None, ""):
            return str(value)
    return default


def _positive(value: Any, what: str) -> int:
    try:
        n = int(value)
    except (TypeError, ValueError):
        raise InputError(f"{what} must be an integer, not {value!r}") from None
    if n < 1:
        raise InputError(f"{what} must be at least 1 (got {n})")
    return n


def resolve_policy(props: Mapping[str, str], policy: str | None, retained: int | None) -> tuple[str, int]:
    """(policy, how many commits/versions to keep) from the arguments or the table properties."""
    if retained is not None:
        checks.int_arg(retained, "retained", minimum=1)
    if policy is not None:
        checks.str_arg(policy, "policy")
    chosen = (policy or _setting(props, ("hoodie.clean.policy", "hoodie.cleaner.policy"),
                                 KEEP_LATEST_COMMITS)).upper()
    aliases = {"COMMITS": KEEP_LATEST_COMMITS, "FILE_VERSIONS": KEEP_LATEST_FILE_VERSIONS,
               "VERSIONS": KEEP_LATEST_FILE_VERSIONS}
    chosen = aliases.get(chosen, chosen)
    if chosen not in POLICIES:
        raise InputError(f"unknown cleaning policy {chosen!r}; choose one of {', '.join(POLICIES)}")
    if retained is None:
        if chosen == KEEP_LATEST_COMMITS:
            retained = _positive(_setting(props, ("hoodie.clean.commits.retained", "hoodie.cleaner.commits.retained"),
                                          "10"), "hoodie.cleaner.commits.retained")
        else:
            retained = _positive(_setting(props, ("hoodie.clean.fileversions.retained",
                                                  "hoodie.cleaner.fileversions.retained"), "3"),
                                 "hoodie.cleaner.fileversions.retained")
    return chosen, _positive(retained, "retained")


# --------------------------------------------------------------------------- what is needed
class Views:
    """File-system views of one table listing at any read time."""

    def __init__(self, table: TableState) -> None:
        self.table = table
        self.sized = table.data_files()  # the MDT's or a listing's, with sizes: no HEAD per file
        self.files = [(p, path, name) for p, path, name, _ in self.sized]
        self.writes = table.completed_writes()
        self.completion = {i.begin_time: i.completion_time or i.begin_time for i in self.writes}
        self.compactions = {i.begin_time for i in self.writes if i.action in (COMPACTION, LOG_COMPACTION)}
        self.replacing = [i for i in self.writes if i.action in (REPLACE_COMMIT, CLUSTERING)]

    def groups(self, read_time: str | None) -> list[fsview.FileGroup]:
        limit = normalize_time(read_time) if read_time else None
        cmap = {b: c for b, c in self.completion.items() if limit is None or normalize_time(c) <= limit}
        replaced = fsview.replaced_file_groups([i for i in self.replacing if i.begin_time in cmap],
                                               self.table.instant_metadata)
        return fsview.build_file_groups(
            self.table.path, cmap, read_time=read_time, replaced=replaced, files=self.sized,
            v1_logs_by_base_instant=self.table.config.version < 8,
            compaction_instants=self.compactions & cmap.keys(),
            log_compactions=self.table.log_compactions(i for i in self.writes if i.begin_time in cmap))

    def snapshot_files(self, read_time: str | None) -> set[TablePath]:
        return {f.path for g in self.groups(read_time) for f in g.latest.files}


def plan_clean(table: TableState, policy: str, retained: int, *, views: Views | None = None) -> dict[str, Any]:
    """A `HoodieCleanerPlan` dict: the files the policy lets go (possibly none); `views`: of a listing made
    by the caller (else one is made)."""
    views = views if views is not None else Views(table)
    writes = views.writes
    needed = views.snapshot_files(None)
    earliest: Instant | None = None
    if policy == KEEP_LATEST_COMMITS:
        if len(writes) <= retained:
            return _plan({}, policy, None, writes)
        kept = writes[-retained:]
        earliest = kept[0]
        for inst in kept:
            needed |= views.snapshot_files(inst.completion_time)
    else:
        for g in views.groups(None):
            for fs in g.slices[-retained:]:
                needed |= {f.path for f in fs.files}
    for sp in table.savepoints():
        needed |= views.snapshot_files(str(sp["savepointedCompletionTime"]))
        for partition, files in (sp.get("files") or {}).items():
            needed |= {(table.path / partition / n) if partition else table.path / n for n in files}
    for inst in table.active_timeline.pending():  # what a writer still at work read when it began
        if inst.is_write:
            before = [c for c in views.completion.values() if normalize_time(c) < normalize_time(inst.begin_time)]
            if before:
                needed |= views.snapshot_files(max(before, key=normalize_time))
    for _, plan in pending_plans(table.active_timeline):
        for op in plan.operations:
            folder = table.path / op.partition if op.partition else table.path
            needed |= {folder / n for n in ([op.base_file] if op.base_file else []) + list(op.log_files)}
    per_block = table.config.version < 8
    doomed: dict[str, list[dict[str, Any]]] = {}
    for partition, path, name in views.files:
        if path in needed or name.instant not in views.completion:
            continue
        if per_block and name.is_log and name.log_format == 1:
            continue  # version-6 logs are named by their base instant; never guess about them
        rel = f"{partition}/{path.name}" if partition else path.name
        doomed.setdefault(partition, []).append({"filePath": rel, "isBootstrapBaseFile": False})
    return _plan(doomed, policy, earliest, writes)


def _plan(doomed: dict[str, list[dict[str, Any]]], policy: str, earliest: Instant | None,
          writes: list[Instant]) -> dict[str, Any]:
    return {
        "earliestInstantToRetain": None if earliest is None else {
            "timestamp": earliest.begin_time, "action": earliest.action, "state": "COMPLETED"},
        "lastCompletedCommitTimestamp": writes[-1].completion_time if writes else None,
        "policy": policy,
        "filesToBeDeletedPerPartition": None,
        "filePathsToBeDeletedPerPartition": {p: sorted(v, key=lambda e: e["filePath"]) for p, v in doomed.items()},
        "partitionsToBeDeleted": [],
        "version": PLAN_VERSION,
    }


def completed_metadata(begin_time: str, seconds: float, plan: Mapping[str, Any], deleted: Mapping[str, list[str]],
                       failed: Mapping[str, list[str]] | None = None) -> dict[str, Any]:
    """A completed clean's metadata (upstream `HoodieCleanMetadata`): what `plan` deleted per partition, and failed."""
    failed = failed or {}
    earliest = (plan.get("earliestInstantToRetain") or {}).get("timestamp")
    return {
        "startCleanTime": begin_time,
        "timeTakenInMillis": int(seconds * 1000),
        "totalFilesDeleted": sum(len(v) for v in deleted.values()),
        "earliestCommitToRetain": earliest or "",
        "lastCompletedCommitTimestamp": plan.get("lastCompletedCommitTimestamp") or "",
        "partitionMetadata": {p: {"partitionPath": p, "policy": plan.get("policy"), "deletePathPatterns": [],
                                  "successDeleteFiles": list(deleted.get(p, [])),
                                  "failedDeleteFiles": list(failed.get(p, [])), "isPartitionDeleted": False}
                              for p in sorted(set(deleted) | set(failed))},
        "version": PLAN_VERSION,
    }


def files_in_plan(plan: Mapping[str, Any]) -> list[str]:
    return [e["filePath"] for entries in (plan.get("filePathsToBeDeletedPerPartition") or {}).values()
            for e in entries]


__all__ = ["KEEP_LATEST_COMMITS", "KEEP_LATEST_FILE_VERSIONS", "PLAN_VERSION", "POLICIES", "Views", "files_in_plan",
           "plan_clean", "resolve_policy"]
