"""The key facts of the data files this process wrote, kept until the commit files them: no footer read back.

A commit files each new data file's key range and bloom filter in the key index
(format/keyindex.py), which point lookups load instead of every footer.  The writer
(format/parquet_write.py) has just computed those facts; reading them back from the
footer it wrote would cost a read per file (a GET on an object store).  So the
writer leaves them here, by path, and the key index takes them (and forgets them):

    ParquetFileWriter.close() ── remember_written(path, size, min, max, bloom) ──► _WRITTEN
                                                    (oldest first out beyond 64 MiB of blooms)
                                                                      │
    keyindex.entry_for_file(path) ◄── written_key_facts(path) ────────┘
                                      (popped; None: the footer is read)

The cache is process-global and bounded by the bytes of its blooms: files that never
reach a commit (an aborted write, a Spark task whose driver commits) age out, oldest
first.  A Spark worker clears it after each task (`forget_written`): the driver reads
the footers back, so nobody in the worker would ever ask.

Simplified compared with Apache Hudi: Hudi's writers hand their write stats (with
min/max keys for the record index and column stats) to the commit through the
`WriteStatus` objects they return; lsm_lab's writers return sizes, and the key facts
travel through this side table instead.

Taught in: notebooks/08_point_lookups.ipynb
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict

from lsm_lab.storage import StoragePath

#: (size in bytes, min key, max key, bloom bytes) of one written file
KeyFacts = tuple[int, str | None, str | None, bytes | None]

_WRITTEN: OrderedDict[str, KeyFacts] = OrderedDict()
_WRITTEN_BYTES = [0]
_WRITTEN_MAX_BYTES = 64 << 20
_written_lock = threading.Lock()


def remember_written(path: str | os.PathLike[str] | StoragePath, size: int, min_key: str | None,
                     max_key: str | None, bloom: bytes | None) -> None:
    """Keep the key facts of a file this process just wrote (the oldest are dropped beyond 64 MiB of blooms)."""
    facts = (size, min_key, max_key, bloom)
    with _written_lock:
        old = _WRITTEN.pop(str(path), None)
        _WRITTEN_BYTES[0] += len(bloom or b"") - (len(old[3] or b"") if old else 0)
        _WRITTEN[str(path)] = facts
        while _WRITTEN and _WRITTEN_BYTES[0] > _WRITTEN_MAX_BYTES:
            _, gone = _WRITTEN.popitem(last=False)
            _WRITTEN_BYTES[0] -= len(gone[3] or b"")


def forget_written() -> None:
    """Drop the key facts of every file this process wrote (a Spark worker: the driver commits, reading
    the footers back, so nobody here ever asks; kept, they grow a reused worker by each file's bloom)."""
    with _written_lock:
        _WRITTEN.clear()
        _WRITTEN_BYTES[0] = 0


def written_key_facts(path: str | os.PathLike[str] | StoragePath) -> KeyFacts | None:
    """(size, min key, max key, bloom bytes) of a file this process wrote and nobody asked for yet (then forgotten)."""
    with _written_lock:
        facts = _WRITTEN.pop(str(path), None)
        if facts is not None:
            _WRITTEN_BYTES[0] -= len(facts[3] or b"")
        return facts


__all__ = ["KeyFacts", "forget_written", "remember_written", "written_key_facts"]
