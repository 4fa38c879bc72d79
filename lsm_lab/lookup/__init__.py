"""Point lookups and data skipping: bloom filters and key ranges in footers, pruning, binary search.

    footer.py     FileInfo, FooterCache: a data file's key range, bloom and row-group statistics, read once
                  (the bloom filter itself is layout/bloom.py, written by layout/parquet_io.py; the same
                  range and bloom are filed per instant in the key index, layout/keyindex.py)
    predicate.py  KeyPredicate: the keys (or key range) a filter or a lookup asks for
    stats.py      LookupStats: what a lookup read and skipped (files, row groups, rows)
    lookup.py     PrunedReader, KeyLookup: Table.lookup's engine and read(filter=...)'s key pruning
    command.py    `lsm-lab lookup`, `lsm-lab show blooms`, `lsm-lab bench lookup`

The function `lookup.lookup(table, keys)` is not re-exported here, so that
`lsm_lab.lookup.lookup` always names the module; use `Table.lookup`.

Taught in: notebooks/08_point_lookups.ipynb
"""

from lsm_lab.layout.bloom import BloomFilter, key_hashes
from lsm_lab.lookup.lookup import (
    FooterCache,
    KeyLookup,
    KeyPredicate,
    LookupStats,
    clear_footer_cache,
    key_predicate,
    open_lookup,
)

__all__ = [
    "BloomFilter",
    "FooterCache",
    "KeyLookup",
    "KeyPredicate",
    "LookupStats",
    "clear_footer_cache",
    "key_hashes",
    "key_predicate",
    "open_lookup",
]
