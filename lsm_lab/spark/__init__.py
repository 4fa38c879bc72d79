"""Spark: the data pipeline on PySpark — local by default, a real cluster when asked.

    from lsm_lab.spark import session, write, compact, read

    spark = session()                                  # local[*]; session(**{"spark.master": url}) for a cluster
    write(df, "/data/trips", op="upsert")              # tag, shuffle, write file groups in tasks, commit
    compact("/data/trips", merge="sorted")             # plan on the driver, one task per operation
    read("/data/trips").where("fare > 50").count()     # per-slice merge in tasks → DataFrame

Spark moves rows and runs tasks; every file is read and written by the
library's own functions (write.py, compact.py, read.py explain how).
"""

from lsm_lab.spark.compact import compact
from lsm_lab.spark.jobs import SparkJobError
from lsm_lab.spark.read import read
from lsm_lab.spark.session import SparkSetupError, check_java, session
from lsm_lab.spark.write import write

__all__ = ["SparkJobError", "SparkSetupError", "check_java", "compact", "read", "session", "write"]
