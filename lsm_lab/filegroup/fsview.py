"""The file-system view: partitions → file groups → file slices, as of a time.

    table
    └── partition  city=chennai
        └── file group  00000001-…-0            (one bucket / one key range of the table)
            ├── file slice @ 20261122001500123   (older version, kept for time travel)
            └── file slice @ 20261122003000456   (latest)
                ├── L1  base file   00000001-…_0-1-0_20261122003000456.parquet
                └── L0  log files   …_20261122003100001_1.parquet
                                    …_20261122003200002_1.delete.parquet   (completion order)

How the view is built (reader rules, format page section 6):

1. Keep only files whose instant completed at or before the read time (a file of
   an inflight, failed or rolled-back write is invisible).  v1 logs of table
   version 6 carry the *base* instant in their name: they are kept and their
   blocks are filtered by instant when read.
2. Drop file groups replaced by completed replacecommits/clusterings.
3. A base file opens a slice.  A log file joins the slice with the greatest base
   instant at or below the log's *completion* time (upstream's
   `HoodieFileGroup.getBaseInstantTime` compares with `GREATER_THAN_OR_EQUALS`):
   a log written while a compaction was pending lands in the slice that
   compaction will open, and is never lost.  Logs in a slice are ordered by
   completion time.
4. A compacted log (written by a log compaction) hides the logs of the
   instants it replaces in its file group, and takes the place of the latest of
   them: a log that completed while the log compaction ran stays after it.
   What it replaces is known from the timeline — the log compaction's plan
   lists the logs of each file group (`deltaFilePaths`, as upstream's
   `HoodieCompactionOperation`), passed in as `log_compactions=` — and, for a
   plan that can no longer be read, from the compacted log's footer header
   `COMPACTED_BLOCK_TIMES`.  Replacement is transitive *through the timeline*:
   once the cleaner deletes a compacted log that a later log compaction
   replaced, the logs the first one replaced stay hidden (their committed
   files are gone too, by design, and must not be reported missing).
5. Given the files the completed instants committed (`committed=`, from
   `timeline.committed`), a committed file missing from the listing takes its
   place like any file; if it lands in the latest slice of its file group,
   the view raises `CorruptTableError` naming the instant and the file (older
   slices lose files to the cleaner by design, and just drop it).
6. Given `committed=`, a listed file that no completed instant committed is not
   part of the table (Hudi's rule; a committed path that is not a data file name,
   or in a table lsm_lab wrote not one named with its instant's time, is a
   `CorruptTableError`: damaged metadata must not hide a file; so is, in such a
   table, an unlisted file named for a completed instant in a file group the
   commits know — the write stats that listed it were lost): a copied folder (`p=a_backup`), a file
   dropped in by hand or left by a crashed writer under a completed instant's
   time is ignored, and collected in `ignored=` for inspection to show.
   Partitions therefore come from the commits, not from the folder listing:
   a partition folder deleted by hand is a set of missing committed files
   (rule 5), never a silently smaller table.
7. Given `committed_sizes=` (tables lsm_lab wrote: every write stat records
   `fileSizeInBytes`), a listed file whose size differs from its committed
   size was replaced (two data files swapped, a file overwritten):
   `CorruptFileError` naming the file and both sizes.

8. Time travel to an instant time T (`as_of_instant=`; Spark's `as.of.instant`,
   hudi-rs's `with_as_of_timestamp`): the slices are cut from every completed
   instant (rule 3 against the whole timeline, as upstream's file-system view
   is built), each group keeps its slices with base instant <= T, and the
   last one keeps the logs of the completed instants begun at or before T.
   So a log whose write began before T but completed after a compaction
   begun after T belongs to that compaction's slice and is not seen at T —
   as in Spark and hudi-rs.  A completion-time read (`read_time=`) instead
   drops every instant completed after it and forms the slices of that
   smaller timeline: the table exactly as it was then.

CDC logs (`….cdc.parquet`, format/cdc.py) join slices by rule 3 but are kept
apart in `FileSlice.cdc_files`: they hold change history, not rows to merge.

Simplified compared with Apache Hudi: the view is rebuilt on every call from the
files it is given (`files=`: `TableState.data_files()`, the metadata table's
`files` partition or a folder listing; no incremental sync), and
bootstrap/external files are not supported.

Taught in: notebooks/01_build_a_table.ipynb, notebooks/07_compaction.ipynb
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from lsm_lab.errors import CorruptFileError, CorruptTableError
from lsm_lab.format import log_v2 as v2
from lsm_lab.format import naming
from lsm_lab.format.naming import FileName
from lsm_lab.storage import TablePath, list_names, paths, walk_sized
from lsm_lab.timeline.instant import (
    CLUSTERING,
    REPLACE_COMMIT,
    WRITE_ACTIONS,
    Instant,
    State,
    normalize_time,
    parse_file_name,
)


@dataclass(frozen=True)
class DataFile:
    """One base or log file on disk, with the instant facts the view attached to it."""

    partition: str
    path: TablePath
    name: FileName
    size: int
    # of the instant that wrote it ("" for v6 v1 logs: decided per block); for a compacted log,
    # that of the latest log it replaces (its place in the merge order, rule 4)
    completion_time: str
    # the instant whose commit metadata lists this file when the file is *not* on disk (rule 5)
    missing_from: str = ""

    @property
    def file_id(self) -> str:
        return self.name.file_id

    @property
    def instant(self) -> str:
        return self.name.instant

    @property
    def relative(self) -> str:
        return f"{self.partition}/{self.path.name}" if self.partition else self.path.name


@dataclass(frozen=True)
class FileSlice:
    """A base file (or none) plus the log files written on top of it, in completion order.

    CDC logs (`….cdc.parquet`, format/cdc.py) hold the slice's change history,
    not its rows: they are kept apart in `cdc_files` (same slice rule), counted in
    `files` (what the cleaner keeps or removes) but not in `log_files` or `size_bytes`.
    """

    partition: str
    file_id: str
    base_instant: str
    base_file: DataFile | None
    log_files: tuple[DataFile, ...] = ()
    cdc_files: tuple[DataFile, ...] = ()

    @property
    def files(self) -> tuple[DataFile, ...]:
        return ((self.base_file,) if self.base_file else ()) + self.log_files + self.cdc_files

    @property
    def size_bytes(self) -> int:
        return sum(f.size for f in ((self.base_file,) if self.base_file else ()) + self.log_files)

    def _repr_html_(self) -> str:
        base = self.base_file.path.name if self.base_file else "—"
        logs = "".join(f"<li><code>{f.path.name}</code></li>" for f in self.log_files)
        return (f"<div><b>file slice</b> {self.partition or '(root)'} / <code>{self.file_id}</code> "
                f"@ {self.base_instant}<br>L1 base: <code>{base}</code><br>L0 logs ({len(self.log_files)}):"
                f"<ul>{logs}</ul></div>")


@dataclass(frozen=True)
class FileGroup:
    partition: str
    file_id: str
    slices: tuple[FileSlice, ...] = field(default_factory=tuple)

    @property
    def latest(self) -> FileSlice:
        return self.slices[-1]


def list_data_files(base_path: TablePath) -> list[tuple[str, Path, FileName]]:
    """Every data file under the table folder (hidden folders like .hoodie skipped)."""
    return [(p, path, name) for p, path, name, _ in list_data_files_sized(base_path)]


def list_data_files_sized(base_path: TablePath) -> list[tuple[str, Path, FileName, int | None]]:
    """`list_data_files` with each file's size when the listing gives it (object stores: one LIST, no HEADs)."""
    out: list[tuple[str, Path, FileName, int | None]] = []
    for partition, fname, size in walk_sized(base_path):  # hidden folders (.hoodie) skipped
        parsed = naming.parse(fname)
        if parsed is not None:
            path = (base_path / partition / fname) if partition else base_path / fname
            out.append((partition, path, parsed, size))  # type: ignore[arg-type]  # (a StoragePath on a store)
    return out


FIRST_WRITE = ".lsm_lab_first_write"


def mark_first_write(base_path: TablePath) -> None:
    """Note that a first write is being tried (if it fails, the table may be created again: `abandoned_table`)."""
    paths.touch(base_path / ".hoodie" / FIRST_WRITE)  # never through a link out of the table


def abandoned_table(base_path: TablePath) -> bool:
    """Whether `base_path` holds an lsm_lab table that never got data: created, then its first write failed.

    True when a first write was tried (`FIRST_WRITE`), hoodie.properties
    says lsm_lab created it, the timeline holds no pending instant and no completed
    write, and there is no data file: creating the table again may then replace it
    (nothing can be lost).  A table nobody tried to write to stays protected.
    """
    meta = base_path / ".hoodie"
    if not (meta / FIRST_WRITE).is_file():
        return False
    try:
        text = (meta / "hoodie.properties").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    if "lsm_lab.created=true" not in text.splitlines():
        return False
    for folder in (meta, meta / "timeline"):
        for name in list_names(folder):
            parsed = parse_file_name(name)
            if parsed is not None and (parsed[2] is not State.COMPLETED or parsed[1] in WRITE_ACTIONS):
                return False
    return not list_data_files(base_path)


def list_partitions(base_path: TablePath) -> list[str]:
    return sorted({p for p, _, _ in list_data_files(base_path)})


def replaced_file_groups(instants: Iterable[Instant], metadata_of: Callable[[Instant], Any]) -> set[tuple[str, str]]:
    """(partition, file id) pairs replaced by completed replacecommits/clusterings."""
    out: set[tuple[str, str]] = set()
    for inst in instants:
        if inst.action in (REPLACE_COMMIT, CLUSTERING) and inst.is_completed:
            meta = metadata_of(inst)
            for partition, ids in (meta.get("partitionToReplaceFileIds") or {}).items():
                for fid in ids or []:
                    out.add((partition, fid))
    return out


def build_file_groups(
    base_path: TablePath,
    completion_of: Mapping[str, str],
    *,
    read_time: str | None,
    replaced: set[tuple[str, str]] = frozenset(),  # type: ignore[assignment]
    v1_logs_by_base_instant: bool = False,
    partitions: Iterable[str] | None = None,
    files: Sequence[tuple[Any, ...]] | None = None,
    compaction_instants: Collection[str] = (),
    committed: Mapping[tuple[str, str], str] | None = None,
    log_compactions: Mapping[str, Mapping[tuple[str, str], frozenset[str]]] | None = None,
    committed_sizes: Mapping[tuple[str, str], int] | None = None,
    ignored: list[DataFile] | None = None,
    own_files: bool = False,
    as_of_instant: str | None = None,
    visible: Collection[str] | None = None,
) -> list[FileGroup]:
    """Group the visible data files into file groups and slices.

    `completion_of` maps the begin time of every *completed* write instant to
    its completion time; `read_time` (a completion time) hides later instants.
    `as_of_instant` T cuts the view as upstream's time travel does (rule 8):
    slices are formed from every completed instant of `completion_of`, each
    group keeps its slices whose base instant is <= T, and the last of them
    keeps only the logs of the instants in `visible` (the completed writes
    begun at or before T).
    `compaction_instants` are the begin times of completed (log) compactions:
    their v2 logs are compacted logs (rule 4 of the module doc).
    `log_compactions` maps a completed log compaction's begin time to what its
    plan says it replaced: (partition, file id) → begin times of the logs.
    `committed_sizes` and `ignored`: rules 7 and 6.  `own_files` (a table lsm_lab wrote): every
    committed file must carry its instant's time in its name (a damaged write stat is an error).
    """
    wanted = None if partitions is None else set(partitions)
    limit = normalize_time(read_time) if read_time else None
    groups: dict[tuple[str, str], tuple[list[DataFile], list[DataFile]]] = {}
    seen: set[tuple[str, ...]] = set()
    known: set[tuple[str, ...]] | None = None
    if committed is not None:  # rule 6: what the completed instants committed
        known = set()
        for (p, fname), instant in committed.items():
            parsed = naming.parse(fname)
            if parsed is None and not fname and not own_files:
                continue  # a write stat without a path (another writer's): names nothing
            if parsed is None or (own_files and parsed.instant != instant
                                  and not (v1_logs_by_base_instant and parsed.is_log and parsed.log_format == 1)):
                # a damaged write stat would hide the file it should name (rule 6): stale rows, silently
                what = f"lists {(p + '/' if p else '') + fname!r}, which is not the name of a data file it wrote" \
                    if fname else "has a write stat without a path, or no partitionToWriteStats at all"
                raise CorruptTableError(f"instant {instant} {what} (its commit metadata is damaged)",
                                        path=base_path, field="partitionToWriteStats.path")
            known.add(_identity(p, parsed))
            known.add((p, parsed.file_id))  # the file group (rule 6 for v1 logs read block by block)
    for entry in (files if files is not None else list_data_files_sized(base_path)):
        partition, path, name = entry[0], entry[1], entry[2]
        listed_size = entry[3] if len(entry) > 3 else None
        if wanted is not None and partition not in wanted:
            continue
        if (partition, name.file_id) in replaced:
            continue
        per_block = v1_logs_by_base_instant and name.is_log and name.log_format == 1
        completion = completion_of.get(name.instant)
        if per_block:
            completion = ""  # decided block by block when the log is read
        elif completion is None or (limit is not None and normalize_time(completion) > limit):
            continue
        try:
            size = listed_size if listed_size is not None else path.stat().st_size
        except FileNotFoundError:  # removed by a concurrent cleaner between listing and stat
            continue
        df = DataFile(partition, path, name, size, completion)
        # a version-6 v1 log is appended to by later instants and by rollbacks (whose metadata lists it as
        # `rollbackLogFiles`), and its blocks are filtered by instant when read: it must be in a committed group
        if known is not None and ((partition, name.file_id) not in known if per_block
                                  else _identity(partition, name) not in known):
            if own_files and not per_block and (partition, name.file_id) in known:
                # named for a completed instant, in a group the commits know, yet listed by none: in a table
                # lsm_lab wrote that is a commit whose write stats were lost (its rows would silently vanish)
                raise CorruptTableError(f"{df.relative} is named for the completed instant {name.instant}, whose "
                                        "commit metadata does not list it (the metadata is damaged)",
                                        path=path, field="partitionToWriteStats")
            if ignored is not None:
                ignored.append(df)
            continue
        expected = None if committed_sizes is None else committed_sizes.get((partition, name.name))
        if expected is not None and expected != size and not per_block:
            raise CorruptFileError(f"{df.relative} is {size:,} bytes but its commit recorded {expected:,} "
                                   "(partitionToWriteStats.fileSizeInBytes): the file was replaced or swapped with "
                                   "another (its rows cannot be trusted)", path=path)
        bases, logs = groups.setdefault((partition, name.file_id), ([], []))
        (bases if name.is_base else logs).append(df)
        seen.add(_identity(partition, name))
    for (partition, fname), instant in (committed or {}).items():  # rule 5: committed files not on disk
        parsed = naming.parse(fname)
        if parsed is None or _identity(partition, parsed) in seen or (wanted is not None and partition not in wanted) \
                or (partition, parsed.file_id) in replaced:
            continue
        if parsed.content == "cdc":  # change history, not rows: read_cdc checks its own files
            continue
        per_block = v1_logs_by_base_instant and parsed.is_log and parsed.log_format == 1
        completion = "" if per_block else completion_of.get(parsed.instant)
        if completion is None or (limit is not None and completion and normalize_time(completion) > limit):
            continue
        df = DataFile(partition, base_path / partition / fname if partition else base_path / fname, parsed, 0,
                      completion, missing_from=instant)
        bases, logs = groups.setdefault((partition, parsed.file_id), ([], []))
        (bases if parsed.is_base else logs).append(df)

    out: list[FileGroup] = []
    for (partition, file_id), (bases, logs) in sorted(groups.items()):
        bases.sort(key=lambda f: normalize_time(f.instant))
        base_times = [normalize_time(b.instant) for b in bases]
        slice_logs: dict[int, list[DataFile]] = {i: [] for i in range(len(bases))}
        orphan: list[DataFile] = []  # logs older than every base (or no base at all)
        if compaction_instants:
            chains = {c: fgs[(partition, file_id)] for c, fgs in (log_compactions or {}).items()
                      if (partition, file_id) in fgs}
            logs = apply_compacted_logs(logs, completion_of, compaction_instants, chains)
        for log in logs:
            if log.completion_time == "":  # v6 v1 log: the name carries the base instant
                key = normalize_time(log.instant)
                idx = max((i for i, t in enumerate(base_times) if t <= key), default=-1)
            else:  # upstream's HoodieFileGroup.getBaseInstantTime: the greatest base instant <= the completion time
                key = normalize_time(log.completion_time)
                idx = max((i for i, t in enumerate(base_times) if t <= key), default=-1)
            (slice_logs[idx] if idx >= 0 else orphan).append(log)
        slices: list[FileSlice] = []
        if orphan:
            orphan.sort(key=_log_order)
            data, cdc = _split_cdc(orphan)
            slices.append(FileSlice(partition, file_id, (data or cdc)[0].instant, None, data, cdc))
        for i, base in enumerate(bases):
            data, cdc = _split_cdc(sorted(slice_logs[i], key=_log_order))
            slices.append(FileSlice(partition, file_id, base.instant, base, data, cdc))
        if as_of_instant is not None:
            slices = _cut_at_instant(slices, normalize_time(as_of_instant), visible)
        if committed is not None and slices:
            slices = _without_missing(slices)
        if slices:
            out.append(FileGroup(partition, file_id, tuple(slices)))
    return out


def _cut_at_instant(slices: list[FileSlice], limit: str, visible: Collection[str] | None) -> list[FileSlice]:
    """Rule 8: the slices of a group as a time-travel read to the instant time `limit` sees them.

    Upstream's `AbstractTableFileSystemView.getLatestMergedFileSlicesBeforeOrOn` keeps the slices
    whose base instant is <= T (`HoodieFileGroup.getAllFileSlicesBeforeOn`), and its log reader skips
    the blocks of instants after T; a v1 log read block by block (completion time "") is filtered
    by instant when read."""
    kept = [s for s in slices if normalize_time(s.base_instant) <= limit]
    if not kept or visible is None:
        return kept
    last = kept[-1]

    def seen(f: DataFile) -> bool:
        return f.completion_time == "" or f.instant in visible

    kept[-1] = replace(last, log_files=tuple(f for f in last.log_files if seen(f)),
                       cdc_files=tuple(f for f in last.cdc_files if seen(f)))
    if kept[-1].base_file is None and not kept[-1].log_files and not kept[-1].cdc_files:
        kept.pop()
    return kept


def _split_cdc(logs: list[DataFile]) -> tuple[tuple[DataFile, ...], tuple[DataFile, ...]]:
    """(data and delete logs, CDC logs), each in the given order."""
    return (tuple(f for f in logs if f.name.content != "cdc"), tuple(f for f in logs if f.name.content == "cdc"))


def _identity(partition: str, name: FileName) -> tuple[str, ...]:
    """What makes a file the one a commit listed (the same file in another name dialect or format is that file)."""
    if name.is_base:
        return (partition, "base", name.file_id, name.write_token, name.instant)
    return (partition, "log", name.file_id, name.write_token, name.instant, str(name.version), name.content)


MISSING_FIELD = "partitionToWriteStats.path"  # the `field` of rule 5's CorruptTableError


def _without_missing(slices: list[FileSlice]) -> list[FileSlice]:
    """Rule 5: a missing committed file in the latest slice is an error; older slices just drop it."""
    for f in slices[-1].files:
        if f.missing_from:
            # missing because its folder is a link out of the table? then say that (UnsafePathError):
            paths.check_folder(f.path)  # listings do not enter such a link (an object store has none)
            raise CorruptTableError(f"instant {f.missing_from} committed the file {f.relative}, which is missing "
                                    "from the table folder (deleted by hand? its rows would silently be lost)",
                                    path=f.path, field=MISSING_FIELD)
    out = []
    for s in slices[:-1]:
        if any(f.missing_from for f in s.files):
            base = None if s.base_file is not None and s.base_file.missing_from else s.base_file
            s = FileSlice(s.partition, s.file_id, s.base_instant, base, tuple(f for f in s.log_files
                                                                              if not f.missing_from), s.cdc_files)
        if s.base_file is not None or s.log_files or s.cdc_files:
            out.append(s)
    return [*out, slices[-1]]


def _log_order(f: DataFile) -> tuple[str, str, int, int]:
    # completion time first; then begin time and version (v1 logs of one base instant);
    # a delete log after a data log of the same instant.
    return (normalize_time(f.completion_time or f.instant), normalize_time(f.instant), f.name.version,
            1 if f.name.is_delete else 0)


# --------------------------------------------------------------------------- compacted logs
_HEADER_CACHE: dict[tuple[str, int], frozenset[str]] = {}


def compacted_block_times(f: DataFile) -> frozenset[str]:
    """The instants a compacted v2 log replaces (its footer's COMPACTED_BLOCK_TIMES), cached per file."""
    if f.missing_from:  # not on disk (rule 5): replaces nothing it could tell
        return frozenset()
    key = (str(f.path), f.size)
    hit = _HEADER_CACHE.get(key)
    if hit is not None:
        return hit

    try:
        header = v2.read_log_header(f.path)
    except FileNotFoundError:
        return frozenset()
    raw = header.get("COMPACTED_BLOCK_TIMES", "")
    times = frozenset(t.strip() for t in raw.split(",") if t.strip())
    if len(_HEADER_CACHE) > 4096:
        _HEADER_CACHE.clear()
    _HEADER_CACHE[key] = times
    return times


def apply_compacted_logs(logs: list[DataFile], completion_of: Mapping[str, str],
                          compaction_instants: Collection[str],
                          known: Mapping[str, frozenset[str]] | None = None) -> list[DataFile]:
    """Drop the logs replaced by visible compacted logs; move each compacted log to its place.

    A compacted log takes the place of the *latest* log it replaces, not its own
    completion time: a log that completed while the log compaction ran is newer
    than everything the compaction read, and must stay after it.  The view
    records that place as the compacted log's `completion_time`, so every
    consumer orders it the same way.  Replacement is transitive (a compacted
    log may itself be compacted again later).

    `known` (one file group's share of `log_compactions`: compaction begin time
    → replaced begin times, from the timeline) wins over the footer, and lets
    the chain be followed through compacted logs the cleaner has deleted.
    """
    known = known or {}
    replaces: dict[str, frozenset[str]] = {}
    for log in logs:
        if log.instant in compaction_instants and log.name.log_format == 2 and log.completion_time:
            times = known.get(log.instant) or compacted_block_times(log)
            if times:
                replaces[log.instant] = replaces.get(log.instant, frozenset()) | times
    if not replaces:
        return logs
    todo = [t for times in replaces.values() for t in times]
    while todo:  # follow the chain through compactions whose own logs are gone (cleaned)
        inst = todo.pop()
        if inst not in replaces and inst in known and inst in compaction_instants:
            replaces[inst] = known[inst]
            todo.extend(known[inst])
    present = {log.instant for log in logs}
    dropped: set[str] = set()
    todo = [i for i in replaces if i in present]
    while todo:
        for r in replaces.get(todo.pop(), ()):
            if r not in dropped:
                dropped.add(r)
                todo.append(r)
    memo: dict[str, tuple[str, str]] = {}

    def place(instant: str, depth: int = 0) -> tuple[str, str]:
        """(completion time, begin time) of the latest original log behind `instant`."""
        if instant not in memo:
            inner = [place(r, depth + 1) for r in replaces.get(instant, ())
                     if depth < 64 and (r in completion_of or r in replaces)]
            done = completion_of.get(instant, instant)
            memo[instant] = max(inner) if inner else (normalize_time(done), normalize_time(instant))
        return memo[instant]

    out = []
    for log in logs:
        if log.instant in dropped:
            continue
        if log.instant in replaces:
            log = replace(log, completion_time=place(log.instant)[0])
        out.append(log)
    return out
