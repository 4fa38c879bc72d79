"""The physical layout: file names, Parquet I/O, and the file-system view (groups and slices).

Taught in: notebooks/01_build_a_table.ipynb, notebooks/03_sorted_writes_and_levels.ipynb
"""
