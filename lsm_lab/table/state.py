"""`TableState`: what a table *is* at a point in time — the layer services, lookup and Spark read.

              TableState(path, config)     path: a local Path or a StoragePath (s3://, gs://, az://); storage
     timeline    instants · completed_writes · instant_metadata · completion_map · savepoints
     time        resolve_time(as_of) · visible_writes(read_time) · check_retained(read_time)
     schema      schema (latest commit's extraMetadata, else hoodie.properties, else a base file)
     files       data_files (the MDT's `files` partition, else a listing) · folder_files · partitions ·
                 file_groups(as_of) · latest_slices(as_of)
     reading     read_context(read_time) → ReadContext for filegroup/read.py's slice readers
     writing     check_writable()

`lsm_lab.api.Table` is this class plus the verbs (write, read, compact,
clean, ...): the services below the `Table` facade take a `TableState` and
never import the facade, so the layers stay one-way:

    Table (api.py) ──► services/* ──► TableState (this module) ──► timeline, layout

A `TableState` holds no cached state that could go stale: every call lists the
timeline and the data files again (within `pinned()`, once per operation).
`data_files()` is the one place the data files are listed: from the metadata
table's `files` partition when the table declares it (no LIST of the data
folders: table/mdt_listing.py; `use_metadata=False` or LSM_LAB_METADATA_LISTING=0
switch it off), else by listing the folders (`folder_files()`, which is also
what sees the files of writes that never completed: `uncommitted_files`).

Simplified compared with Apache Hudi: one object plays `HoodieTableMetaClient`,
the file-system view (over `HoodieBackedTableMetadata` or
`FileSystemBackedTableMetadata`) and the schema resolver; the schema is kept in
the latest commit's `extraMetadata`, as Hudi does.

Taught in: notebooks/02_timeline.ipynb, notebooks/06_merge_semantics.ipynb
"""

from __future__ import annotations

import contextlib
import os
import posixpath
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from lsm_lab.avro_schema import avro_to_arrow_schema
from lsm_lab.errors import (
    CorruptTableError,
    LsmLabError,
    RetentionError,
    TimelineError,
    TimeTravelError,
    UnsupportedFeatureError,
)
from lsm_lab.filegroup import fsview
from lsm_lab.filegroup import read as reader
from lsm_lab.filegroup.fsview import DataFile, FileGroup, FileSlice
from lsm_lab.format import naming, parquet_footer
from lsm_lab.merge import records
from lsm_lab.storage import Storage, StoragePath, TablePath, as_path, storage_of
from lsm_lab.table import mdt_listing
from lsm_lab.timeline import visibility
from lsm_lab.timeline.active import ActiveTimeline
from lsm_lab.timeline.archive import ArchivedTimeline, is_archived
from lsm_lab.timeline.clock import INIT_INSTANT_TS
from lsm_lab.timeline.committed import committed_files
from lsm_lab.timeline.config import KEY_UPGRADE_PENDING, TableConfig
from lsm_lab.timeline.instant import (
    CLEAN,
    COMMIT,
    COMPACTION,
    DELTA_COMMIT,
    LOG_COMPACTION,
    REPLACE_COMMIT,
    SAVEPOINT,
    WRITE_ACTIONS,
    Instant,
    State,
    normalize_time,
)
from lsm_lab.timeline.instanttime import InstantTime, TimeLike, is_completion_time
from lsm_lab.timeline.metadata import SCHEMA_KEY, schema_from_text

# (table, begin time, instant file) → what a log compaction's plan replaced; plans never change once written
_LOG_COMPACTION_CACHE: dict[tuple[str, str, str], dict[tuple[str, str], frozenset[str]]] = {}


class TableState:
    """A table's timeline, schema and files as stored now (or as of a time); read-only."""

    def __init__(self, path: str | os.PathLike[str] | Storage | StoragePath, config: TableConfig,
                 storage_options: Mapping[str, Any] | None = None, *, strict: bool = False,
                 use_metadata: bool | None = None) -> None:
        #: the table root: a local `Path`, or a `StoragePath` on an object store (storage/handle.py)
        self.path: TablePath = as_path(path, storage_options)
        #: the `Storage` of the root; `storage.counts` counts an object store's requests
        self.storage: Storage = storage_of(self.path)
        self.config = config
        self.strict = strict  # corrupt v1 log blocks raise instead of being skipped as Hudi does
        self.active_timeline = ActiveTimeline(self.path, config)
        #: list the data files from the metadata table's `files` partition when the table declares it
        #: (None: yes, unless the environment variable LSM_LAB_METADATA_LISTING=0; see table/mdt_listing.py)
        self.use_metadata = use_metadata
        self._pin: dict[str, Any] | None = None

    @contextlib.contextmanager
    def pinned(self) -> Iterator[None]:
        """Within the block, list the timeline, the archive and the data files once (one read operation).

        A read is of one snapshot anyway; pinning the listings makes every step of it see the
        same one and keeps an object-store read to one LIST of the data files and one of the
        timeline.  Re-entrant; outside the block nothing is cached."""
        if self._pin is not None:
            yield
            return
        self._pin = {}
        self.active_timeline.pinned = self.active_timeline.instants()
        try:
            yield
        finally:
            self._pin = None
            self.active_timeline.pinned = None

    def data_files(self) -> list[tuple[str, Any, Any, int | None]]:
        """The table's data files: (partition, path, parsed name, size or None), as `fsview.list_data_files_sized`.

        THE one place a table's data files are listed: from the metadata table's `files` partition when the
        table declares it and `use_metadata` allows it (no LIST of the data folders: table/mdt_listing.py),
        else by listing the folders.  The MDT holds only files of completed writes; what must see the others
        (`uncommitted_files`, rollback, inspection) lists the folders (`folder_files`).  Listed once per
        `pinned()` operation."""
        if self._pin is None:
            return self._list_data_files()
        if "files" not in self._pin:
            self._pin["files"] = self._list_data_files()
        return list(self._pin["files"])

    def folder_files(self) -> list[tuple[str, Any, Any, int | None]]:
        """The data files found by listing the folders (committed or not); once per `pinned()` operation."""
        if self._pin is None:
            return fsview.list_data_files_sized(self.path)
        if "folders" not in self._pin:
            self._pin["folders"] = fsview.list_data_files_sized(self.path)
        return list(self._pin["folders"])

    def lists_from_metadata(self) -> bool:
        """Whether `data_files` comes from the metadata table (it declares `files`; not switched off)."""
        if not mdt_listing.switched_on(self.use_metadata):
            return False
        return mdt_listing.FILES in mdt_listing.declared(self.config, self.path)

    def _list_data_files(self) -> list[tuple[str, Any, Any, int | None]]:
        if mdt_listing.switched_on(self.use_metadata):
            listed = mdt_listing.list_from_metadata(self, _mdt_state)
            if listed is not None:
                if self._pin is not None:
                    self._pin["from_metadata"] = True
                return listed
        return self.folder_files()

    def _lost_commit_files(self, read_time: InstantTime | None = None,
                           own: str | None = None) -> list[tuple[str, Any, Any, int | None]]:
        """The listing `check_lost_commits` judges pending writes by.  From the MDT it holds no pending
        write's files, so when an inflight write left no markers (the one case `lost_commits` reports: a
        writer marks a file before it writes it, and a lost completed instant file leaves the inflight one)
        the folders are listed; otherwise (no inflight write, or each has markers) nothing needs listing.
        A requested plan (a scheduled compaction or clustering) has written nothing yet, and a write begun
        after `read_time` is not judged by a read as of it (`lost_commits`' own rule): a writer's view of
        the table as of its snapshot does not list the folders for its own inflight instant, nor does a
        service for the instant it runs (`own`)."""
        files = self.data_files()
        if self._pin is None or not self._pin.get("from_metadata"):
            return files
        limit = normalize_time(read_time) if read_time is not None else None
        pending = [i for i in self.active_timeline.instants() if i.state is State.INFLIGHT and i.action in WRITE_ACTIONS
                   and i.begin_time != own and (limit is None or normalize_time(i.begin_time) <= limit)]
        if all(visibility.has_markers(self.path, i.begin_time) for i in pending):
            return []
        return self.folder_files()

    # ------------------------------------------------------------------ basics
    @property
    def name(self) -> str:
        return self.config.name

    # ------------------------------------------------------------------ timeline
    def instants(self) -> list[Instant]:
        """Active-timeline instants in reader order (completion time, then begin time)."""
        return self.active_timeline.instants()

    @property
    def archived_timeline(self) -> ArchivedTimeline:
        """The LSM timeline under `.hoodie/timeline/history/` (archived instants)."""
        return ArchivedTimeline(self.path, self.config)

    def archived_instants(self) -> list[Instant]:
        """Instants moved to the LSM timeline by `archive()`, in reader order."""
        if self._pin is None:
            return self.archived_timeline.instants()
        if "archived" not in self._pin:
            self._pin["archived"] = self.archived_timeline.instants()
        return list(self._pin["archived"])

    def completed_writes(self) -> list[Instant]:
        """Completed write instants of the archived *and* the active timeline, in reader order."""
        listed = self.active_timeline.instants()
        gone = visibility.being_removed(self.active_timeline, listed)  # a pending restore/rollback: its "after" state
        active = [i for i in listed if i.is_completed and i.action in WRITE_ACTIONS and i.begin_time not in gone]
        archived = [i for i in self.archived_instants() if i.action in WRITE_ACTIONS]
        if not archived:
            return active
        seen = {i.begin_time for i in active}
        return sorted(active + [i for i in archived if i.begin_time not in seen])

    def instant_metadata(self, instant: Instant) -> dict[str, Any]:
        """The completed metadata of an instant, from the active timeline or the archive (read once per
        `pinned()` operation)."""
        if self._pin is None:
            return self._instant_metadata(instant)
        memo = self._pin.setdefault("metadata", {})
        key = (instant.begin_time, instant.file_name)
        if key not in memo:
            memo[key] = self._instant_metadata(instant)
        return dict(memo[key])

    def _instant_metadata(self, instant: Instant) -> dict[str, Any]:
        if is_archived(instant):
            return self.archived_timeline.read_metadata(instant.begin_time)
        try:
            return self.active_timeline.read_content(instant)
        except TimelineError:
            if instant.is_completed and any(r.begin_time == instant.begin_time
                                            for r in self.archived_timeline.rows()):
                return self.archived_timeline.read_metadata(instant.begin_time)  # archived meanwhile
            raise

    def latest_completion(self) -> str | None:
        done = self.completed_writes()
        return done[-1].completion_time if done else None

    def resolve_time(self, as_of: TimeLike | None) -> InstantTime | None:
        """`as_of` (None, an instant time, a `CompletionTime`, a completed `Instant` or a datetime) as a read time.

        None means "now" and stays None.  A string, number or datetime becomes an `InstantTime` T:
        time travel as Hudi users know it (Spark's `as.of.instant`, hudi-rs's `with_as_of_timestamp`),
        every completed write whose instant (begin) time is <= T.  A `CompletionTime` C — or a completed
        `Instant`, meaning its completion time — keeps the completion-time snapshot: every write
        completed at or before C.  Hudi's "from the beginning" times ("0", "000", 14 or 17 zeros)
        mean before every instant: `INIT_INSTANT_TS`, a snapshot with no rows."""
        return None if as_of is None else InstantTime(as_of)

    def visible_writes(self, read_time: TimeLike | None = None) -> list[Instant]:
        """The completed writes a read at `read_time` sees, in reader order (see `resolve_time`).

        An instant time T: every completed write with begin time <= T — a *set* of instants, not
        always a prefix of the completion order (a write that began before T may complete after
        one that began later); upstream's `HoodieTimeline.findInstantsBeforeOrEquals`.
        A `CompletionTime` C: every write completed at or before C (a prefix)."""
        writes = self.completed_writes()
        if read_time is None:
            return writes
        at = self.resolve_time(read_time)
        assert at is not None
        if is_completion_time(at):
            return [i for i in writes if normalize_time(i.completion_time or i.begin_time) <= at]
        return [i for i in writes if normalize_time(i.begin_time) <= at]

    def check_retained(self, read_time: TimeLike | None) -> None:
        """Refuse a time-travel read whose snapshot is not whole, before reading anything (upstream's
        `TimelineUtils.validateTimestampAsOf`).

        For an instant time T (apache/hudi PR #9280 and #9666):
        - a pending (requested or inflight) commit, deltacommit or non-clustering replacecommit that
          began at or before T: `TimeTravelError` (its rows may still join that snapshot); pending
          compactions and clusterings do not count, as upstream;
        - the latest completed clean's `earliestCommitToRetain` E must be <= T, else `RetentionError`
          (a savepointed instant's own time stays readable: lsm_lab's addition, its files are kept).
        For a `CompletionTime` C: snapshots from E's completion on are whole, and so are savepointed
        ones (their `savepointedCompletionTime`).  Cleans that record no E (KEEP_LATEST_FILE_VERSIONS)
        are checked file by file when the view is built (`cleaned_by`: `RetentionError`)."""
        at = self.resolve_time(read_time)
        if at is None or at == INIT_INSTANT_TS:  # the empty snapshot before every instant
            return
        by_completion = is_completion_time(at)
        if not by_completion:
            self._check_no_pending_commit(at)
        earliest, clean = None, ""
        for inst in reversed(self.active_timeline.completed([CLEAN])):
            earliest, clean = self.active_timeline.read_content(inst).get("earliestCommitToRetain"), inst.begin_time
            if earliest:
                break
        if not earliest:
            return
        if by_completion:
            limit = {i.begin_time: i.completion_time for i in self.completed_writes()}.get(earliest)
            if limit is None or at >= normalize_time(limit):
                return
            pinned = {normalize_time(sp["savepointedCompletionTime"]) for sp in self.savepoints()
                      if sp.get("savepointedCompletionTime")}
        else:
            limit = earliest
            if at >= normalize_time(limit):
                return
            pinned = {normalize_time(str(sp["savepointedInstant"])) for sp in self.savepoints()
                      if sp.get("savepointedInstant")}
        if at in pinned:
            return
        kind = "completion time" if by_completion else "instant time"
        raise RetentionError(f"cannot time travel to {kind} {at}: the cleaner kept only the snapshots from {limit} on "
                             "(older files may be deleted); keep more with clean(retained=N) / "
                             "hoodie.cleaner.commits.retained, or savepoint an instant to keep its snapshot",
                             path=self.path, file="", clean=clean, policy="KEEP_LATEST_COMMITS")

    def _check_no_pending_commit(self, at: str) -> None:
        """Upstream's first rule of `validateTimestampAsOf`: no incomplete commit at or before the instant time."""
        listed = self.active_timeline.instants()
        gone = visibility.being_removed(self.active_timeline, listed)  # a pending restore/rollback removes them
        for inst in sorted((i for i in listed if not i.is_completed), key=lambda i: normalize_time(i.begin_time)):
            if inst.action not in (COMMIT, DELTA_COMMIT, REPLACE_COMMIT) or inst.begin_time in gone:
                continue
            if inst.action == REPLACE_COMMIT and self._is_clustering_plan(inst):
                continue
            if normalize_time(inst.begin_time) <= at:
                raise TimeTravelError(
                    f"Time travel's timestamp '{at}' must be earlier than the first incomplete commit timestamp "
                    f"'{inst.begin_time}' ({inst.action} {inst.begin_time} is {inst.state.value}: its rows may still "
                    "join that snapshot); read as of an earlier instant time, or once it has completed or been "
                    "rolled back", pending=inst.begin_time, path=self.path)
            return  # upstream checks the first incomplete commit only

    def _is_clustering_plan(self, inst: Instant) -> bool:
        """A pending replacecommit that carries a clustering plan (table version 6's clustering)."""
        try:
            plan = self.active_timeline.read_content(inst, State.REQUESTED)
        except LsmLabError:
            return False
        return isinstance(plan, dict) and bool(plan.get("clusteringPlan"))

    def completion_map(self, read_time: TimeLike | None = None) -> dict[str, str]:
        """Begin time → completion time of the completed write instants visible at `read_time` (`visible_writes`)."""
        return {i.begin_time: i.completion_time or i.begin_time for i in self.visible_writes(read_time)}

    # ------------------------------------------------------------------ schema
    @property
    def schema(self) -> pa.Schema | None:
        """The table's user columns (no meta columns), or None before the first write."""
        for inst in reversed(self.completed_writes()):
            found = self.instant_schema(inst)
            if found is not None:
                return found
        create = self.config.props.get("hoodie.table.create.schema")
        if create:
            return _schema_from_avro(create)
        return None

    def instant_schema(self, inst: Instant) -> pa.Schema | None:
        """The table schema a completed write recorded in its `extraMetadata` (lsm_lab's Arrow schema, else
        the Avro `schema` Hudi writers put there); None when it recorded none."""
        extra = self.instant_metadata(inst).get("extraMetadata") or {}
        text = extra.get(SCHEMA_KEY)
        if text:
            return schema_from_text(text)
        if extra.get("schema"):
            return _schema_from_avro(extra["schema"])
        return None

    def schema_at(self, read_time: TimeLike | None) -> pa.Schema | None:
        """The schema a read at `read_time` uses: that of the latest visible write that recorded one, as
        upstream's time travel reads with `TableSchemaResolver.getTableSchema(timestamp)` (columns added
        later are absent, promoted columns have their older type); the latest schema when no visible write
        recorded one (a read before the first write)."""
        if read_time is None:
            return self.schema
        for inst in reversed(self.visible_writes(read_time)):
            found = self.instant_schema(inst)
            if found is not None:
                return found
        return self.schema

    def read_context(self, read_time: TimeLike | None = None) -> reader.ReadContext:
        """What a slice reader needs to merge this table as of `read_time` (None: now).

        The `ReadContext` is plain data (path, config, schema, begin → completion
        times), so Spark ships it to its tasks; `filegroup/read.py`'s `read_slice`,
        `load_sources` and `iter_sources` take it with a `FileSlice`."""
        at = self.resolve_time(read_time)
        schema = self.schema_at(at)
        if schema is None:
            schema = self._schema_from_files()
        # the visible instants are completion_of's keys; a completion-time read also bounds v1 log blocks by it
        return reader.ReadContext(self.path, self.config, schema or pa.schema([]), self.completion_map(at),
                                  at if is_completion_time(at) else None, strict=self.strict)

    def _schema_from_files(self) -> pa.Schema | None:
        for _, path, name in fsview.list_data_files(self.path):
            if name.is_base and name.ext == "parquet":
                s = parquet_footer.read_footer(path)[0].schema.to_arrow_schema()
                return pa.schema([f for f in s if f.name not in records.META_COLUMNS])
        return None

    # ------------------------------------------------------------------ file system view
    def file_groups(self, as_of: TimeLike | None = None, partitions: Iterable[str] | None = None,
                    ignored: list[DataFile] | None = None, *, folders: bool = False,
                    own: str | None = None) -> list[FileGroup]:
        """File groups with their slices, as visible at `as_of` (default: now; times as in `resolve_time`).

        An instant time T is cut as upstream's time travel cuts it (fsview rule 8): the slices
        of the whole completed timeline, each group's latest with base instant <= T, its logs
        those of the completed writes begun at or before T.  A `CompletionTime` C builds the
        view of the writes completed by C alone.
        `ignored` receives the listed data files no completed instant committed (fsview rule 6).
        The files come from `data_files()` (the metadata table when the table has one), or from a
        listing of the folders with `folders=True` (what sees files of writes that never completed).
        `own`: the pending instant the caller itself runs (a compaction or clustering it claimed): not judged
        as a lost commit (`_lost_commit_files`)."""
        read_time = self.resolve_time(as_of)
        with self.pinned():
            return self._file_groups(read_time, partitions, ignored, folders=folders, own=own)

    def _file_groups(self, read_time: InstantTime | None, partitions: Iterable[str] | None,
                     ignored: list[DataFile] | None, *, folders: bool, own: str | None = None) -> list[FileGroup]:
        writes = self.visible_writes(read_time)
        by_instant = read_time is not None and not is_completion_time(read_time)
        formed = self.completed_writes() if by_instant else writes  # the instants the slices are cut from
        files = self.folder_files() if folders else self.data_files()
        visibility.check_lost_commits(self.path, self.active_timeline,
                                      files if folders else self._lost_commit_files(read_time, own), read_time)
        completion = {i.begin_time: i.completion_time or i.begin_time for i in formed}
        replaced = fsview.replaced_file_groups(writes, self.instant_metadata)
        compactions = {i.begin_time for i in writes if i.action in (COMPACTION, LOG_COMPACTION)}
        sizes: dict[tuple[str, str], int] | None = {} if self.own_files else None
        committed = committed_files(str(self.path), formed, self.instant_metadata,  # missing files: an error
                                    timeline_folder=_local(self.active_timeline.folder), sizes=sizes)
        try:
            return fsview.build_file_groups(
                self.path, completion, read_time=None if by_instant else read_time, replaced=replaced,
                v1_logs_by_base_instant=self.config.version < 8, partitions=partitions,
                compaction_instants=compactions, files=files, committed=committed,
                log_compactions=self.log_compactions(writes), committed_sizes=sizes, ignored=ignored,
                own_files=self.own_files, as_of_instant=read_time if by_instant else None,
                visible={i.begin_time for i in writes} if by_instant else None,
            )
        except CorruptTableError as exc:
            cleaned = self.cleaned_by(exc.path) if read_time is not None and exc.field == fsview.MISSING_FIELD \
                else None
            if cleaned is None:
                raise
            clean, policy = cleaned
            raise RetentionError(f"cannot time travel to {read_time}: the cleaner deleted "
                             f"{posixpath.basename(str(exc.path))}, which that snapshot needs (clean "
                             f"{clean.begin_time}, {policy}); keep more with clean(retained=N) / "
                             "hoodie.cleaner.commits.retained or hoodie.cleaner.fileversions.retained, or savepoint "
                             "the instants to keep", path=self.path, file=posixpath.basename(str(exc.path)),
                             clean=clean.begin_time, policy=policy) from None

    def cleaned_by(self, path: object) -> tuple[Instant, str] | None:
        """(the completed clean that deleted the data file `path`, its policy), or None: not a cleaner's doing.

        A clean that keeps file versions (KEEP_LATEST_FILE_VERSIONS) records no earliest retained
        instant, so `check_retained` cannot refuse an old read time beforehand; a committed file the
        read finds gone is then the cleaner's (if a clean's metadata lists it), not damage."""
        name = posixpath.basename(str(path or "").replace("\\", "/"))
        if not name:
            return None
        archived = [i for i in self.archived_instants() if i.action == CLEAN and i.is_completed]
        for clean in reversed([*archived, *self.active_timeline.completed([CLEAN])]):  # the archive too
            try:
                meta = self.instant_metadata(clean)
            except LsmLabError:
                continue
            for part in (meta.get("partitionMetadata") or {}).values():
                done = part.get("successDeleteFiles") or [] if isinstance(part, dict) else []
                if any(posixpath.basename(str(f)) == name for f in done):
                    return clean, str(part.get("policy") or meta.get("policy") or "the table's policy")
        return None

    @property
    def own_files(self) -> bool:
        """True for a table lsm_lab created: its commits record every file's size (fsview rule 7)."""
        return self.config.props.get("lsm_lab.created") == "true"

    def uncommitted_files(self) -> list[DataFile]:
        """Data files in the table folder that no completed instant committed: not part of the table.

        A copied partition folder, a file dropped in by hand, or the files of a write still in
        flight or never rolled back; reads ignore them (fsview rule 6)."""
        ignored: list[DataFile] = []
        self.file_groups(ignored=ignored, folders=True)  # the MDT lists committed files only
        pending = {i.begin_time for i in self.instants() if not i.is_completed}
        listed = {(f.partition, f.name.name) for f in ignored}
        done = set(self.completion_map())
        extra = [DataFile(p, path, name, size or 0, "") for p, path, name, size in self.folder_files()
                 if (p, name.name) not in listed and name.instant not in done and name.instant not in pending
                 and not (self.config.version < 8 and name.is_log and name.log_format == 1)]
        return sorted([*ignored, *extra], key=lambda f: f.relative)

    def log_compactions(self, writes: Iterable[Instant]) -> dict[str, dict[tuple[str, str], frozenset[str]]]:
        """What each completed log compaction among `writes` replaced, from its plan on the timeline.

        Begin time → (partition, file id) → begin times of the logs its plan folded
        (`deltaFilePaths`, upstream's `HoodieCompactionOperation`).  The view follows
        these chains even after the cleaner deleted a compacted log that a later log
        compaction replaced (fsview rule 4).  A plan that cannot be read (archived
        without its plan, or damaged) is left out: the compacted log's footer speaks
        for it then."""
        out: dict[str, dict[tuple[str, str], frozenset[str]]] = {}
        for inst in writes:
            if inst.action != LOG_COMPACTION:
                continue
            key = (str(self.path), inst.begin_time, inst.file_name)
            hit = _LOG_COMPACTION_CACHE.get(key)
            if hit is None:
                hit = self._log_compaction(inst)
                if len(_LOG_COMPACTION_CACHE) > 100_000:
                    _LOG_COMPACTION_CACHE.clear()
                _LOG_COMPACTION_CACHE[key] = hit
            if hit:
                out[inst.begin_time] = hit
        return out

    def _log_compaction(self, inst: Instant) -> dict[tuple[str, str], frozenset[str]]:
        try:
            if is_archived(inst):
                plan = self.archived_timeline.read_plan(inst.begin_time) or {}
            else:
                plan = self.active_timeline.read_content(inst, State.REQUESTED)
        except LsmLabError:
            return {}
        out: dict[tuple[str, str], frozenset[str]] = {}
        for op in plan.get("operations") or () if isinstance(plan, dict) else ():
            if not isinstance(op, dict) or not isinstance(op.get("fileId"), str):
                continue
            names = [naming.parse(str(n).rsplit("/", 1)[-1]) for n in op.get("deltaFilePaths") or ()]
            times = frozenset(n.instant for n in names if n is not None)
            if times:
                out[(str(op.get("partitionPath") or ""), op["fileId"])] = times
        return out

    def latest_slices(self, as_of: TimeLike | None = None, partitions: Iterable[str] | None = None) -> list[FileSlice]:
        return [g.latest for g in self.file_groups(as_of, partitions)]

    def partitions(self) -> list[str]:
        """Partitions of the table: those its completed instants wrote to (a folder deleted by hand
        stays a partition whose files are missing; a copied folder is none).  Tables lsm_lab did not
        write add the listed folders (commits archived in a form lsm_lab cannot read)."""
        committed = committed_files(str(self.path), self.completed_writes(), self.instant_metadata,
                                    timeline_folder=_local(self.active_timeline.folder))
        listed = set() if self.own_files else {p for p, _, _, _ in self.data_files()}
        return sorted(listed | {p for p, _ in committed})

    def check_writable(self) -> None:
        """Raise `UnsupportedFeatureError` unless lsm_lab may write to this table (it created it, no upgrade pending)."""
        if self.config.props.get(KEY_UPGRADE_PENDING):
            raise UnsupportedFeatureError("an upgrade to table version 10 has not finished; run `lsm-lab upgrade` "
                                          "(or Table.upgrade()) to complete it before writing", path=self.path)
        if self.config.version < 9 and not self.config.props.get("lsm_lab.created"):
            raise UnsupportedFeatureError("lsm_lab writes only to tables it created; this table was written by "
                                          "Apache Hudi (read it, or copy its rows into a new lsm_lab table)",
                                          path=self.path)

    def savepoints(self) -> list[dict[str, Any]]:
        """The table's savepoints, oldest first (instant, savepointedInstant, its completion time, files)."""
        return list_savepoints(self.active_timeline)


def list_savepoints(timeline: ActiveTimeline) -> list[dict[str, Any]]:
    """Completed savepoints, oldest first: savepoint instant, the instant it pins, its files."""
    out = []
    for inst in timeline.completed([SAVEPOINT]):
        meta = timeline.read_content(inst)
        files = {p: list(m.get("savepointDataFile") or []) for p, m in (meta.get("partitionMetadata") or {}).items()}
        out.append({"instant": inst.begin_time, "savepointedInstant": meta.get("savepointedInstant"),
                    "savepointedCompletionTime": meta.get("savepointedCompletionTime"),
                    "savepointedBy": meta.get("savepointedBy"), "comments": meta.get("comments"),
                    "savepointedAt": meta.get("savepointedAt"), "files": files})
    return out


def _mdt_state(path: TablePath, config: TableConfig) -> TableState:
    """The metadata table's own state (it has no metadata table of its own: listed by folders)."""
    return TableState(path, config, use_metadata=False)


def _local(folder: TablePath) -> Path | None:
    """A local folder, or None for an object store (whose instant files are never changed in place)."""
    return folder if isinstance(folder, Path) else None


def _schema_from_avro(text: str) -> pa.Schema | None:
    try:
        schema = avro_to_arrow_schema(text)
    except LsmLabError:
        return None
    return pa.schema([f for f in schema if f.name not in records.META_COLUMNS])


__all__ = ["TableState", "list_savepoints"]
