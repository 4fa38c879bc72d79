"""Interoperability with Apache Hudi: real tables, compatibility writes, upgrades to RFC-103.

    hudi_tables   unpack the real tables, read them with hudi-rs, compare rows by key
    compat        what a table of version 6 or 8 must look like for older readers
    upgrade       the upgrades of services/upgrade.py for a table or a path; log formats per file slice
    command       `lsm-lab interop ...` and `lsm-lab bench interop`

This package imports nothing on purpose (hudi-rs is optional): import the submodule you need.

Taught in: notebooks/09_real_hudi_tables.ipynb
"""
