"""The spill of a streamed write: each destination's rows in local Arrow IPC files, in a folder that names its owner.

A streamed write (filegroup/stream_write.py) reads its whole input before it writes a file group, so
it parks each chunk's share of every destination in Arrow IPC files (`Spill`, read back memory-mapped)
in a folder of the local disk (`spill_dir`, default the system's temporary folder; about the input's
size, uncompressed), removed when the write ends.  A writer killed with SIGKILL (a crash test, the OOM
killer) cannot remove it, and it is outside the table, so the next writer's rollback never sees it.
So the folder's name says who owns it, and every
streamed write first sweeps the spill folder's parent for the folders of owners that are gone:

    <spill_dir>/lsm_lab-stream-<pid>-<start>-<pidns>-<random>/0.arrow 1.arrow ...
                                 │      │       │
                                 │      │       └ inode of /proc/self/ns/pid: a folder of another pid namespace
                                 │      │         (a container sharing /tmp) is not ours to judge → kept
                                 │      └ start time of the process (field 22 of /proc/<pid>/stat, clock
                                 │        ticks since boot): a pid reused later has another start
                                 └ the owner's pid
    owner gone  = no /proc/<pid>, or a zombie, or a different start time  → folder removed
    owner alive, another pid namespace, not our uid, a symlink, an old   → left alone
                 random-only name (`lsm_lab-stream-xxxxxxxx`: its owner cannot be known)

The owner is written into the name, not into a file inside the folder: the name exists atomically
with the folder (`mkdtemp`), while an owner file leaves an instant (a kill between `mkdir` and the
write) where a folder has no known owner.  The start time is what makes a pid safe to judge: pids
are reused, and a pid alone (`kill(pid, 0)`) keeps a dead writer's folder for as long as another
process holds its number; every doubt errs on the side of keeping a folder, never of removing a
live writer's spill.  Without /proc (macOS, BSD) the name carries start 0 and the sweep falls
back to `os.kill(pid, 0)` (no such process: gone; alive or not permitted: kept); on Windows
nothing is swept.  The sweep follows no symlink (entries are checked with `lstat`; `shutil.rmtree`
refuses a symlink and, on Linux, removes below a folder by file descriptor), removes only folders
of this user, and never fails the write: an error (a permission, a folder another sweeper removed
first) is logged at DEBUG (logger `lsm_lab.stream`) and the folder skipped.

Simplified compared with Apache Hudi: Hudi's writers shuffle records through Spark or Flink,
whose own spill files are the engine's to manage; there is no local spill to clean.

Taught in: no chapter (README "Streaming writes")
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import tempfile
from collections.abc import Hashable
from pathlib import Path
from typing import Generic, TypeVar

import pyarrow as pa

# --------------------------------------------------------------------------- the folder and its owner
SPILL_PREFIX = "lsm_lab-stream-"
_SPILL_NAME = re.compile(re.escape(SPILL_PREFIX) + r"(\d+)-(\d+)-(\d+)-[a-z0-9_]+")
LOG = logging.getLogger("lsm_lab.stream")


def _proc_stat(pid: int | str) -> tuple[str, int] | None:
    """(state, start time in clock ticks since boot) of a process from /proc/<pid>/stat; None: no such process."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = text[text.rindex(")") + 2:].split()  # after "pid (comm) ": the name may hold spaces and ")"
    return fields[0], int(fields[19])  # field 3 (state) and field 22 (starttime)


def _has_proc() -> bool:
    return os.path.exists("/proc/self/stat")


def _pid_namespace() -> int:
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return 0


def spill_prefix() -> str:
    """The name prefix of this process's spill folders: `lsm_lab-stream-<pid>-<start>-<pid namespace>-`."""
    pid, start = os.getpid(), 0
    if _has_proc():
        try:
            own = _proc_stat("self")
        except (OSError, ValueError, IndexError):
            own = None
        start = own[1] if own is not None else 0
    return f"{SPILL_PREFIX}{pid}-{start}-{_pid_namespace()}-"


def owner_alive(name: str) -> bool | None:
    """Whether the process that made the spill folder `name` still runs: True, False (gone), or None (not a
    spill folder with a known owner, or not ours to judge: keep it)."""
    m = _SPILL_NAME.fullmatch(name)
    if m is None:
        return None
    pid, start, ns = (int(g) for g in m.groups())
    if os.name != "posix" or pid == 0:
        return None
    if _has_proc():
        if ns != _pid_namespace():
            return None
        try:
            stat = _proc_stat(pid)
        except (OSError, ValueError, IndexError):
            return None
        if stat is None or stat[0] in ("Z", "X"):  # no such process, or one that has exited (a zombie)
            return False
        return start == 0 or stat[1] == start  # another start time: the pid was reused, the owner is gone
    if start != 0 or ns != 0:  # made where /proc was: a pid of another system's numbering
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: a process of another user holds the pid
        return True
    return True


def sweep_spill_folders(spill_dir: str | os.PathLike[str] | None = None) -> list[Path]:
    """Remove the spill folders in `spill_dir` (default: the system's temporary folder) whose owner process is
    gone; returns the folders removed.  Never raises for what it meets there (logged at DEBUG)."""
    parent = Path(spill_dir) if spill_dir is not None else Path(tempfile.gettempdir())
    removed: list[Path] = []
    try:
        entries = [e for e in os.scandir(parent) if e.name.startswith(SPILL_PREFIX)]
    except OSError as exc:
        LOG.debug("spill sweep: cannot list %s: %s", parent, exc)
        return removed
    uid = os.geteuid() if hasattr(os, "geteuid") else None
    for entry in entries:
        try:
            if owner_alive(entry.name) is not False:
                continue
            st = entry.stat(follow_symlinks=False)
            if not entry.is_dir(follow_symlinks=False) or (uid is not None and st.st_uid != uid):
                continue  # a symlink or a file of that name; another user's folder
            shutil.rmtree(entry.path)
            removed.append(Path(entry.path))
        except OSError as exc:
            LOG.debug("spill sweep: left %s: %s", entry.path, exc)
    return removed


# --------------------------------------------------------------------------- the spill
K = TypeVar("K", bound=Hashable)  # a destination: stream_write's (kind, partition, file id or bin)


class Spill(Generic[K]):
    """Each destination's rows, chunk after chunk, in local Arrow IPC files (read back memory-mapped)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.files: dict[K, list[Path]] = {}
        self.rows: dict[K, int] = {}
        self._n = 0

    def add(self, dest: K, rows: pa.Table) -> None:
        if rows.num_rows == 0:
            return
        path = self.folder / f"{self._n}.arrow"
        self._n += 1
        with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, rows.schema) as out:
            out.write_table(rows)
        self.files.setdefault(dest, []).append(path)
        self.rows[dest] = self.rows.get(dest, 0) + rows.num_rows

    def runs(self, dest: K) -> list[pa.Table]:
        return [pa.ipc.open_file(pa.memory_map(str(p))).read_all() for p in self.files.get(dest, [])]


__all__ = ["SPILL_PREFIX", "Spill", "owner_alive", "spill_prefix", "sweep_spill_folders"]
