"""Benchmarks that print ratios against peers measured in the same run (see each module).

Each module holds the workload, the measurement and the report; the `lsm-lab bench ...`
subcommands that run them are registered by the command modules of lsm_lab/cli/.

Taught in: notebooks/10_sorted_vs_hash_on_spark.ipynb
"""
