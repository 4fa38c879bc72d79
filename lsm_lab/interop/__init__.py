"""Interoperability with Apache Hudi: real tables read with hudi-rs, upgrades to RFC-103 (compatibility writes: filegroup/compat.py; the commands: cli/interop.py).

    hudi_tables   unpack the real tables, read them with hudi-rs, compare rows by key
    upgrade       switch a v1-log table to v2 logs (and to the lsm_tree layout)
    writer_options  what a Spark/Flink Hudi writer must be passed to write into an lsm_lab table

This package imports nothing on purpose (hudi-rs is optional): import the submodule you need.

Taught in: notebooks/09_real_hudi_tables.ipynb
"""
