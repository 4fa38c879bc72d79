"""The active timeline: instants as files, moved forward by atomic creates.

    .hoodie/timeline/                                (table version 6: .hoodie/ itself)
      20261122001500123.deltacommit.requested        ┐
      20261122001500123.deltacommit.inflight         ├ one instant, three states
      20261122001500123_20261122001501456.deltacommit┘ completed at ...1456
      20261122001600001.compaction.requested         a pending compaction

A transition never rewrites a file: it *creates* the next state's file.  The
content is written to a temporary file first and then hard-linked to its final
name; `link` fails if the name exists, so two writers can never both create the
same state, and a reader can never see a half-written instant file.  The
requested and inflight files stay behind (Hudi keeps them too); a reader takes
the most advanced state of each begin time.

Which completed `commit` was a compaction?  Hudi stores a finished compaction
as `<t>_<c>.commit` next to `<t>.compaction.requested`; the loader restores the
action from the pending file, so `Table.timeline()` shows `compaction`.

Every instant file is encoded as Hudi writes it (`_encode`): on tables of version
8 and later each file with content is upstream's Avro record for its action and
state, and the states upstream leaves empty are empty (timeline/metadata.py,
timeline/avro_models.py); version 6 keeps JSON commit metadata, as Hudi 0.x.
`extraMetadata.schema` holds the Avro table schema in every completed write.

Simplified compared with Apache Hudi: no timeline server, no caching of the
listing (every call lists the folder; a few hundred files is cheap), and the
archived (LSM) timeline is read by `timeline.archive`, not here.

Taught in: notebooks/02_timeline.ipynb
"""

from __future__ import annotations

import copy
import os
from collections.abc import Iterable, Mapping
from typing import Any

from lsm_lab.errors import ConflictError, CorruptTableError, TimelineError
from lsm_lab.storage import (
    StoragePath,
    TablePath,
    as_path,
    atomic,
    is_local,
    list_names,
    paths,
    prefetch,
    recall_kept,
    remember_kept,
)
from lsm_lab.timeline import clock
from lsm_lab.timeline.config import TableConfig
from lsm_lab.timeline.instant import (
    CLUSTERING,
    COMMIT,
    COMPACTION,
    DELTA_COMMIT,
    LOG_COMPACTION,
    REPLACE_COMMIT,
    WRITE_ACTIONS,
    Instant,
    State,
    file_name_for,
    normalize_time,
    parse_file_name,
)
from lsm_lab.timeline.metadata import (
    check_paths,
    decode_instant_content,
    encode_avro_instant,
    encode_json,
    with_hudi_schema,
)

# completed action → pending actions that complete into it
_RESTORE_ACTION = {COMMIT: (COMPACTION,), DELTA_COMMIT: (LOG_COMPACTION,), REPLACE_COMMIT: (CLUSTERING,)}


def atomic_create(path: TablePath, data: bytes) -> None:
    """Create `path` with `data`, atomically, failing if it already exists."""
    atomic.create_file(path, data, on_exists=lambda p: InstantExistsError(
        "instant file already exists; another writer created it", path=p))


class InstantExistsError(TimelineError, ConflictError):
    """The instant file exists: another writer created it first (nothing of this write was committed)."""


_UNIQUE_ATTEMPTS = 20


class ActiveTimeline:
    """Load, read and advance the instants of one table's active timeline."""

    def __init__(self, base_path: str | os.PathLike[str] | StoragePath, config: TableConfig) -> None:
        self.base_path = as_path(base_path)
        self.config = config
        meta = self.base_path / ".hoodie"
        if config.timeline_layout >= 2:
            self.folder = meta / config.props.get("hoodie.timeline.path", "timeline")
            paths.inside(self.base_path, self.folder, field="hoodie.timeline.path",  # no symlink out of the table
                         file=meta / "hoodie.properties")
        else:
            self.folder = meta
        self.meta_folder = meta
        self.pinned: list[Instant] | None = None  # set by TableState.pinned(): one listing for one operation

    # ------------------------------------------------------------------ loading
    def instants(self) -> list[Instant]:
        """Every instant in its most advanced state, in reader order (completion, then begin time)."""
        if self.pinned is not None:
            return list(self.pinned)
        if is_local(self.folder):  # (object stores: no folders to check; a missing one lists empty)
            if not self.folder.is_dir():
                if self.folder != self.meta_folder and self.meta_folder.is_dir():
                    raise CorruptTableError(f"the timeline folder {self.folder.name!r} is missing: every table has one "
                                            "(is hoodie.timeline.path right?)", path=self.folder,
                                            field="hoodie.timeline.path")
                return []
            if self.folder == self.meta_folder and (self.folder / "timeline").is_dir() \
                    and any(parse_file_name(n) for n in list_names(self.folder / "timeline")):
                raise CorruptTableError("hoodie.table.version says 6 (instants in .hoodie/), but the instants are in "
                                        ".hoodie/timeline/ (version 8 and later)", path=self.meta_folder / "hoodie.properties",
                                        field="hoodie.table.version")
        states: dict[str, dict[State, tuple[str, str | None, str]]] = {}
        # an object store in a request scope: one LIST of .hoodie/ answers this listing and the later ones of
        # the markers, heartbeats and archive (storage.scope); elsewhere a no-op
        prefetch(self.meta_folder)
        for name in list_names(self.folder):  # one LIST on an object store; a missing folder is empty
            parsed = parse_file_name(name)
            if parsed is None:
                continue
            begin, action, state, completion = parsed
            states.setdefault(begin, {})[state] = (action, completion, name)
        out: list[Instant] = []
        for begin, by_state in states.items():
            if State.COMPLETED in by_state:
                action, completion, name = by_state[State.COMPLETED]
                pending_actions = {by_state[s][0] for s in (State.REQUESTED, State.INFLIGHT) if s in by_state}
                for original in _RESTORE_ACTION.get(action, ()):
                    if original in pending_actions:
                        action = original
                if completion is None:  # table version 6: no completion time in the name
                    completion = begin
                elif normalize_time(completion) < normalize_time(begin):
                    raise CorruptTableError(f"completion time {completion} is before begin time {begin}",
                                            path=self.folder / name, field="completion time")
                out.append(Instant.make(begin, action, State.COMPLETED, completion, name))
            else:
                state = State.INFLIGHT if State.INFLIGHT in by_state else State.REQUESTED
                action, _, name = by_state[state]
                if state is State.INFLIGHT and action == COMMIT and State.REQUESTED in by_state:
                    action = by_state[State.REQUESTED][0]  # `<t>.inflight` of a non-commit action
                out.append(Instant.make(begin, action, state, None, name))
        return sorted(out)

    def completed(self, actions: Iterable[str] | None = None) -> list[Instant]:
        wanted = set(actions) if actions is not None else None
        return [i for i in self.instants() if i.is_completed and (wanted is None or i.action in wanted)]

    def pending(self) -> list[Instant]:
        return [i for i in self.instants() if not i.is_completed]

    def find(self, begin_time: str) -> Instant:
        for inst in self.instants():
            if inst.begin_time == begin_time:
                return inst
        raise TimelineError(f"no instant {begin_time} on the timeline", path=self.folder)

    def read_content(self, instant: Instant, state: State | None = None) -> dict[str, Any]:
        """Decoded content of an instant file (the completed metadata by default)."""
        name = instant.file_name if state is None else file_name_for(
            instant.begin_time, instant.action, state, instant.completion_time,
            timeline_layout=self.config.timeline_layout,
        )
        path = self.folder / name
        pending = (state or instant.state) is not State.COMPLETED
        # every instant file is created once (create-if-absent) and never rewritten: on an object store one GET
        # per operation, even past the table lock (storage.scope); a file written by this operation, none
        kept = recall_kept(str(path)) if isinstance(path, StoragePath) else None
        if kept is not None:
            return copy.deepcopy(kept)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise TimelineError(f"instant file {name} is missing", path=self.folder) from None
        content = decode_instant_content(data, path=str(path))
        check_paths(content, action=instant.action, requested=pending, path=str(path))  # the path guard
        if isinstance(path, StoragePath):
            remember_kept(str(path), copy.deepcopy(content))
        return content

    # ------------------------------------------------------------------ transitions
    def new_instant_time(self) -> str:
        paths.make_folders(self.folder)  # never through a link out of the table
        return clock.next_instant_time(self.meta_folder)

    def _create(self, begin: str, action: str, state: State, content: Mapping[str, Any] | bytes | None,
                completion: str | None = None) -> Instant:
        name = file_name_for(begin, action, state, completion, timeline_layout=self.config.timeline_layout)
        data = content if isinstance(content, bytes) else (self._encode(action, state, content) if content else b"")
        paths.make_folders(self.folder)
        path = self.folder / name
        atomic_create(path, data)
        if isinstance(path, StoragePath) and data and isinstance(content, Mapping):
            remember_kept(str(path), decode_instant_content(data, path=str(path)))  # read back: no GET
        return Instant.make(begin, action, state, completion, name)

    def _encode(self, action: str, state: State, content: Mapping[str, Any]) -> bytes:
        """Avro as upstream writes it on tables whose instant format is Avro (versions 8 and later), else JSON.

        JSON too for content upstream's record cannot carry (`encode_avro_instant` says None), so nothing is lost.
        """
        if self.config.instant_format == "avro" or self.config.version < 8:  # (version 6: Hudi 0.x's Avro records)
            avro = encode_avro_instant(action, state.value, content, records_only=self.config.instant_format != "avro")
            if avro is not None:
                return avro
        return encode_json(content)

    def request(self, action: str, content: Mapping[str, Any] | bytes | None = None,
                begin_time: str | None = None) -> Instant:
        if begin_time is not None:
            return self._create(begin_time, action, State.REQUESTED, content)
        for _ in range(_UNIQUE_ATTEMPTS):
            begin = self.new_instant_time()
            try:
                return self._create(begin, action, State.REQUESTED, content)
            except InstantExistsError:
                # on an object store the clock is per process: two writers may draw the same
                # millisecond, and the create-if-absent of the requested file picks one
                continue
        raise TimelineError(f"could not draw a unique instant time in {_UNIQUE_ATTEMPTS} attempts", path=self.folder)

    def start(self, instant: Instant, content: Mapping[str, Any] | bytes | None = None) -> Instant:
        if instant.state is not State.REQUESTED:
            raise TimelineError(f"cannot move {instant} to inflight: it is not requested")
        return self._create(instant.begin_time, instant.action, State.INFLIGHT, content)

    def complete(self, instant: Instant, metadata: Mapping[str, Any]) -> Instant:
        if instant.state is not State.INFLIGHT:
            raise TimelineError(f"cannot complete {instant}: it is not inflight")
        completion = self.new_instant_time()
        if instant.action in WRITE_ACTIONS:  # the Avro writer schema upstream readers look for
            metadata = with_hudi_schema(metadata, self.config.name)
        done = self._create(instant.begin_time, instant.action, State.COMPLETED, metadata, completion)
        if self.config.timeline_layout < 2:
            completion = instant.begin_time
        return Instant.make(done.begin_time, instant.action, State.COMPLETED, completion, done.file_name)

    def remove_pending(self, instant: Instant) -> None:
        """Delete the requested/inflight files of a pending instant (after its rollback)."""
        if instant.is_completed:
            raise TimelineError(f"{instant} is completed; roll it back instead of removing it")
        for state in (State.INFLIGHT, State.REQUESTED):
            name = file_name_for(instant.begin_time, instant.action, state,
                                 timeline_layout=self.config.timeline_layout)
            paths.unlink(self.folder / name)
