"""A SparkSession with quiet, fast defaults — local by default, a real cluster when asked.

    spark_session()                         local[*], UI off, progress bars off, 4 shuffle partitions,
                                            Arrow on, UTC, workers run *this* Python (PYSPARK_PYTHON)
    spark_session(**{"spark.master": "spark://127.0.0.1:7077"})      a standalone cluster
    SPARK_MASTER=spark://host:7077 …                                  the same, from the environment

An already active session is returned as is (its settings win), so a notebook
or a test run shares one JVM; Spark's cold start costs ~8 s.

PySpark 4 needs Java 17+: `check_java()` runs `java -version` first and raises
`SparkSetupError` with a clear message instead of Py4J's stack trace.

Simplified compared with a production deployment: no Kerberos, no dynamic
allocation tuning; the table path must be storage every executor can reach
(a local path works for local mode and for a cluster on one machine).

Taught in: notebooks/10_sorted_vs_hash_on_spark.ipynb
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from typing import Any

from lsm_lab.errors import LsmLabError


class SparkSetupError(LsmLabError):
    """Spark cannot start: no Java, an old Java, or PySpark missing."""


MIN_JAVA = 17

DEFAULTS: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.sql.adaptive.enabled": "true",
    "spark.python.worker.reuse": "true",
    "spark.driver.memory": "2g",
}


def java_major_version() -> int | None:
    java = shutil.which("java", path=os.path.join(os.environ["JAVA_HOME"], "bin") if os.environ.get("JAVA_HOME")
                        else None) or shutil.which("java")
    if java is None:
        return None
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if not m:
        return None
    major = int(m.group(1))
    return int(m.group(2) or 0) if major == 1 else major


def check_java() -> int:
    """The Java major version, or SparkSetupError when Java is missing or older than 17."""
    major = java_major_version()
    if major is None:
        raise SparkSetupError("Spark needs Java 17 or newer, but no 'java' was found on PATH or in JAVA_HOME. "
                              "Install a JDK 17+ (e.g. `apt install openjdk-17-jdk-headless`) and retry.")
    if major < MIN_JAVA:
        raise SparkSetupError(f"Spark (PySpark 4) needs Java {MIN_JAVA} or newer; found Java {major}. "
                              "Point JAVA_HOME at a JDK 17+.")
    return major


def spark_session(app_name: str = "lsm_lab", **conf: Any) -> Any:
    """Return the active SparkSession, or build one with lsm_lab's defaults (overridable by `conf`)."""
    try:
        from pyspark.sql import SparkSession
    except ImportError as exc:  # pragma: no cover - pyspark is a dependency
        raise SparkSetupError(f"PySpark is not installed: {exc}") from None
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    check_java()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    settings = dict(DEFAULTS)
    settings["spark.master"] = os.environ.get("SPARK_MASTER", "local[*]")
    settings.update({k: str(v) for k, v in conf.items()})
    builder = SparkSession.builder.appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
