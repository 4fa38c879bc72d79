"""Instant times as one value type: what users pass (`TimeLike`) becomes an `InstantTime` once, at the API boundary.

    "20261122001500123"        ┐
    "20261122001500"  (legacy) ├─► InstantTime("20261122001500123")   17 digits, yyyyMMddHHmmssSSS, UTC
    datetime(2026, 11, 22, …)  │        compares as the string compares, hashes as the string,
                               │        is the string on disk and in every dict of the library
    "0", "000", 14 or 17 zeros ┘─► InstantTime("00000000000000000")   Hudi's "from the beginning"

    CompletionTime("20261122001530456")   an InstantTime meant as a *completion* time
    a completed Instant  ──────────────►  CompletionTime(its completion time)

Time travel (`Table.read(as_of=T)` and every other `as_of=`) reads an `InstantTime` as Hudi
users do — Spark's `as.of.instant`, hudi-rs's `with_as_of_timestamp`: every completed write
whose *instant (begin) time* is <= T. A `CompletionTime` (or a completed `Instant`) asks for
the other snapshot, the 1.0 spec's "snapshot read time": every write *completed* at or before
it — for an `Instant`, the table exactly as that instant completed (docs/FORMAT.md, "Time travel").

`InstantTime` is a `str` subclass, on purpose: instant times are file names, dict keys and
JSON values everywhere below the API, and a 17-digit string already orders like the time
it names. The type adds the guarantee (validated once, a `TimelineError` naming the value
otherwise) and `to_datetime()`; it costs nothing where a string is expected.

Simplified compared with Apache Hudi: Hudi keeps instant times as plain `String`s and
validates them with `HoodieInstantTimeGenerator`'s formatter wherever they are parsed; it has
no completion-time type (its time travel takes only an instant time; lsm_lab's writers and
incremental reads use completion times, which `CompletionTime` makes explicit).

Taught in: notebooks/02_timeline.ipynb
"""

from __future__ import annotations

import datetime as _dt
from typing import Union

from lsm_lab.errors import InputError, TimelineError
from lsm_lab.timeline.clock import INIT_INSTANT_TS, format_time, is_beginning, parse_time
from lsm_lab.timeline.instant import Instant, normalize_time


class InstantTime(str):
    """A validated Hudi instant time (17 digits, UTC); `InstantTime(x)` accepts any `TimeLike`."""

    __slots__ = ()

    def __new__(cls, value: TimeLike) -> InstantTime:
        if isinstance(value, InstantTime):
            return value
        if isinstance(value, Instant):
            if not value.is_completed or value.completion_time is None:
                raise InputError(f"cannot read as of {value}: it has not completed")
            return CompletionTime(value.completion_time)  # the snapshot as that instant completed
        if isinstance(value, _dt.datetime):
            return str.__new__(cls, format_time(value))
        if isinstance(value, bool) or not isinstance(value, str | int):
            raise TimelineError(f"{value!r} is not an instant time: pass a string yyyyMMddHHmmss[SSS], "
                                f"a datetime or a completed Instant")
        text = str(value)
        if is_beginning(text):
            return str.__new__(cls, INIT_INSTANT_TS)
        parse_time(text)  # validates (TimelineError with a clear message)
        return str.__new__(cls, normalize_time(text))

    @property
    def is_beginning(self) -> bool:
        """Hudi's "before every instant" (`INIT_INSTANT_TS`)."""
        return self == INIT_INSTANT_TS

    def to_datetime(self) -> _dt.datetime:
        """The UTC moment (`datetime.min` in UTC for the beginning)."""
        if self.is_beginning:
            return _dt.datetime.min.replace(tzinfo=_dt.UTC)
        return parse_time(self)


class CompletionTime(InstantTime):
    """An instant time meant as a completion time: `as_of=CompletionTime(c)` reads every write completed
    at or before `c` (the Hudi 1.0 spec's "snapshot read time"), where a plain time T reads every completed
    write that *began* at or before T (Spark's `as.of.instant`).  `CompletionTime(x)` accepts any `TimeLike`;
    a completed `Instant` already means its completion time."""

    __slots__ = ()

    def __new__(cls, value: TimeLike) -> CompletionTime:
        if isinstance(value, CompletionTime):
            return value
        return str.__new__(cls, InstantTime(value))


def is_completion_time(value: object) -> bool:
    """True for a `CompletionTime` (a completion-time read), False for an instant time or None."""
    return isinstance(value, CompletionTime)


def completion_time(value: TimeLike | None) -> CompletionTime | None:
    """`CompletionTime(value)`, or None for None."""
    return None if value is None else CompletionTime(value)


#: What the public API takes wherever it asks for a time (`as_of`, `start`, `end`, ...).
TimeLike = Union[InstantTime, str, int, _dt.datetime, Instant]  # noqa: UP007 - a runtime alias users may import


def instant_time(value: TimeLike | None) -> InstantTime | None:
    """`InstantTime(value)`, or None for None ("now", "no bound")."""
    return None if value is None else InstantTime(value)


__all__ = ["CompletionTime", "InstantTime", "TimeLike", "completion_time", "instant_time", "is_completion_time"]
