"""A real Spark standalone cluster (master + 2 workers on 127.0.0.1): write, compact, read; rows equal local mode
(the campaign test) and the library's (the S3 test in make test).

The cluster's driver runs in a child process (one SparkContext per process;
the test run's local session stays up). The daemons are started and stopped
by this process, so they are stopped even when the child fails.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from lsm_lab.spark.cluster import StandaloneCluster

pytestmark = pytest.mark.spark  # ~55 s on a quiet 2-core machine (cluster start, a second driver)

JOB = r'''
import json, sys
from pathlib import Path
import lsm_lab
from lsm_lab.lab.datagen import TripsGenerator
from lsm_lab.spark import compact_table, read_table, spark_session, write_table

conf, folder = json.loads(sys.argv[1]), Path(sys.argv[2])
spark = spark_session("lsm_lab-cluster-test", **conf)
gen = TripsGenerator(5, late_fraction=0.2)
lsm_lab.create_table(folder / "trips", name="trips", record_key="uuid", partition_by="city",
                     ordering_field="ts", num_buckets=2)
write_table(gen.inserts(600), folder / "trips", op="insert", spark=spark)
write_table(gen.updates(200), folder / "trips", op="upsert", spark=spark)
write_table(gen.deletes(30), folder / "trips", op="delete", spark=spark)
done = compact_table(folder / "trips", spark=spark, strategy="full", merge="sorted")
cols = ["uuid", "ts", "fare", "city", "_hoodie_commit_time"]
read_table(folder / "trips", spark=spark, columns=cols).write.parquet(str(folder / "snapshot"))
apps = spark.sparkContext.master
spark.stop()
print(json.dumps({"compaction": done.begin_time, "master": apps}))
'''


def run_locally(spark: Any, folder: Path) -> list[dict[str, Any]]:
    """The same job on the test run's local session."""
    import lsm_lab
    from lsm_lab.lab.datagen import TripsGenerator
    from lsm_lab.spark import compact_table, read_table, write_table

    gen = TripsGenerator(5, late_fraction=0.2)
    path = folder / "trips"
    lsm_lab.create_table(path, name="trips", record_key="uuid", partition_by="city", ordering_field="ts",
                         num_buckets=2)
    write_table(gen.inserts(600), path, op="insert", spark=spark)
    write_table(gen.updates(200), path, op="upsert", spark=spark)
    write_table(gen.deletes(30), path, op="delete", spark=spark)
    compact_table(path, spark=spark, strategy="full", merge="sorted")
    rows = read_table(path, spark=spark, columns=["uuid", "ts", "fare", "city"]).toArrow().to_pylist()
    return sorted(rows, key=lambda r: r["uuid"])


@pytest.mark.campaign  # (make campaign) the S3 test below runs the same pipeline on a cluster in make test
def test_standalone_cluster_runs_the_pipeline(spark: Any, tmp_path: Path) -> None:
    cluster = StandaloneCluster(workers=2, cores=1, memory="1g", root=tmp_path / "cluster")
    try:
        cluster.start()
        assert cluster.status()["aliveworkers"] == 2
        out = subprocess.run([sys.executable, "-c", JOB, json.dumps(cluster.driver_conf()), str(tmp_path)],
                             capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, out.stderr[-3000:]
        result = json.loads(out.stdout.strip().splitlines()[-1])
        assert result["master"] == cluster.master_url
        apps = cluster.status().get("completedapps", [])
        assert any(a.get("name") == "lsm_lab-cluster-test" for a in apps)
    finally:
        cluster.stop()
    assert cluster.alive_pids() == []  # every daemon, executor and Python worker it started is gone
    remote = pq.read_table(tmp_path / "snapshot")
    assert set(remote.column("_hoodie_commit_time").to_pylist()) != set()
    got = sorted(remote.drop_columns(["_hoodie_commit_time"]).to_pylist(), key=lambda r: r["uuid"])
    assert got == run_locally(spark, tmp_path / "local")


def run_with_the_library(folder: Path) -> list[dict[str, Any]]:
    """The same job with the library alone (no Spark): what `write_table` and `compact_table` must store
    (tests/spark/test_spark_write.py and test_spark_compact_read.py check local-mode Spark against it)."""
    import lsm_lab
    from lsm_lab.lab.datagen import TripsGenerator

    gen = TripsGenerator(5, late_fraction=0.2)
    table = lsm_lab.create_table(folder / "trips", name="trips", record_key="uuid", partition_by="city",
                                 ordering_field="ts", num_buckets=2)
    table.insert(gen.inserts(600))
    table.upsert(gen.updates(200))
    table.delete(gen.deletes(30))
    table.compact(strategy="full", merge="sorted")
    rows = table.read(columns=["uuid", "ts", "fare", "city"]).to_pylist()
    return sorted(rows, key=lambda r: r["uuid"])


# The cluster's JVMs (daemons, driver, executors) are new and live for one short job: most of their CPU goes
# into the JIT warming up. C1 only and the serial collector take about a third off that on 2 cores (the
# daemons take SPARK_DAEMON_JAVA_OPTS, the driver and the executors their extraJavaOptions).
QUICK_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


# the same job on a table in a bucket of the test S3 server: the driver finds it through the AWS_* variables,
# the executors' Python tasks through the root they receive (pickled as URI + resolved options)
JOB_S3 = JOB.replace('folder / "trips"', "LOC").replace(
    "conf, folder = json.loads(sys.argv[1]), Path(sys.argv[2])",
    "conf, folder, LOC = json.loads(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]")


def test_standalone_cluster_on_an_s3_table(tmp_path: Path, s3_server: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pipeline on a cluster; its rows equal the library's (the local Spark session is not needed here:
    local mode's equality with the library is what the other Spark tests check)."""
    import os

    from lsm_lab.spark.session import SparkSetupError, check_java

    try:
        check_java()
    except SparkSetupError as exc:  # as the `spark` fixture does
        pytest.skip(str(exc))
    assert JOB_S3.count("LOC") >= 5
    location = f"s3://{s3_server.new_bucket()}/trips"
    monkeypatch.setenv("SPARK_DAEMON_JAVA_OPTS", QUICK_JVM)
    cluster = StandaloneCluster(workers=2, cores=1, memory="1g", root=tmp_path / "cluster")
    try:
        cluster.start()
        conf = {**cluster.driver_conf(), "spark.driver.extraJavaOptions": QUICK_JVM,
                "spark.executor.extraJavaOptions": QUICK_JVM}
        out = subprocess.run([sys.executable, "-c", JOB_S3, json.dumps(conf), str(tmp_path), location],
                             capture_output=True, text=True, timeout=600, env={**os.environ, **s3_server.env()})
        assert out.returncode == 0, out.stderr[-3000:]
    finally:
        cluster.stop()
    assert cluster.alive_pids() == []
    remote = pq.read_table(tmp_path / "snapshot")
    got = sorted(remote.drop_columns(["_hoodie_commit_time"]).to_pylist(), key=lambda r: r["uuid"])
    assert got == run_with_the_library(tmp_path / "local")
