"""Benchmarks that print ratios against peers measured in the same run (see each module).

Each module has `run(...)` (the figures, as a JSON-able dict) and `report(...)` (the text);
the `lsm-lab bench ...` commands that call them are in lsm_lab/cli/.

This package imports nothing on purpose: import the submodule you need.

Taught in: notebooks/10_sorted_vs_hash_on_spark.ipynb
"""
