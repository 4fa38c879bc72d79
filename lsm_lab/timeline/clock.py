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

Simplified compared with Apache Hudi: Hudi relies on a lock provider plus a
"TrueTime" wait of the maximum expected clock skew; on one machine's local
storage a lock file gives the same guarantee without waiting.
"""

from __future__ import annotations

import datetime as _dt
import fcntl
import os
from pathlib import Path

from lsm_lab import atomic
from lsm_lab.errors import TimelineError

CLOCK_FILE = ".lsm_lab_clock"
TIME_FORMAT_LEN = 17


def format_time(moment: _dt.datetime) -> str:
    moment = moment.astimezone(_dt.UTC)
    return moment.strftime("%Y%m%d%H%M%S") + f"{moment.microsecond // 1000:03d}"


def parse_time(text: str) -> _dt.datetime:
    """Parse a 14- or 17-digit instant time as a UTC datetime."""
    if not text.isdigit() or len(text) not in (14, 17):
        raise TimelineError(f"'{text}' is not an instant time (yyyyMMddHHmmss[SSS])")
    base = _dt.datetime.strptime(text[:14], "%Y%m%d%H%M%S").replace(tzinfo=_dt.UTC)
    millis = int(text[14:] or 0)
    return base + _dt.timedelta(milliseconds=millis)


def _now() -> _dt.datetime:
    return _dt.datetime.now(_dt.UTC)


def next_instant_time(meta_folder: str | os.PathLike[str]) -> str:
    """A new instant time for the table whose `.hoodie` folder is given (strictly increasing)."""
    folder = Path(meta_folder)
    clock = folder / CLOCK_FILE
    with open(folder / (CLOCK_FILE + ".lock"), "a+") as lock:
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
