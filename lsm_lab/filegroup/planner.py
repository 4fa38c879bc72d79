"""The compaction planner: per file group, FULL compaction, LOG compaction, or nothing yet.

RFC-103's hybrid strategy looks at each file group's latest slice and picks
the cheaper way to keep it healthy:

    latest slice of a file group        L1 base: B bytes    L0 logs: n files, L bytes
                                                   │
       n == 0 ─────────────────────────────────────┼──► nothing to do
       no base, or B < small base (100 MiB) ───────┼──► FULL   rewrite base + logs → new base (L0+L1 → L1)
       L >= ratio x B  (ratio 0.5) ────────────────┼──► FULL   the logs are a big part of the group
       L >= total log size threshold (512 MiB) ────┼──► FULL
       n >= log file count threshold (4) ──────────┼──► LOG    many small logs → one log (L0 → L0)
       otherwise ──────────────────────────────────┴──► nothing yet

A big base with a few small logs is left alone; a big base with *many* small
logs gets a cheap log compaction (the base is not rewritten); anything where
the logs weigh on the base gets a full compaction.  `strategy="full"` and
`strategy="log"` force one kind for every file group with something to do.

The plan is saved on the timeline before any data file is written (`<t>.compaction.requested`,
or `<t>.logcompaction.requested` for a log-only plan), as Hudi's `HoodieCompactionPlan`
Avro record (timeline/avro_models.py), plus an `operationType` per operation; as a dict:

    {"version": 3,
     "operations": [{"partitionPath": "city=chennai", "fileId": "00000001-…-0",
                     "baseInstantTime": "20261122001500123",
                     "dataFilePath": "00000001-…_0-0-0_20261122001500123.parquet",   (null: no base)
                     "deltaFilePaths": ["00000001-…_0-0-0_20261122001600456_1.parquet", ...],
                     "operationType": "FULL",                          FULL | LOG
                     "metrics": {"TOTAL_LOG_FILES": 2, "TOTAL_LOG_FILES_SIZE": 4096, "BASE_FILE_SIZE": 9000},
                     "reason": "small base (9000 B < 104857600 B)"}],
     "extraMetadata": {"lsm_lab.strategy": "hybrid", "lsm_lab.merge": "sorted"}}

File paths are names relative to the partition folder, as in Hudi's plans;
`deltaFilePaths` are in merge order.  File groups named by a pending plan are
left out of the next one.

Thresholds (hoodie.properties, or options passed to `Table.compact`):

    hoodie.compaction.hybrid.log.file.num.threshold        4
    hoodie.compaction.hybrid.log.total.size.threshold      536870912   (bytes)
    hoodie.parquet.small.file.limit                        104857600   (bytes; Hudi's small-file limit)
    hoodie.compaction.hybrid.log.to.base.ratio             0.5

Simplified compared with Apache Hudi: RFC-103 names the FULL/LOG split but no
config keys, so the `hoodie.compaction.hybrid.*` keys are lsm_lab's; no
compaction strategies by partition, date or IO budget; plan version 3 is
lsm_lab's marker for "operations carry an operationType".

Taught in: notebooks/07_compaction.ipynb
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from lsm_lab.errors import CorruptFileError, InputError, TimelineError
from lsm_lab.filegroup.fsview import FileSlice
from lsm_lab.timeline.active import ActiveTimeline
from lsm_lab.timeline.instant import COMPACTION, LOG_COMPACTION, Instant, State

FULL = "FULL"
LOG = "LOG"
OPERATION_TYPES = (FULL, LOG)
STRATEGIES = ("hybrid", "full", "log")
PLAN_VERSION = 3

KEY_LOG_FILE_NUM = "hoodie.compaction.hybrid.log.file.num.threshold"
KEY_LOG_TOTAL_SIZE = "hoodie.compaction.hybrid.log.total.size.threshold"
KEY_SMALL_BASE = "hoodie.parquet.small.file.limit"
KEY_RATIO = "hoodie.compaction.hybrid.log.to.base.ratio"
PLANNER_KEYS = (KEY_LOG_FILE_NUM, KEY_LOG_TOTAL_SIZE, KEY_SMALL_BASE, KEY_RATIO)


@dataclass(frozen=True)
class PlannerConfig:
    """The hybrid planner's thresholds."""

    log_file_num: int = 4
    log_total_bytes: int = 512 * 1024 * 1024
    small_base_bytes: int = 100 * 1024 * 1024
    ratio: float = 0.5

    @classmethod
    def from_props(cls, props: Mapping[str, str]) -> PlannerConfig:
        def num(key: str, default: float, kind: type) -> Any:
            raw = props.get(key)
            if raw is None or raw == "":
                return default
            try:
                value = kind(raw)
            except ValueError:
                raise InputError(f"{key}={raw!r} is not a number") from None
            if value < 0:
                raise InputError(f"{key} must not be negative (got {raw})")
            return value

        return cls(log_file_num=num(KEY_LOG_FILE_NUM, cls.log_file_num, int),
                   log_total_bytes=num(KEY_LOG_TOTAL_SIZE, cls.log_total_bytes, int),
                   small_base_bytes=num(KEY_SMALL_BASE, cls.small_base_bytes, int),
                   ratio=num(KEY_RATIO, cls.ratio, float))


@dataclass(frozen=True)
class Operation:
    """One file group's share of a plan (Hudi's `HoodieCompactionOperation` + `operationType`)."""

    partition: str
    file_id: str
    base_instant: str
    base_file: str | None
    log_files: tuple[str, ...]
    operation_type: str
    metrics: Mapping[str, float] = field(default_factory=dict)
    reason: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"partitionPath": self.partition, "fileId": self.file_id, "baseInstantTime": self.base_instant,
                "dataFilePath": self.base_file, "deltaFilePaths": list(self.log_files),
                "operationType": self.operation_type, "metrics": dict(self.metrics), "reason": self.reason}

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> Operation:
        op_type = str(raw.get("operationType") or FULL).upper()
        if op_type not in OPERATION_TYPES:
            raise TimelineError(f"compaction operation of unknown type {op_type!r}")
        return cls(partition=str(raw.get("partitionPath") or ""), file_id=str(raw["fileId"]),
                   base_instant=str(raw.get("baseInstantTime") or ""),
                   base_file=raw.get("dataFilePath") or None,
                   log_files=tuple(raw.get("deltaFilePaths") or ()), operation_type=op_type,
                   metrics=dict(raw.get("metrics") or {}), reason=str(raw.get("reason") or ""))


@dataclass(frozen=True)
class CompactionPlan:
    """A whole plan: the operations, and how it was made."""

    operations: tuple[Operation, ...]
    strategy: str = "hybrid"
    merge: str | None = None
    version: int = PLAN_VERSION

    @property
    def action(self) -> str:
        """`logcompaction` for a log-only plan of the `log` strategy, `compaction` otherwise."""
        return LOG_COMPACTION if self.strategy == "log" else COMPACTION

    @property
    def file_groups(self) -> set[tuple[str, str]]:
        return {(op.partition, op.file_id) for op in self.operations}

    def to_json(self) -> dict[str, Any]:
        extra = {"lsm_lab.strategy": self.strategy}
        if self.merge:
            extra["lsm_lab.merge"] = self.merge
        return {"version": self.version, "operations": [op.to_json() for op in self.operations],
                "extraMetadata": extra}

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> CompactionPlan:
        extra = raw.get("extraMetadata") or {}
        ops = tuple(Operation.from_json(o) for o in raw.get("operations") or ())
        return cls(operations=ops, strategy=str(extra.get("lsm_lab.strategy") or "hybrid"),
                   merge=extra.get("lsm_lab.merge") or None, version=int(raw.get("version") or 1))


def choose(fs: FileSlice, config: PlannerConfig, strategy: str = "hybrid", *,
           allow_log: bool = True) -> tuple[str | None, str]:
    """(FULL | LOG | None, why) for one latest file slice.

    `allow_log=False` (tables that write v1 logs, table version < 9): a log
    compaction would write a v2 log older readers cannot read, so LOG is never
    chosen — hybrid falls back to FULL or waits, strategy "log" does nothing.
    """
    op, why = _choose(fs, config, strategy)
    if op == LOG and not allow_log:
        if strategy == "log":
            return None, "log compaction writes v2 logs; this table writes v1 logs (table version < 9)"
        return None, f"{why}, but log compaction is off for v1-log tables"
    return op, why


def _choose(fs: FileSlice, config: PlannerConfig, strategy: str) -> tuple[str | None, str]:
    if strategy not in STRATEGIES:
        raise InputError(f"unknown compaction strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")
    logs = [f for f in fs.log_files if f.name.content != "cdc"]
    n = len(logs)
    total = sum(f.size for f in logs)
    base = fs.base_file.size if fs.base_file else 0
    if n == 0:
        return None, "no log files"
    if strategy == "full":
        return FULL, "strategy full"
    if strategy == "log":
        return (LOG, "strategy log") if n >= 2 else (None, "only one log file")
    if fs.base_file is None:
        return FULL, "no base file"
    if base < config.small_base_bytes:
        return FULL, f"small base ({base} B < {config.small_base_bytes} B)"
    if total >= config.ratio * base:
        return FULL, f"logs {total} B >= {config.ratio:g} x base {base} B"
    if total >= config.log_total_bytes:
        return FULL, f"logs {total} B >= {config.log_total_bytes} B"
    if n >= max(2, config.log_file_num):
        return LOG, f"{n} small logs on a large base"
    return None, f"{n} log(s), {total} B: not worth compacting yet"


def make_plan(slices: Iterable[FileSlice], *, strategy: str = "hybrid", merge: str | None = None,
              config: PlannerConfig | None = None,
              exclude: set[tuple[str, str]] = frozenset(),  # type: ignore[assignment]
              allow_log: bool = True) -> CompactionPlan:
    """The plan for the given latest slices (file groups in `exclude` are skipped)."""
    config = config or PlannerConfig()
    ops = []
    for fs in slices:
        if (fs.partition, fs.file_id) in exclude:
            continue
        op_type, reason = choose(fs, config, strategy, allow_log=allow_log)
        if op_type is None:
            continue
        logs = tuple(f.path.name for f in fs.log_files if f.name.content != "cdc")
        metrics = {"TOTAL_LOG_FILES": float(len(logs)),
                   "TOTAL_LOG_FILES_SIZE": float(sum(f.size for f in fs.log_files)),
                   "BASE_FILE_SIZE": float(fs.base_file.size if fs.base_file else 0)}
        ops.append(Operation(fs.partition, fs.file_id, fs.base_instant,
                             fs.base_file.path.name if fs.base_file else None, logs, op_type, metrics, reason))
    return CompactionPlan(tuple(ops), strategy, merge)


# --------------------------------------------------------------------------- plans on the timeline
def read_plan(timeline: ActiveTimeline, instant: Instant) -> CompactionPlan:
    """The plan stored in a (log) compaction's requested file."""
    if instant.action not in (COMPACTION, LOG_COMPACTION):
        raise InputError(f"{instant} is not a compaction")
    content = timeline.read_content(instant, State.REQUESTED)
    try:
        return CompactionPlan.from_json(content)
    except (TypeError, ValueError, KeyError, AttributeError) as exc:  # a field of the wrong kind
        raise CorruptFileError(f"compaction plan {instant.begin_time} is malformed: {type(exc).__name__}: {exc}",
                               path=timeline.folder) from None


def pending_plans(timeline: ActiveTimeline) -> list[tuple[Instant, CompactionPlan]]:
    """Every pending (requested or inflight) compaction and log compaction, oldest first."""
    return [(i, read_plan(timeline, i)) for i in timeline.pending() if i.action in (COMPACTION, LOG_COMPACTION)]


def pending_file_groups(timeline: ActiveTimeline) -> set[tuple[str, str]]:
    """File groups named by a pending plan (left out of the next plan)."""
    out: set[tuple[str, str]] = set()
    for _, plan in pending_plans(timeline):
        out |= plan.file_groups
    return out


def format_plan(instant: Instant | None, plan: CompactionPlan) -> str:
    """A plain-text dump of a plan, one line per operation (`instant` None: a dry run's plan, not saved)."""
    head = f"{instant.action} {instant.begin_time} [{instant.state.value}]" if instant else f"{plan.action} [dry run]"
    lines = [f"{head}  strategy={plan.strategy}"
             f"  merge={plan.merge or 'default'}  version={plan.version}  operations={len(plan.operations)}"]
    if not plan.operations:
        lines.append("  (no operations)")
    for op in plan.operations:
        where = f"{op.partition}/" if op.partition else ""
        m = op.metrics
        lines.append(f"  {op.operation_type:<4} {where}{op.file_id}  base@{op.base_instant or '—'} "
                     f"({int(m.get('BASE_FILE_SIZE', 0))} B) + {len(op.log_files)} log(s) "
                     f"({int(m.get('TOTAL_LOG_FILES_SIZE', 0))} B)  — {op.reason}")
    return "\n".join(lines)


def plan_json_text(plan: CompactionPlan) -> str:
    return json.dumps(plan.to_json(), indent=2, sort_keys=True)
