"""The physical layout: file names, Parquet I/O, and the file-system view (groups and slices)."""
