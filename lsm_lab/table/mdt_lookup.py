"""Record-index point lookups: seek the base HFile, filter the log blocks, decode only the keys asked.

`MetadataTable.record_index(keys)` maps record keys to file groups through the MDT's `record_index`
partition.  Its keys are sharded over file groups (`record-index-0000-0` …, upstream's
`mapRecordKeyToFileGroupIndex`); a shard's latest slice is a base HFile plus log files of HFile blocks.
Upstream (`HoodieBackedTableMetadata.getRecordsByKeys` → per shard, the keys sorted, `HoodieAvroHFileReader`
seeks) reads only the blocks that can hold the keys; so does this module:

    keys of one shard, sorted
      │
      ├─► base HFile: root index (first key per data block) ──bisect──► the blocks the keys fall in
      │       each such block decompressed and parsed once (kept by the `ShardReader`), the keys looked up
      ├─► log blocks (valid instants, completion order, rollbacks applied: `mdt_listing.log_parts`; a
      │       version 10 MDT's native `.log.hfile` / `.deletes.hfile` is one block each),
      │       read once per reader and kept as Arrow (key, value) columns; each filtered to the keys
      │       with one `is_in` kernel; delete blocks → tombstones
      ▼
    key → raw value (bytes + writer schema), the newest wins ──► decoded only for those keys (fastavro)

**Why "newest wins" is the merge.** The MDT's merge is `HoodieMetadataPayload.preCombine`; for
record-index records (type 5) it keeps the newer record, and a delete block's tombstone wins over
anything older (`metadata_record.combine`).  So a record-index shard can be merged on the raw cells
without decoding them, and decoded afterwards for the keys that are asked: `record_keys()` decodes
nothing, `record_index(keys)` decodes one value per key found.

**Seek or whole merge** (`ShardReader.lookup`): a shard's keys are looked up by seek while they are
fewer than `WHOLE_MERGE_SHARE` (1/4) of the shard's cells (base cells + log cells); from there on the
whole shard is merged once (every block parsed, every log cell in a dict) and kept, and the keys are
plain dict lookups: per key, a bisect and a scan of a block's cells cost more than a share of one pass.

**Counted** (`LookupCounts`): keys asked, shards sought and merged whole, the base file's data blocks
touched by seeks and those parsed (a block is parsed once per reader), log blocks read.  "Index block
reads per key" (issue 32's figure, goal ≤ 2) is `base_blocks_touched / keys` for the seek path: each
key touches the one data block the root index points at (plus the root index itself, read once
with the file, and the log blocks, read once per reader).

Simplified compared with Apache Hudi: the base HFile is read whole (one GET) and parsed from memory,
not by range reads of single blocks; log HFile blocks are parsed whole and filtered (upstream seeks
inside them too); there is no spillable map.

Taught in: no chapter (docs/FORMAT.md, "The metadata table (use): pruning and indexes")
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from lsm_lab.errors import LsmLabError
from lsm_lab.filegroup.fsview import FileSlice
from lsm_lab.format import metadata_record as mr
from lsm_lab.table import mdt_listing

if TYPE_CHECKING:
    from lsm_lab.format import hfile

#: a shard's keys are looked up by seek while fewer than this share of its cells; else merged whole
WHOLE_MERGE_SHARE = 0.25

#: key → (value bytes, writer schema, source) or None (a tombstone)
Raw = dict[str, "tuple[bytes, str | None, str] | None"]


@dataclass
class LookupCounts:
    """What record-index lookups read (module docstring)."""

    keys: int = 0
    shards_sought: int = 0
    shards_merged: int = 0
    base_blocks_touched: int = 0
    base_blocks_parsed: int = 0
    log_blocks_read: int = 0
    values_decoded: int = 0

    def blocks_per_key(self) -> float:
        """Base-file data blocks touched per key looked up by seek (0 when no key was)."""
        return self.base_blocks_touched / self.keys if self.keys else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"keys": self.keys, "shards_sought": self.shards_sought, "shards_merged": self.shards_merged,
                "base_blocks_touched": self.base_blocks_touched, "base_blocks_parsed": self.base_blocks_parsed,
                "log_blocks_read": self.log_blocks_read, "values_decoded": self.values_decoded,
                "blocks_per_key": round(self.blocks_per_key(), 4)}


_LogPart = mdt_listing.LogPart


@dataclass
class ShardReader:
    """One record-index shard (an MDT file slice) read as of one MDT state; keeps what it has read."""

    fs: FileSlice
    completion: Mapping[str, str]
    valid: set[str]
    counts: LookupCounts
    strict: bool = False
    whole_merge_share: float = WHOLE_MERGE_SHARE
    _base: hfile.HFile | None = None
    _blocks: dict[int, dict[bytes, bytes]] = field(default_factory=dict)
    _logs: list[_LogPart] | None = None
    _whole: Raw | None = None

    # -------------------------------------------------------------- reading
    def base(self) -> hfile.HFile | None:
        from lsm_lab.format import hfile  # start-up: HFiles are read only for a metadata table

        if self._base is None and self.fs.base_file is not None:
            f = self.fs.base_file
            if f.name.ext != "hfile":
                raise LsmLabError(f"metadata table base file {f.path.name} is not an HFile", path=f.path)
            self._base = hfile.read_hfile(f.path)
        return self._base

    def logs(self) -> list[_LogPart]:
        if self._logs is None:
            parts = mdt_listing.log_parts(self.fs, self.completion, self.valid, strict=self.strict)
            self.counts.log_blocks_read += len(parts)
            self._logs = parts
        return self._logs

    def cells(self) -> int:
        b = self.base()
        return (b.entry_count if b is not None else 0) + sum(len(p.keys) for p in self.logs())

    def _block(self, h: hfile.HFile, i: int) -> dict[bytes, bytes]:
        got = self._blocks.get(i)
        if got is None:
            got = dict(h.block_cells(i))
            self._blocks[i] = got
            self.counts.base_blocks_parsed += 1
        return got

    # -------------------------------------------------------------- merging
    def whole(self) -> Raw:
        """Every cell of the shard merged (newest wins; tombstones kept as None)."""
        if self._whole is None:
            out: Raw = {}
            h = self.base()
            if h is not None:
                schema, source = h.avro_schema, h.source
                for k, v in h.items():
                    out[k.decode("utf-8", "replace")] = (v, schema, source)
                self.counts.base_blocks_parsed += len(h.data_index)
            for p in self.logs():
                if p.values is None:
                    out.update(dict.fromkeys(p.keys.to_pylist()))
                else:
                    for k, v in zip(p.keys.to_pylist(), p.values.to_pylist(), strict=True):
                        out[k] = (v, p.schema, p.source)
            self._whole = out
        return self._whole

    def seek(self, keys: Sequence[str]) -> Raw:
        """The cells of `keys` only: the base blocks they fall in, the log cells among them."""
        out: Raw = {}
        h = self.base()
        if h is not None and h.data_index:
            schema, source = h.avro_schema, h.source
            touched: set[int] = set()
            for key in sorted(keys):
                kb = key.encode("utf-8")
                i = h.block_of(kb)
                if i < 0:
                    continue
                touched.add(i)
                v = self._block(h, i).get(kb)
                if v is not None:
                    out[key] = (v, schema, source)
            self.counts.base_blocks_touched += len(touched)
        wanted = pa.array(list(keys), pa.string())
        for p in self.logs():
            mask = pc.is_in(p.keys, value_set=wanted)
            hits = p.keys.filter(mask).to_pylist()
            if not hits:
                continue
            if p.values is None:
                out.update(dict.fromkeys(hits))
            else:
                for k, v in zip(hits, p.values.filter(mask).to_pylist(), strict=True):
                    out[k] = (v, p.schema, p.source)
        return out

    def lookup(self, keys: Sequence[str]) -> Raw:
        """The raw cells of `keys` in this shard: by seek, or from the whole shard (module docstring)."""
        if self._whole is None and len(keys) < self.whole_merge_share * self.cells():
            self.counts.shards_sought += 1
            self.counts.keys += len(keys)
            return self.seek(keys)
        if self._whole is None:
            self.counts.shards_merged += 1
        whole = self.whole()
        return {k: whole[k] for k in keys if k in whole}


def decode(raw: Mapping[str, tuple[bytes, str | None, str] | None], counts: LookupCounts | None = None
           ) -> dict[str, mr.MetadataValue]:
    """The live records of raw cells: tombstones dropped, each value decoded with its writer's schema."""
    out: dict[str, mr.MetadataValue] = {}
    for key, cell in raw.items():
        if cell is None:
            continue
        rec = mr.decode_value(key, cell[0], cell[1], source=cell[2])
        if not rec.deleted:
            out[key] = rec
    if counts is not None:
        counts.values_decoded += len(raw)
    return out


__all__ = ["WHOLE_MERGE_SHARE", "LookupCounts", "Raw", "ShardReader", "decode"]
