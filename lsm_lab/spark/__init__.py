"""Spark: the data pipeline on PySpark — local by default, a real cluster when asked.

    from lsm_lab.spark import spark_session, write_table, compact_table, read_table

    spark = spark_session()                     # local[*]; spark_session(**{"spark.master": url}) for a cluster
    write_table(df, "/data/trips", op="upsert")  # tag, shuffle, write file groups in tasks, commit
    compact_table("/data/trips", merge="sorted") # plan on the driver, one task per operation
    cluster_table("/data/trips")                 # plan on the driver, one task per clustering group
    read_table("/data/trips").where("fare > 50").count()   # per-slice merge in tasks → DataFrame
    read_cdc("/data/trips", start=t0).toPandas()  # the change stream after t0, runs of commits in tasks
    register(spark)                              # spark.read.format("lsm_lab"), df.write.format("lsm_lab"), SQL
    spark.read.format("lsm_lab").load("/data/trips").where("city = 'pune'")   # filters pushed, a task per slice

Spark moves rows and runs tasks; every file is read and written by the
library's own functions (write.py, compact.py, read.py explain how).  The
functions are named `*_table`/`spark_session`/`read_cdc` so that no name re-exported here
hides a submodule: `lsm_lab.spark.write` is always the module.

Taught in: notebooks/10_sorted_vs_hash_on_spark.ipynb
"""

from lsm_lab.extras import require

require("spark", "lsm_lab.spark")  # before the submodules import pyspark: one clear line when it is missing

from lsm_lab.spark.cdc import read_cdc  # noqa: E402
from lsm_lab.spark.clustering import cluster_table  # noqa: E402
from lsm_lab.spark.compact import compact_table  # noqa: E402
from lsm_lab.spark.datasource import register  # noqa: E402
from lsm_lab.spark.jobs import SparkJobError  # noqa: E402
from lsm_lab.spark.read import read_table  # noqa: E402
from lsm_lab.spark.session import SparkSetupError, check_java, spark_session  # noqa: E402
from lsm_lab.spark.write import write_table  # noqa: E402

__all__ = ["SparkJobError", "SparkSetupError", "check_java", "cluster_table", "compact_table", "read_cdc",
           "read_table", "register", "spark_session", "write_table"]
