"""Inspection: text dumps and tables of what is on disk, before any picture.

`dump_levels` prints every file group as an LSM tree of two levels, like
mini-lsm's `dump_structure`:

    city=chennai/00000001-9c2f…-0   (slice @ 20261122001500123)
      L1: base 00000001-…_0-1-0_20261122001500123.parquet  rows=250  keys [04a1…, fe3b…]  sorted
      L0 (2): [ …_20261122001600456_1.parquet rows=40 keys [0b11…, f9e0…],
                …_20261122001700789_1.delete.parquet rows=5 keys [1c2d…, e0f1…] ]

`file_slices_frame` gives the same facts as a pandas DataFrame (one row per file
slice), and `footers` decodes the Parquet footer of every data file into columns
(`hudi.log.format.metadata` is expanded to one column per header key).

Row counts and key ranges come from Parquet footers only (no data pages are
read), so inspecting a large table is cheap.

Taught in: notebooks/03_sorted_writes_and_levels.ipynb, notebooks/04_log_format_v2.ipynb
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from lsm_lab.errors import TableNotFoundError
from lsm_lab.filegroup import fsview
from lsm_lab.filegroup.fsview import DataFile
from lsm_lab.format import log_v2 as v2
from lsm_lab.format import parquet_footer
from lsm_lab.storage import StoragePath, as_path
from lsm_lab.table.state import TableState
from lsm_lab.timeline.instanttime import TimeLike

if TYPE_CHECKING:  # pandas (0.3 s to import) only when a frame is built
    import pandas as pd


def file_facts(f: DataFile) -> dict[str, Any]:
    """Rows, key range and sortedness of one data file, from its footer."""
    facts: dict[str, Any] = {"rows": None, "min_key": None, "max_key": None, "sorted": False}
    if f.name.ext != "parquet" or (f.name.is_log and f.name.log_format == 1):
        return facts
    meta, kv = parquet_footer.read_footer(f.path)
    facts["rows"] = meta.num_rows
    facts["min_key"] = kv.get(parquet_footer.KEY_MIN)
    facts["max_key"] = kv.get(parquet_footer.KEY_MAX)
    facts["sorted"] = parquet_footer.is_sorted_footer(kv)
    return facts


def file_slices_frame(table: TableState, as_of: TimeLike | None = None) -> pd.DataFrame:
    rows = []
    for group in table.file_groups(as_of):
        fs = group.latest
        num, lo, hi = 0, None, None
        for f in fs.files:
            facts = file_facts(f)
            num += facts["rows"] or 0
            if facts["min_key"] is not None:
                lo = facts["min_key"] if lo is None else min(lo, facts["min_key"])
                hi = facts["max_key"] if hi is None else max(hi, facts["max_key"])
        rows.append({
            "partition": fs.partition, "file_id": fs.file_id, "base_instant": fs.base_instant,
            "base_file": fs.base_file.path.name if fs.base_file else None,
            "log_files": [f.path.name for f in fs.log_files], "num_logs": len(fs.log_files),
            "size_bytes": fs.size_bytes, "num_records": num, "min_key": lo, "max_key": hi,
            "num_slices": len(group.slices),
        })
    cols = ["partition", "file_id", "base_instant", "base_file", "log_files", "num_logs", "size_bytes",
            "num_records", "min_key", "max_key", "num_slices"]
    import pandas as pd  # start-up: imported when a frame is built

    return pd.DataFrame(rows, columns=cols)


def _short(key: str | None, width: int = 12) -> str:
    if key is None:
        return "?"
    return key if len(key) <= width else key[: width - 1] + "…"


def _describe(f: DataFile) -> str:
    facts = file_facts(f)
    rows = "?" if facts["rows"] is None else facts["rows"]
    kind = "v1 log" if f.name.log_format == 1 else ("delete" if f.name.is_delete else "")
    extra = f" {kind}" if kind else ""
    sort = " sorted" if facts["sorted"] else ""
    name = f.path.name
    if f.file_id and f.file_id in name:  # the group header already names the file id
        name = name.replace(f.file_id, "…", 1)
    return f"{name} rows={rows} keys [{_short(facts['min_key'])}, {_short(facts['max_key'])}]{extra}{sort}"


def dump_levels(table: TableState, as_of: TimeLike | None = None) -> str:
    """Text dump of every file group's latest slice: `L1: base …` and `L0 (n): [...]`."""
    lines = []
    groups = table.file_groups(as_of)
    if not groups:
        return "(no file groups)"
    for group in groups:
        fs = group.latest
        where = f"{fs.partition}/" if fs.partition else ""
        lines.append(f"{where}{fs.file_id}   (slice @ {fs.base_instant}, {len(group.slices)} slice(s))")
        lines.append(f"  L1: base {_describe(fs.base_file)}" if fs.base_file else "  L1: (no base file)")
        if fs.log_files:
            inner = ",\n          ".join(_describe(f) for f in fs.log_files)
            lines.append(f"  L0 ({len(fs.log_files)}): [{inner}]")
        else:
            lines.append("  L0 (0): []")
    return "\n".join(lines)


_BLOOM_KEYS = ("lsm_lab.bloom", "org.apache.hudi.bloomfilter")


def footers(path: str | os.PathLike[str] | StoragePath,
            storage_options: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """One row per Parquet data file under `path` (a table folder or one file, local or on an object store),
    footer keys as columns."""
    target = as_path(path, storage_options)
    items: list[tuple[str, Any]]
    if target.is_file():  # (an object store: a HEAD, or nothing for the root of a store)
        items = [("", target)]
    elif not target.exists():
        raise TableNotFoundError("no such file or folder", path=target)
    else:
        items = [(p, fp) for p, fp, name in fsview.list_data_files(target)
                 if name.ext == "parquet" and not (name.is_log and name.log_format == 1)]
    rows = []
    for partition, fp in items:
        meta, kv = parquet_footer.read_footer(fp)
        row: dict[str, Any] = {"partition": partition, "file": fp.name}
        row["num_rows"] = meta.num_rows
        row["num_row_groups"] = meta.num_row_groups
        row["size_bytes"] = fp.stat().st_size
        for key, value in sorted(kv.items()):
            if key == v2.KEY_METADATA:
                for hk, hv in v2.decode_header(value, path=str(fp)).items():
                    row[f"log.{hk}"] = hv
            elif key.startswith("org.apache.spark") or key == "parquet.avro.schema":
                continue
            elif key in _BLOOM_KEYS:  # kilobytes of base64: show the size, not the bits
                row[key] = f"<bloom filter, {len(value):,} chars>"
            else:
                row[key] = value
        rows.append(row)
    import pandas as pd  # start-up: imported when a frame is built

    return pd.DataFrame(rows)
