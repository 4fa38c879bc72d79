"""A real Spark standalone cluster on this machine: one master, N workers, started from the installed pyspark.

    StandaloneCluster(workers=2)                         127.0.0.1
    ────────────────────────────                         ─────────
    spark-class ...deploy.master.Master ───────────────► master  spark://127.0.0.1:<port>   (web UI: /json/ status)
    spark-class ...deploy.worker.Worker spark://… ×N ──► workers (1 core, 1 GiB each)
                                                              └── executor JVM ── Python workers (this venv)
    driver: spark_session(**cluster.driver_conf())  ─ tasks ─►  executors read and write the table folder

Use it as a context manager; `stop()` (also run at interpreter exit) kills the
process group of every daemon it started, which takes their executors and
Python workers with it:

    with StandaloneCluster(workers=2) as cluster:
        spark = spark_session(**cluster.driver_conf())
        write_table(df, "/data/trips")      # /data/trips must be reachable from every executor

Each daemon runs in its own session (`setsid`), with its logs, work folder
and scratch space (`SPARK_LOCAL_DIRS`) under one temporary folder, on free
ports, bound to 127.0.0.1. The master's REST submission server is off (it
would take the fixed port 6066).

This is for tests and for trying a cluster out. To use an existing cluster,
pass its URL to `spark_session(**{"spark.master": "spark://host:7077"})` (or set
`SPARK_MASTER`); the table path must then be storage every executor can reach
(a shared file system mounted at the same path on every node), and every node
needs the same Python with lsm_lab installed (`PYSPARK_PYTHON`).

Simplified compared with Spark's own `sbin/start-*.sh` scripts: no
`spark-env.sh`, no pid files, no high availability, no dynamic allocation.

Taught in: notebooks/10_sorted_vs_hash_on_spark.ipynb
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from lsm_lab.spark.session import SparkSetupError, check_java


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def spark_home() -> Path:
    """The installed pyspark package folder, which holds `bin/spark-class` and the jars."""
    try:
        import pyspark
    except ImportError as exc:  # pragma: no cover - pyspark is a dependency
        raise SparkSetupError(f"PySpark is not installed: {exc}") from None
    home = Path(pyspark.__file__).resolve().parent
    if not (home / "bin" / "spark-class").is_file():
        raise SparkSetupError(f"no bin/spark-class in {home}: this pyspark cannot start a standalone cluster")
    return home


@dataclass
class StandaloneCluster:
    """A Spark standalone master and `workers` workers on 127.0.0.1, started and stopped by this object."""

    workers: int = 2
    cores: int = 1          # per worker
    memory: str = "1g"      # per worker (the executors' share)
    host: str = "127.0.0.1"
    root: Path | None = None  # logs, work and scratch folders (default: a new temporary folder)
    timeout: float = 180.0
    master_url: str = ""
    ui_url: str = ""
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    pgids: list[int] = field(default_factory=list)  # process groups started (kept after stop, for checks)
    _own_root: bool = False

    # ------------------------------------------------------------------ start
    def start(self) -> StandaloneCluster:
        """Start the master, then the workers; return once every worker has registered."""
        if self.processes:
            return self
        check_java()
        home = spark_home()
        if self.root is None:
            self.root = Path(tempfile.mkdtemp(prefix="lsm_lab_spark_cluster_"))
            self._own_root = True
        self.root.mkdir(parents=True, exist_ok=True)
        atexit.register(self.stop)
        port, ui = free_port(self.host), free_port(self.host)
        self.master_url = f"spark://{self.host}:{port}"
        self.ui_url = f"http://{self.host}:{ui}"
        try:
            self._launch("master", home, ["org.apache.spark.deploy.master.Master", "--host", self.host,
                                          "--port", str(port), "--webui-port", str(ui)])
            self._wait(lambda s: s.get("status") == "ALIVE", "the master to come up")
            for i in range(self.workers):
                work = self.root / f"worker-{i}"
                work.mkdir(exist_ok=True)
                self._launch(f"worker-{i}", home, [
                    "org.apache.spark.deploy.worker.Worker", "--host", self.host, "--port", str(free_port(self.host)),
                    "--webui-port", str(free_port(self.host)), "--cores", str(self.cores), "--memory", self.memory,
                    "--work-dir", str(work), self.master_url])
            self._wait(lambda s: int(s.get("aliveworkers", 0)) >= self.workers, f"{self.workers} worker(s) to register")
        except BaseException:
            self.stop()
            raise
        return self

    def _env(self, name: str, home: Path) -> dict[str, str]:
        assert self.root is not None
        local = self.root / f"{name}-local"
        local.mkdir(exist_ok=True)
        env = dict(os.environ)
        env.update({
            "SPARK_HOME": str(home), "SPARK_LOCAL_IP": self.host, "SPARK_LOCAL_DIRS": str(local),
            "SPARK_LOG_DIR": str(self.root), "SPARK_WORKER_DIR": str(self.root / f"{name}-work"),
            "SPARK_DAEMON_MEMORY": "256m", "SPARK_NO_DAEMONIZE": "1",
            "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
            "PYSPARK_PYTHON": env.get("PYSPARK_PYTHON", sys.executable),
        })
        return env

    def _launch(self, name: str, home: Path, args: list[str]) -> None:
        assert self.root is not None
        log = open(self.root / f"{name}.log", "wb")  # noqa: SIM115 - held open on purpose
        try:
            proc = subprocess.Popen([str(home / "bin" / "spark-class"), *args], env=self._env(name, home),
                                    stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
        finally:
            log.close()
        self.processes.append(proc)
        self.pgids.append(proc.pid)

    def status(self) -> dict[str, Any]:
        """The master's status page as JSON (`aliveworkers`, `activeapps`, ...); {} when it does not answer."""
        try:
            with urllib.request.urlopen(f"{self.ui_url}/json/", timeout=5) as resp:
                return cast("dict[str, Any]", json.loads(resp.read().decode("utf-8")))
        except (urllib.error.URLError, OSError, ValueError):
            return {}

    def _wait(self, ready: Any, what: str) -> None:
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            for proc in self.processes:
                if proc.poll() is not None:
                    raise SparkSetupError(f"a Spark daemon exited (code {proc.returncode}) while waiting for {what}:"
                                          f"\n{self.log_tail()}")
            if ready(self.status()):
                return
            time.sleep(0.5)
        raise SparkSetupError(f"timed out after {self.timeout:.0f} s waiting for {what}:\n{self.log_tail()}")

    def log_tail(self, lines: int = 15) -> str:
        """The last lines of every daemon log (for error messages)."""
        if self.root is None:
            return ""
        out = []
        for log in sorted(self.root.glob("*.log")):
            text = log.read_text(errors="replace").splitlines()[-lines:]
            out.append(f"--- {log.name}\n" + "\n".join(text))
        return "\n".join(out)

    def driver_conf(self, *, executor_memory: str = "512m") -> dict[str, str]:
        """Settings for `spark_session(**...)` that run the application on this cluster with small executors."""
        return {"spark.master": self.master_url, "spark.executor.memory": executor_memory,
                "spark.executor.cores": str(self.cores), "spark.cores.max": str(self.cores * self.workers),
                "spark.sql.shuffle.partitions": str(2 * self.cores * self.workers),
                "spark.default.parallelism": str(2 * self.cores * self.workers)}

    # ------------------------------------------------------------------ stop
    def stop(self) -> None:
        """Stop every process this object started (workers first), with their executors; remove a temp root."""
        for proc in reversed(self.processes):
            _kill_group(proc, signal.SIGTERM)
        deadline = time.monotonic() + 20
        for proc in reversed(self.processes):
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            _kill_group(proc, signal.SIGKILL)  # stragglers of the group (executors, Python workers)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:  # pragma: no cover - a process that ignores SIGKILL
                pass
        self.processes.clear()
        atexit.unregister(self.stop)
        if self._own_root and self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)

    def alive_pids(self) -> list[int]:
        """Process ids still alive in the process groups this object started (empty after `stop`)."""
        return [pid for pgid in self.pgids for pid in _group_members(pgid)]

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _kill_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)  # the daemon leads its own group (start_new_session)
    except (ProcessLookupError, PermissionError):
        pass


def _group_members(pgid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            out.append(int(entry.name))
    return out


__all__ = ["StandaloneCluster", "free_port", "spark_home"]
