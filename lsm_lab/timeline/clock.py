"""Instant times that strictly increase, even across processes writing one table.

An instant time is the UTC wall clock as `yyyyMMddHHmmssSSS`.  Two writers that
ask for a time in the same millisecond must still get different, ordered times,
and a clock that steps backwards must not produce a time below one already
handed out.  lsm_lab therefore keeps the last time it issued for a table in
`.hoodie/.lsm_lab_clock` and updates it under an exclusive `fcntl` lock:

    lock .hoodie/.lsm_lab_clock.lock
      last = read .hoodie/.lsm_lab_clock        (or "0")
      t    = max(now_ms, last + 1 ms)
      write t (temp file + rename)
    unlock

On an object store there is no such lock: the time is the wall clock made
strictly increasing within the process, and the create-if-absent of the
requested instant file makes it unique across writers (a loser draws again).

Simplified compared with Apache Hudi: Hudi relies on a lock provider plus a
"TrueTime" wait of the maximum expected clock skew; on one machine's local
storage a lock file gives the same guarantee without waiting.

Taught in: notebooks/01_build_a_table.ipynb
"""

from __future__ import annotations

import datetime as _dt
import fcntl
import os
import threading
from pathlib import Path

from lsm_lab.errors import TimelineError
from lsm_lab.storage import StoragePath, atomic, paths

CLOCK_FILE = ".lsm_lab_clock"
TIME_FORMAT_LEN = 17
INIT_INSTANT_TS = "00000000000000000"  # Hudi's HoodieTimeline.INIT_INSTANT_TS: before every instant
BEGINNING_TIMES = ("0", "000", "00000000000000", INIT_INSTANT_TS)  # what Hudi's readers take for "from the start"


def is_beginning(text: str) -> bool:
    """Whether `text` is one of Hudi's conventional "from the beginning" times ("0", "000", 14 or 17 zeros)."""
    return text in BEGINNING_TIMES


def format_time(moment: _dt.datetime) -> str:
    moment = moment.astimezone(_dt.UTC)
    return moment.strftime("%Y%m%d%H%M%S") + f"{moment.microsecond // 1000:03d}"


def parse_time(text: str) -> _dt.datetime:
    """Parse a 14- or 17-digit instant time as a UTC datetime (a `TimelineError` for anything else).

    Digits that are no calendar time (month 13, second 99, Hudi's all-zero `INIT_INSTANT_TS`)
    are a `TimelineError` too; callers that accept "from the beginning" check `is_beginning` first."""
    if not isinstance(text, str) or not text.isascii() or not text.isdigit() or len(text) not in (14, 17):
        raise TimelineError(f"'{text}' is not an instant time (yyyyMMddHHmmss[SSS])")
    try:
        base = _dt.datetime.strptime(text[:14], "%Y%m%d%H%M%S").replace(tzinfo=_dt.UTC)
    except ValueError:
        raise TimelineError(f"'{text}' is not an instant time: no such date and time "
                            "(yyyyMMddHHmmss[SSS], e.g. 20240131235959000)") from None
    millis = int(text[14:] or 0)
    return base + _dt.timedelta(milliseconds=millis)


def _now() -> _dt.datetime:
    return _dt.datetime.now(_dt.UTC)


_issued: dict[str, _dt.datetime] = {}  # object-store tables: the last time this process issued, per table
_issued_guard = threading.Lock()


def next_instant_time(meta_folder: str | os.PathLike[str] | StoragePath) -> str:
    """A new instant time for the table whose `.hoodie` folder is given (strictly increasing)."""
    if isinstance(meta_folder, StoragePath):
        return _next_remote(str(meta_folder))
    folder = Path(meta_folder)
    clock = folder / CLOCK_FILE
    with os.fdopen(paths.open_nofollow(folder / (CLOCK_FILE + ".lock"), os.O_RDWR | os.O_CREAT), "r+") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            last = clock.read_text().strip() if clock.exists() else ""
            candidate = _now()
            if last:
                floor = parse_time(last) + _dt.timedelta(milliseconds=1)
                candidate = max(candidate, floor)
            text = format_time(candidate)
            atomic.replace_file(clock, text.encode("ascii"), fsync=False)
            return text
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


def _next_remote(table: str) -> str:
    """Object stores have no file lock: the wall clock, strictly increasing within this process.

    Uniqueness across processes comes from the timeline, not from here: a requested
    instant file is created with create-if-absent, and a writer that draws a time
    another writer already took draws again (`ActiveTimeline.request`)."""
    with _issued_guard:
        candidate = _now()
        last = _issued.get(table)
        if last is not None:
            candidate = max(candidate, last + _dt.timedelta(milliseconds=1))
        candidate = candidate.replace(microsecond=candidate.microsecond // 1000 * 1000)
        _issued[table] = candidate
        return format_time(candidate)
