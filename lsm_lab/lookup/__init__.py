"""Point lookups and data skipping: bloom filters and key ranges in footers, pruning, binary search.

    footer.py    FileInfo, FooterCache: footers decoded once (the bloom codec is layout/bloom.py)
    lookup.py    KeyPredicate, LookupStats, Table.lookup's engine and read(filter=...)'s key pruning
    command.py   `lsm-lab lookup`, `lsm-lab show blooms`, `lsm-lab bench lookup`

The function `lookup.lookup(table, keys)` is not re-exported here, so that
`lsm_lab.lookup.lookup` always names the module; use `Table.lookup`.
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
