"""Layer 4, formats: what one file of a table holds, and its name.

    naming.py           file names: base files, v2 logs, v1 logs, write tokens (parse and make)
    parquet_write.py    the one Parquet writer: row groups, key facts and blooms in the footer, atomic publish
    parquet_read.py     the checked reader: page checksums, typed errors, one-value columns from the footer
    parquet_footer.py   the footer's keys and their one decoder; what the statistics prove
    written_facts.py    the key facts of files this process wrote, kept for the commit's key index
    ranged.py           object-store reads: one whole GET, ranged GETs, the footer's tail
    footercheck.py      a Thrift walk of a footer before pyarrow touches it (a damaged footer is an error)
    bloom.py            lsm_lab's own bloom filter of record keys (footer key lsm_lab.bloom)
    hudi_bloom.py       Hudi's footer bloom filter (SIMPLE, DYNAMIC_V0): Hadoop Writable + Murmur, read and written
    keyindex.py         the per-instant key index: each new file's key range and bloom
    log_v2.py           RFC-103's native Parquet log files (metadata in the footer)
    log_v1/             Apache Hudi's `#HUDI#` log blocks: read always, written for table versions 6 and 8
    positions.py        RECORD_POSITIONS of a log: which base rows its records update
    cdc.py              change-data-capture log files

Below: the timeline (instant times name files), storage, the foundation modules.
Above: merge/ and everything that reads or writes a file group. Nothing here knows
what a file group or a table is.

This package imports nothing on purpose: import the submodule you need.

Taught in: notebooks/03_sorted_writes_and_levels.ipynb, notebooks/04_log_format_v2.ipynb
"""
