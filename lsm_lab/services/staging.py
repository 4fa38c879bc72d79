"""Staging folders of engine write jobs: when one is dead, and who removes it.

A Spark write through `format("lsm_lab")` (spark/datasource.py) stages its rows before the commit:

    <table>/.hoodie/.lsm_lab_staging/<job>/_beat                 the job's last sign of life (ms since the epoch)
    <table>/.hoodie/.lsm_lab_staging/<job>/part-<p>-<attempt>-….arrow   one file per write task

    driver  writer()   ─► _beat                 (the job exists)
    tasks   write()    ─► _beat every BEAT_INTERVAL while rows come, then the staged file, then _beat
    driver  commit()   ─► _beat every BEAT_INTERVAL (a thread) while the table write runs, then the folder goes
            abort()    ─► the folder goes

The folder is hidden (readers and listings skip it); a driver that dies between its tasks and the end
of its commit leaves it behind.  The next writer removes it — every table write sweeps the staging
folders while it cleans up after dead writers (services/rollback.py `sweep`), and every Spark write job
does when it starts — but only a *dead* job's: one whose `_beat` (or, without one, its newest file) is
older than `lsm_lab.staging.max.age.s` (a table property; default 3,600 s).  Two Spark jobs writing one
table at once therefore never remove each other's rows: each keeps beating while its tasks read rows
and while its commit runs.

Why an age and not the heartbeat's OS lock (services/heartbeat.py): a PySpark data source's `writer()`,
its tasks and its `commit()` each run in a different Python worker process, which Spark pools and
reuses, so no process lives exactly as long as the job; a beat written by whichever of them is working
does.  A live job whose tasks receive no row for longer than the limit may lose staged files to a sweep:
its commit then fails (nothing is committed) and says so — raise the limit for such jobs.

Simplified compared with Apache Hudi: Hudi's Spark writer has no staging folder (its tasks write data
files directly, under markers, and a dead job's files are rolled back by markers); lsm_lab's Python
data source cannot shuffle rows to file groups before its tasks, so it stages them.

Taught in: no chapter (README "Reading an lsm_lab table from other engines", the Spark data source)
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Collection, Mapping
from pathlib import Path

from lsm_lab.errors import InputError
from lsm_lab.storage import StoragePath, TablePath, atomic, list_names, open_read, paths

#: hidden folder of the table (listings skip it) where write jobs stage their rows until the commit
STAGING = ".lsm_lab_staging"


def staging_root(base_path: TablePath) -> TablePath:
    """`<table>/.hoodie/.lsm_lab_staging`: inside `.hoodie/`, so the LIST of `.hoodie/` every operation makes (its
    timeline) also shows whether any job stages rows — the sweep costs no request of its own on an object
    store (storage/scope.py) — and readers of the data folders never see it."""
    return base_path / ".hoodie" / STAGING
#: the file holding a job's last beat
BEAT = "_beat"
#: table property: seconds without a beat after which a staging folder belongs to a dead job
MAX_AGE_PROPERTY = "lsm_lab.staging.max.age.s"
DEFAULT_MAX_AGE = 3600.0
#: seconds between two beats of a working task or commit
BEAT_INTERVAL = 30.0


def max_age_of(props: Mapping[str, str]) -> float:
    raw = props.get(MAX_AGE_PROPERTY, DEFAULT_MAX_AGE)
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise InputError(f"table property {MAX_AGE_PROPERTY} must be a number of seconds, got {raw!r}") from None
    if value <= 0:
        raise InputError(f"table property {MAX_AGE_PROPERTY} must be positive, got {raw!r}")
    return value


def job_folder(base_path: TablePath, job: str) -> TablePath:
    return staging_root(base_path) / paths.name(job, field="staging job")


def _now_ms() -> int:
    return int(time.time() * 1000)


def beat(base_path: TablePath, job: str) -> None:
    """Record that job `job` is alive now (creates its folder)."""
    path = job_folder(base_path, job) / BEAT
    data = str(_now_ms()).encode("ascii")
    if isinstance(path, StoragePath):
        path.write_bytes(data)
    else:
        atomic.replace_file(path, data, fsync=False, mkdir=True)


class Beating:
    """`with Beating(base_path, job):` beats every `interval` seconds from a thread (a commit that takes long)."""

    def __init__(self, base_path: TablePath, job: str, interval: float = BEAT_INTERVAL) -> None:
        self.base_path, self.job, self.interval = base_path, job, interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Beating:
        beat(self.base_path, self.job)

        def run() -> None:
            while not self._stop.wait(self.interval):
                try:
                    beat(self.base_path, self.job)
                except Exception:  # noqa: BLE001 - a failed beat: try again at the next one
                    continue

        self._thread = threading.Thread(target=run, name=f"lsm_lab-staging-{self.job}", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


def age_s(folder: TablePath) -> float | None:
    """Seconds since the job of `folder` last showed life: its `_beat`, else its newest file (None: empty)."""
    try:
        with open_read(folder / BEAT) as fh:
            text = fh.read().decode("ascii", errors="replace").strip()
        return (_now_ms() - int(text)) / 1000.0
    except FileNotFoundError:
        pass
    except ValueError:
        return float("inf")  # a damaged beat: nobody keeps it up
    newest: float | None = None
    for name in list_names(folder):
        try:
            stamp = (folder / name).stat().st_mtime
        except FileNotFoundError:
            continue
        newest = stamp if newest is None else max(newest, stamp)
    return None if newest is None else time.time() - newest


def sweep(base_path: TablePath, props: Mapping[str, str], *, keep: Collection[str] = ()) -> list[str]:
    """Remove the staging folders of dead jobs (all but `keep`); returns the jobs removed."""
    top = staging_root(base_path)
    names = list_names(top)
    if not names:
        return []
    limit = max_age_of(props)
    gone = []
    for job in sorted(names):
        if job in keep:
            continue
        folder = top / job
        age = age_s(folder)
        if age is not None and age < limit:
            continue  # a live job (or one dead for less than the limit)
        remove(base_path, job)
        gone.append(job)
    return gone


def remove(base_path: TablePath, job: str) -> None:
    """Remove job `job`'s staging folder, and the staging folder itself once no job is left in it.

    Locally only a real folder directly inside a real `<table>/.hoodie/.lsm_lab_staging` goes (never a link, nor
    anything through one)."""
    folder = job_folder(base_path, job)
    if isinstance(folder, StoragePath):
        folder.rmtree()
        return
    top, local = Path(str(staging_root(base_path))), Path(str(folder))
    if top.is_symlink() or local.is_symlink() or not local.is_dir():
        return
    shutil.rmtree(local, ignore_errors=True)
    try:
        top.rmdir()  # only when no other job stages there
    except OSError:
        pass


__all__ = [
    "BEAT",
    "BEAT_INTERVAL",
    "DEFAULT_MAX_AGE",
    "MAX_AGE_PROPERTY",
    "STAGING",
    "Beating",
    "age_s",
    "beat",
    "job_folder",
    "max_age_of",
    "remove",
    "staging_root",
    "sweep",
]
