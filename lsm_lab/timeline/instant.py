"""Instants: one action on the table, in one of three states, named by its file.

Every change to a Hudi table is an *instant*: an action (commit, deltacommit,
compaction, ...) that starts at a *begin time* and moves through three states,
each one a file on the timeline:

    requested ──► inflight ──► completed
    <t>.deltacommit.requested   <t>.deltacommit.inflight   <t>_<c>.deltacommit
                                (commit: just <t>.inflight)

The begin time `t` is the instant's identity (it is written into every data file
name and into the `_hoodie_commit_time` column); the completion time `c` orders
instants for readers (table versions 8+ put it in the completed file's name).
Table version 6 names the completed file `<t>.<action>` and has no completion
time: readers order by begin time, so lsm_lab takes `c = t` there.

Instant times are `yyyyMMddHHmmssSSS` (17 digits, UTC); legacy tables may use
14 digits, which compare correctly after right-padding with zeros.

Simplified compared with Apache Hudi: no `INVALID`/`NIL` states and no special
handling of the metadata table's `00000000000000` bootstrap instants beyond
parsing them.

Taught in: notebooks/02_timeline.ipynb
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from lsm_lab.errors import TimelineError


class State(str, enum.Enum):
    REQUESTED = "requested"
    INFLIGHT = "inflight"
    COMPLETED = "completed"


# Actions that write data and so produce file slices (the others only touch the timeline).
COMMIT = "commit"
DELTA_COMMIT = "deltacommit"
COMPACTION = "compaction"
LOG_COMPACTION = "logcompaction"
REPLACE_COMMIT = "replacecommit"
CLUSTERING = "clustering"
CLEAN = "clean"
ROLLBACK = "rollback"
RESTORE = "restore"
SAVEPOINT = "savepoint"
INDEXING = "indexing"
SCHEMA_COMMIT = "schemacommit"

ACTIONS = (
    COMMIT, DELTA_COMMIT, COMPACTION, LOG_COMPACTION, REPLACE_COMMIT, CLUSTERING,
    CLEAN, ROLLBACK, RESTORE, SAVEPOINT, INDEXING, SCHEMA_COMMIT,
)
WRITE_ACTIONS = (COMMIT, DELTA_COMMIT, COMPACTION, LOG_COMPACTION, REPLACE_COMMIT, CLUSTERING)

# A completed compaction is recorded as a `commit` file, a completed log compaction as a
# `deltacommit`, a completed clustering as a `replacecommit` (Hudi's convention).
COMPLETED_ACTION = {COMPACTION: COMMIT, LOG_COMPACTION: DELTA_COMMIT, CLUSTERING: REPLACE_COMMIT}

_TIME = r"\d{14}(?:\d{3})?"
_COMPLETED = re.compile(rf"^({_TIME})(?:_({_TIME}))?\.([a-z]+)$")
_PENDING = re.compile(rf"^({_TIME})\.(?:([a-z]+)\.)?(requested|inflight)$")


def normalize_time(t: str) -> str:
    """Right-pad legacy 14-digit times to 17 digits so that times compare as strings."""
    return t + "000" if len(t) == 14 else t


@dataclass(frozen=True, order=True)
class Instant:
    """One action on the timeline.

    Ordered by (completion_time or begin_time, begin_time) so `sorted()` gives
    the order in which readers see instants.
    """

    sort_key: tuple[str, str]
    begin_time: str
    action: str
    state: State
    completion_time: str | None = None
    file_name: str = ""

    @staticmethod
    def make(begin_time: str, action: str, state: State, completion_time: str | None = None,
             file_name: str = "") -> Instant:
        key = (normalize_time(completion_time or begin_time), normalize_time(begin_time))
        return Instant(key, begin_time, action, state, completion_time, file_name)

    @property
    def is_completed(self) -> bool:
        return self.state is State.COMPLETED

    @property
    def is_write(self) -> bool:
        return self.action in WRITE_ACTIONS

    def __str__(self) -> str:
        ct = f" → {self.completion_time}" if self.completion_time else ""
        return f"{self.begin_time}{ct} {self.action} [{self.state.value}]"

    def __repr__(self) -> str:
        return f"Instant({self.begin_time!r}, {self.action!r}, {self.state.value!r}, completion={self.completion_time!r})"

    def _repr_html_(self) -> str:
        colour = {"completed": "#2e7d32", "inflight": "#ef6c00", "requested": "#1565c0"}[self.state.value]
        ct = self.completion_time or "—"
        return (
            f"<code>{self.begin_time}</code> → <code>{ct}</code> "
            f"<b>{self.action}</b> <span style='color:{colour}'>{self.state.value}</span>"
        )


def file_name_for(begin_time: str, action: str, state: State, completion_time: str | None = None,
                  *, timeline_layout: int = 2) -> str:
    """The timeline file name of an instant in a state (format page, section 1)."""
    if state is State.COMPLETED:
        done_action = COMPLETED_ACTION.get(action, action)
        if timeline_layout >= 2:
            if completion_time is None:
                raise TimelineError(f"completed instant {begin_time} needs a completion time")
            return f"{begin_time}_{completion_time}.{done_action}"
        return f"{begin_time}.{done_action}"
    if state is State.INFLIGHT and action == COMMIT:
        return f"{begin_time}.inflight"
    return f"{begin_time}.{action}.{state.value}"


def requested_instant(instant: Instant, timeline_layout: int) -> Instant:
    """The same instant in its requested state (the plan file a table service starts from)."""
    name = file_name_for(instant.begin_time, instant.action, State.REQUESTED, timeline_layout=timeline_layout)
    return Instant.make(instant.begin_time, instant.action, State.REQUESTED, None, name)


def parse_file_name(name: str) -> tuple[str, str, State, str | None] | None:
    """(begin_time, action, state, completion_time) of a timeline file, or None if it is not one.

    Completed compactions are stored as `commit` files; which completed commit
    was a compaction is decided by the caller (it needs the pending files).
    """
    m = _PENDING.match(name)
    if m:
        begin, action, state = m.group(1), m.group(2) or COMMIT, State(m.group(3))
        return begin, action, state, None
    m = _COMPLETED.match(name)
    if m and m.group(3) in ACTIONS:
        return m.group(1), m.group(3), State.COMPLETED, m.group(2)
    return None
