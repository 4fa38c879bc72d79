"""One local SparkSession for every Spark test of the run (a cold start costs 10-30 s).

`local[2,3]`: two cores, and a failed task is tried up to three times, so
tests can inject a failure into the first attempt and watch the retry.

The driver JVM runs with C1 only and the serial collector: the tests' jobs are small and many, and on
2 cores the C2 compiler threads (and G1's) took CPU from them; nothing a test checks depends on the JIT.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

SPARK_CONF = {
    "spark.master": "local[2,3]",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.driver.memory": "1g",
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
}


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from lsm_lab.spark.session import SparkSetupError, spark_session

    try:
        s = spark_session("lsm_lab-tests", **SPARK_CONF)
    except SparkSetupError as exc:
        pytest.skip(str(exc))
    yield s
    s.stop()
