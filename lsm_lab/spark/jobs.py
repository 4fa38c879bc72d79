"""Running lsm_lab's own functions as Spark tasks: identity, memory, progress, errors.

Every Spark job of `lsm_lab.spark` has the same shape: the driver decides what
each task does (a file group to write, a compaction operation, a file slice to
read), ships plain arguments in the task closure, and the task calls the
library function that does the work:

    driver                                   executor (Python worker)
    ──────                                   ────────────────────────
    with job_progress(spark, "upsert"):      task_identity()  → partition, stage, attempt
        rows = df.mapInArrow(fn).collect()     ├ write token "<partition>-<stage>-<attempt>"
        │   ▲  tqdm bar fed by the             ├ lsm_lab function (write_file_group, run_full, read_slice)
        │   │  status tracker (tasks done)     └ TaskReport: seconds, rows, peak RSS of this worker
        └── report rows back to the driver

**Write tokens.** A file's name carries the task that wrote it: Spark's task
partition id, stage id and attempt number (Hudi's `<partitionId>-<stageId>-<attemptId>`).
A retried task writes under a new name, so two attempts never overwrite each
other; the driver keeps only the files its successful tasks reported.

**Memory.** `peak_rss_mib` is the Python worker's peak RSS *during the task*:
the task resets the kernel's high-water mark when it starts (`5` written to
`/proc/self/clear_refs`) and reads `VmHWM` from `/proc/self/status` when it
ends, so the figure is the task's own even when `spark.python.worker.reuse=true`
lets one worker run many tasks. `start_rss_mib` is the worker's RSS when the
task began, after it handed memory earlier tasks freed back to the system
(`gc.collect(1)`, then the Arrow pool's `release_unused()`; without that a
reused worker starts where the last task's peak left it) and dropped the key
facts `format/written_facts.py` keeps of the files it wrote (they serve a commit in the
writing process; here the driver commits, so they only grew the worker by each
file's bloom, ~5 MiB per 8 tasks of 500k rows), so the difference is what the
task added. Where `/proc` cannot be written, the figure
is `getrusage(RUSAGE_SELF).ru_maxrss`, the worker's whole life (`peak_scope`
says which). Reusing workers matters for time: a fresh worker per task cost
about a second of start-up here (16 empty tasks on `local[2]`: 8-10 s with
reuse off, 1.5-2 s with it on). The JVM's memory is not the Python worker's
(`jvm_peak_mib` reads the driver JVM's VmHWM).

**Errors.** An `LsmLabError` raised inside a task reaches the driver as
Spark's `PythonException`, with the Python traceback as text; `reraise` turns
it back into the same lsm_lab error class (any other failure becomes a
`SparkJobError` carrying Spark's first error line). Before that, the job group
is cancelled and the driver waits until none of its tasks still runs, so the
caller's clean-up (deleting the instant's files) never races a task that is
still writing one.

Simplified compared with Apache Hudi's Spark integration: no accumulators or
custom `SparkListener`s; the progress bar polls `statusTracker()`.

Taught in: notebooks/10_sorted_vs_hash_on_spark.ipynb
"""

from __future__ import annotations

import contextlib
import gc
import os
import re
import resource
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from lsm_lab import errors
from lsm_lab.errors import LsmLabError
from lsm_lab.format import naming, written_facts
from lsm_lab.progress import new_bar
from lsm_lab.services.rollback import files_of_instant
from lsm_lab.spark.session import spark_session
from lsm_lab.storage import StoragePath, TablePath
from lsm_lab.timeline.metadata import WriteStat


class SparkJobError(LsmLabError):
    """A Spark job of lsm_lab failed for a reason that is not an lsm_lab error (see the message)."""


# --------------------------------------------------------------------------- inside a task
@dataclass(frozen=True)
class TaskIdentity:
    """Who is running: Spark's task partition id, stage id and attempt number."""

    partition: int
    stage: int
    attempt: int

    @property
    def token(self) -> str:
        """The write token of files this attempt creates (`<partition>-<stage>-<attempt>`)."""
        return naming.write_token(self.partition, self.stage, self.attempt)


def task_identity() -> TaskIdentity:
    """The running task's identity (0-0-0 outside Spark, e.g. when a task function is unit-tested)."""
    from pyspark import TaskContext

    tc = TaskContext.get()
    if tc is None:
        return TaskIdentity(0, 0, 0)
    return TaskIdentity(tc.partitionId(), tc.stageId(), tc.attemptNumber())


TaskHook = Callable[[TaskIdentity], None]  # called by a task after it wrote its files (tests inject failures)


class InjectedTaskFailure(RuntimeError):
    """Raised by `FailTask` inside a task (a test's stand-in for a lost executor or a crash)."""


@dataclass(frozen=True)
class FailTask:
    """A task hook that fails chosen attempts of one task, after it wrote its files (for tests).

    `attempts=(0,)` fails the first attempt only (Spark retries it when
    `spark.task.maxFailures` > 1, e.g. master `local[2,3]`); `attempts=()`
    fails every attempt, so the job fails.
    """

    partition: int = 0
    attempts: tuple[int, ...] = (0,)

    def __call__(self, who: TaskIdentity) -> None:
        if who.partition == self.partition and (not self.attempts or who.attempt in self.attempts):
            raise InjectedTaskFailure(f"injected failure in task {who.token}")


def rss_mib() -> float:
    """The current resident set size of this process (MiB), from /proc (0.0 where there is none)."""
    try:
        with open("/proc/self/statm") as fh:
            pages = int(fh.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return 0.0


def max_rss_mib() -> float:
    """`ru_maxrss` of this process in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def reset_peak_rss(pid: int | str = "self") -> bool:
    """Reset the kernel's peak RSS (VmHWM) of a process to its current RSS; False where that is not possible."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def peak_rss_mib(pid: int | str = "self") -> float | None:
    """VmHWM (peak RSS since the start or the last `reset_peak_rss`) of a process in MiB; None without /proc."""
    try:
        m = re.search(r"^VmHWM:\s+(\d+)\s+kB", Path(f"/proc/{pid}/status").read_text(), re.M)
    except OSError:
        return None
    return int(m.group(1)) / 1024 if m else None


@dataclass
class TaskReport:
    """What one task sends back to the driver besides its results."""

    task: int
    token: str
    seconds: float
    rows: int
    start_rss_mib: float
    peak_rss_mib: float
    pid: int
    peak_scope: str = "task"  # "task": VmHWM reset when the task began; "worker": ru_maxrss of the worker's life
    cpu_seconds: float = 0.0  # CPU time of the worker process (all threads) during the task: less load-sensitive

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class TaskClock:
    """Started when a task begins; `report(rows)` at the end gives its TaskReport."""

    def __init__(self, task: int | None = None) -> None:
        self.identity = task_identity()
        self.task = self.identity.partition if task is None else task
        # a reused worker: hand back what earlier tasks freed, so the task's figures are its own (the young
        # generations only: a full collection of the worker's ~100k objects costs ~40 ms per task); the key
        # facts written_facts keeps for a local commit are never asked for here (the driver commits): a 500k-row
        # file's bloom is ~0.6 MiB, and a worker kept them up to 64 MiB
        written_facts.forget_written()
        gc.collect(1)
        pa.default_memory_pool().release_unused()
        self.start = time.perf_counter()
        self.cpu_start = time.process_time()
        self.per_task = reset_peak_rss()
        self.start_rss = rss_mib()

    def report(self, rows: int) -> TaskReport:
        peak = peak_rss_mib() if self.per_task else None
        return TaskReport(self.task, self.identity.token, time.perf_counter() - self.start, rows,
                          round(self.start_rss, 1), round(max_rss_mib() if peak is None else peak, 1), os.getpid(),
                          "task" if peak is not None else "worker", round(time.process_time() - self.cpu_start, 3))


# --------------------------------------------------------------------------- on the driver
def reconcile(base_path: TablePath, instant: str, stats: Sequence[WriteStat]) -> list[str]:
    """Delete files of `instant` that no write stat names (left by failed or retried task attempts)."""
    keep = {s.path for s in stats} | {f"{s.partitionPath}/{n}" if s.partitionPath else n
                                      for s in stats for n in s.logFiles}
    keep |= {rel for s in stats for rel in (s.cdcStats or {})}  # CDC logs (filegroup/cdclog.py)
    removed = []
    for path in files_of_instant(base_path, instant):
        rel = path.relative_to(base_path).as_posix()
        if rel not in keep:
            path.unlink(missing_ok=True)
            removed.append(rel)
    return removed


def active_session(spark: Any = None) -> Any:
    """`spark` if given, else the active session, else a new one with lsm_lab's defaults."""
    if spark is not None:
        return spark

    return spark_session()


def table_uri(path: str | os.PathLike[str] | StoragePath) -> str:
    """`file://<absolute path>` for a local path, as Hadoop's `Path` wants it (no percent-encoding: a
    partition folder `city=chennai` stays as it is); paths with a scheme are returned unchanged."""
    text = str(path) if isinstance(path, StoragePath) else os.fspath(path)
    if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*://", text):
        return text
    return "file://" + Path(text).resolve().as_posix()


def spark_schema(schema: pa.Schema) -> Any:
    """The Spark StructType of an Arrow schema (timestamps with a time zone stay TimestampType)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(schema, prefer_timestamp_ntz=True)


def arrow_schema_for(struct: Any) -> pa.Schema:
    """The Arrow schema Spark expects back from `mapInArrow` for a StructType."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(struct, timezone="UTC")


def jvm_pid(spark: Any) -> int | None:
    """The process id of the driver JVM (None if it cannot be asked)."""
    try:
        return int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
    except Exception:  # noqa: BLE001 - diagnostics only
        return None


def jvm_peak_mib(pid: int | None, *, reset: bool = False) -> float | None:
    """VmHWM (peak RSS) of process `pid` in MiB; `reset=True` resets the peak to the current RSS after reading."""
    if pid is None:
        return None
    value = peak_rss_mib(pid)
    if value is not None and reset:
        reset_peak_rss(pid)
    return value


@contextlib.contextmanager
def job_progress(spark: Any, description: str, *, enabled: bool | None = None,
                 unit: str = "task") -> Iterator[None]:
    """Run the enclosed Spark actions as one job group, with a tqdm bar of completed tasks on the driver.

    `enabled=None` follows `lsm_lab.progress` (no bars under pytest or with
    LSM_LAB_PROGRESS=0). The bar counts tasks of every stage of the group's jobs.
    """
    sc = spark.sparkContext
    group = f"lsm_lab-{uuid.uuid4().hex[:12]}"
    sc.setJobGroup(group, description, interruptOnCancel=True)
    # a terminal bar or a notebook widget blanked when it closes; None where nobody watches (pipes, files, tests)
    bar = new_bar(total=None, desc=description, unit=unit, force=enabled)
    stop = threading.Event()

    def poll() -> None:
        tracker = sc.statusTracker()
        while not stop.wait(0.5):
            try:
                done = total = 0
                for job in tracker.getJobIdsForGroup(group):
                    info = tracker.getJobInfo(job)
                    for stage in (info.stageIds if info else []):
                        s = tracker.getStageInfo(stage)
                        if s is not None:
                            done += s.numCompletedTasks
                            total += s.numTasks
                if total:
                    bar.total, bar.n = total, done
                    bar.refresh()
            except Exception:  # noqa: BLE001 - the bar is cosmetic; the session may be stopping
                return

    thread = threading.Thread(target=poll, name="lsm_lab-progress", daemon=True)
    if bar is not None:
        thread.start()
    try:
        yield
    except BaseException:
        sc.cancelJobGroup(group)
        _wait_for_tasks(sc, group)  # no task of a failed job may still be writing when the caller cleans up
        raise
    finally:
        stop.set()
        if thread.is_alive():
            thread.join(timeout=2)
        if bar is not None:
            bar.close()
        sc.setLocalProperty("spark.jobGroup.id", None)
        sc.setLocalProperty("spark.job.description", None)


def _wait_for_tasks(sc: Any, group: str, timeout: float = 60.0) -> None:
    """Wait until no task of the job group is running (Spark kills them after a job fails)."""
    tracker = sc.statusTracker()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            running = 0
            for job in tracker.getJobIdsForGroup(group):
                info = tracker.getJobInfo(job)
                for stage in (info.stageIds if info else []):
                    s = tracker.getStageInfo(stage)
                    running += s.numActiveTasks if s is not None else 0
        except Exception:  # noqa: BLE001 - the session is stopping: nothing runs any more
            return
        if running == 0:
            return
        time.sleep(0.2)


_LSM_ERROR = re.compile(r"lsm_lab\.errors\.(\w+): (.*)")


def reraise(exc: BaseException, what: str) -> None:
    """Re-raise a failed Spark action: the lsm_lab error a task raised, or a SparkJobError."""
    if isinstance(exc, LsmLabError):
        raise exc
    text = str(exc)
    found = _LSM_ERROR.findall(text)
    if found:
        name, message = found[-1]
        cls = getattr(errors, name, None)
        if isinstance(cls, type) and issubclass(cls, LsmLabError):
            raise cls(message.strip()) from exc
    raise SparkJobError(f"{what} failed on Spark: {_first_error_line(text)[:500]}") from exc


def _first_error_line(text: str) -> str:
    """The Python exception line of a worker traceback inside Spark's message, else its first error line."""
    in_traceback = False
    for line in text.splitlines():
        if "Traceback (most recent call last)" in line:
            in_traceback = True
        elif in_traceback and line.strip() and not line.startswith((" ", "\t")):
            return line.strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return next((ln for ln in lines if re.match(r"^[\w.]+(Error|Exception):", ln)), lines[0] if lines else "unknown")


__all__ = [
    "FailTask", "InjectedTaskFailure", "SparkJobError", "TaskClock", "TaskHook", "TaskIdentity", "TaskReport",
    "active_session", "arrow_schema_for", "job_progress", "jvm_peak_mib", "jvm_pid", "max_rss_mib", "peak_rss_mib",
    "reconcile", "reraise", "reset_peak_rss", "rss_mib", "spark_schema", "table_uri", "task_identity",
]
