"""Spark: the data pipeline on PySpark (local by default, a real cluster when asked)."""
