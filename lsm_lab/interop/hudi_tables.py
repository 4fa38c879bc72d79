"""Real Apache Hudi tables next to lsm_lab: unpack them, read them with hudi-rs, compare rows.

lsm_lab's claim to read Hudi tables is checked against an *independent* reader:
the `hudi` Python package (hudi-rs, Apache Hudi's Rust implementation). This
module holds the small pieces the tests, the benchmark and the `interop` CLI
share:

    shared/hudi-tables/qs_mor_avro_v8_trips_8i3u1d.zip
        │ unpack_tables(zip folder, dest)   one folder per zip (two zips both hold
        ▼                                   a `v6_nonpartitioned/`, so the zip stem names it)
    dest/qs_mor_avro_v8_trips_8i3u1d/v8_trips_8i3u1d/         ← the table
        │                                   │
        │ lsm_lab.open_table(p).read()      │ hudi_rs_read(p)   (HudiTableBuilder…read())
        ▼                                   ▼
      pa.Table ───────── compare_rows(lsm, hudi, key) ─────────► [] or a list of differences

`compare_rows` matches rows by record key and compares the columns both sides
have, value by value (after casting the other side to lsm_lab's column type
when the types differ), so a missing, extra or different row is named with its
key and column.

Simplified compared with a full conformance suite: snapshot, time-travel,
read-optimized and incremental reads are compared, nothing else (no filters or
projections pushed into hudi-rs), and values
are compared as Python objects (NaN never equals NaN; none of the test tables
hold one).

Taught in: notebooks/09_real_hudi_tables.ipynb
"""

from __future__ import annotations

import os
import zipfile
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, cast

import pyarrow as pa
import pyarrow.compute as pc

from lsm_lab.errors import InputError, TableNotFoundError
from lsm_lab.extras import require
from lsm_lab.merge import records

#: a few differences are enough to see what is wrong
MAX_REPORTED = 20


# --------------------------------------------------------------------------- finding and unpacking
def find_shared(repo: str | os.PathLike[str] | None = None) -> Path | None:
    """The folder holding `hudi-tables/*.zip` and `hudi-log-files/`, or None.

    In order: `$LSM_LAB_SHARED`; the copy shipped in the repository (`<repo>/data`, so a clone
    runs every test and notebook); `<repo>/../shared` (the developers' shared folder).
    """
    env = os.environ.get("LSM_LAB_SHARED")
    if env:
        candidate = Path(env)
        return candidate if candidate.is_dir() else None
    root = Path(repo) if repo is not None else Path(__file__).resolve().parents[2]
    for candidate in (root / "data", root.parent / "shared"):
        if (candidate / "hudi-tables").is_dir():
            return candidate
    return None


def table_folder(unpacked: Path) -> Path:
    """The table inside an unpacked zip folder: the one child holding `.hoodie/`."""
    if (unpacked / ".hoodie").is_dir():
        return unpacked
    children = [c for c in sorted(unpacked.iterdir()) if (c / ".hoodie").is_dir()]
    if len(children) != 1:
        raise TableNotFoundError(f"expected one table folder inside, found {len(children)}", path=unpacked)
    return children[0]


def unpack_tables(zips: str | os.PathLike[str], dest: str | os.PathLike[str],
                  names: Iterable[str] | None = None) -> dict[str, Path]:
    """Unzip every `*.zip` of `zips` into `dest/<zip stem>/` (once); return {stem: table folder}.

    `__MACOSX/` resource forks and `.DS_Store` files are skipped.
    """
    src, out = Path(zips), Path(dest)
    wanted = None if names is None else set(names)
    tables: dict[str, Path] = {}
    for z in sorted(src.glob("*.zip")):
        stem = z.stem
        if wanted is not None and stem not in wanted:
            continue
        target = out / stem
        if not target.is_dir():
            tmp = out / f".{stem}.unpacking"
            tmp.mkdir(parents=True, exist_ok=True)
            with zipfile.ZipFile(z) as zf:
                members = [m for m in zf.namelist()
                           if not m.startswith("__MACOSX/") and not m.endswith(".DS_Store")]
                zf.extractall(tmp, members=members)
            tmp.rename(target)
        tables[stem] = table_folder(target)
    if wanted is not None and wanted - set(tables):
        raise InputError(f"no zip for {', '.join(sorted(wanted - set(tables)))} in {src}")
    return tables


# --------------------------------------------------------------------------- hudi-rs
def hudi_available() -> bool:
    try:
        import hudi  # noqa: F401
    except ImportError:
        return False
    return True


def hudi_rs_read(path: str | os.PathLike[str], *, as_of: str | None = None, read_optimized: bool = False,
                 columns: Sequence[str] | None = None) -> pa.Table:
    """Read a table with hudi-rs: snapshot, time travel (`as_of`) or read-optimized."""
    require("interop", "reading with hudi-rs")
    import hudi
    table = hudi.HudiTableBuilder.from_base_uri(str(path)).build()
    options = hudi.HudiReadOptions()
    if as_of is not None:
        options = options.with_as_of_timestamp(as_of)
    if read_optimized:
        ro_key = hudi.HudiReadConfig.USE_READ_OPTIMIZED_MODE.value  # type: ignore[attr-defined]  # missing from hudi 0.5's stubs
        options = options.with_hudi_option(ro_key, "true")
    if columns is not None:
        options = options.with_projection(list(columns))
    batches = table.read(options)
    if not batches:
        return pa.table({})
    return pa.Table.from_batches(batches)


def hudi_rs_incremental(path: str | os.PathLike[str], start: str, end: str | None = None) -> pa.Table:
    """hudi-rs's incremental query: records written by instants completed in (start, end]."""
    require("interop", "reading with hudi-rs")
    import hudi
    table = hudi.HudiTableBuilder.from_base_uri(str(path)).build()
    options = hudi.HudiReadOptions().with_query_type(hudi.HudiQueryType.Incremental).with_start_timestamp(start)
    if end is not None:
        options = options.with_end_timestamp(end)
    batches = table.read(options)
    return pa.Table.from_batches(batches) if batches else pa.table({})


# --------------------------------------------------------------------------- comparing rows
def _keys_of(table: pa.Table, key_fields: Sequence[str]) -> list[str]:
    rk = table.column(records.RECORD_KEY) if records.RECORD_KEY in table.column_names else None
    if rk is not None and rk.null_count == 0:
        return cast("list[str]", rk.to_pylist())
    return cast("list[str]", records.record_keys(table, list(key_fields)).to_pylist())


def _aligned(other: pa.ChunkedArray, target: pa.DataType) -> pa.ChunkedArray:
    if other.type == target:
        return other
    try:
        return pc.cast(other, target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return other


def _occurrences(rows: pa.Table, keys: list[Any]) -> list[Any]:
    """`(key, n)` per row: the n-th copy of its key, copies ordered by `_hoodie_commit_seqno` (else as read)."""
    seqs = rows.column("_hoodie_commit_seqno").to_pylist() if "_hoodie_commit_seqno" in rows.column_names \
        else [None] * len(keys)
    order = sorted(range(len(keys)), key=lambda i: (str(keys[i]), str(seqs[i]), i))
    out: list[Any] = [None] * len(keys)
    seen: Counter[Any] = Counter()
    for i in order:
        out[i] = (keys[i], seen[keys[i]])
        seen[keys[i]] += 1
    return out


def compare_rows(lsm: pa.Table, other: pa.Table, key_fields: Sequence[str], *,
                 columns: Sequence[str] | None = None, ignore: Iterable[str] = ()) -> list[str]:
    """Differences between two reads of one table, matched by record key ([] when equal).

    Compares `columns` (default: every column both tables have, minus `ignore`).
    Keys come from `_hoodie_record_key` when it is filled, else from `key_fields`.
    """
    skip = set(ignore)
    if columns is None:
        common = [c for c in lsm.column_names if c in other.column_names and c not in skip]
    else:
        common = [c for c in columns if c not in skip]
    problems: list[str] = []
    if lsm.num_rows == 0 and other.num_rows == 0:
        return problems
    lkeys = _keys_of(lsm, key_fields) if lsm.num_rows else []
    okeys = _keys_of(other, key_fields) if other.num_rows else []
    if len(set(lkeys)) != len(lkeys) or len(set(okeys)) != len(okeys):
        # a key more than once: Hudi's INSERT keeps duplicates (hoodie.merge.allow.duplicate.on.inserts), and
        # both readers must return each copy; the copies are matched by their commit sequence number
        lcount, ocount = Counter(lkeys), Counter(okeys)
        lkeys, okeys = _occurrences(lsm, lkeys), _occurrences(other, okeys)
        for k in sorted(set(lcount) | set(ocount)):
            if lcount[k] != ocount[k] and len(problems) < MAX_REPORTED:
                problems.append(f"key {k!r}: {lcount[k]} row(s) in lsm_lab's read, {ocount[k]} in the other's")
    lpos = {k: i for i, k in enumerate(lkeys)}
    opos = {k: i for i, k in enumerate(okeys)}
    for k in sorted(set(lpos) - set(opos))[:MAX_REPORTED]:
        problems.append(f"key {k!r}: only in lsm_lab's rows")
    for k in sorted(set(opos) - set(lpos))[:MAX_REPORTED]:
        problems.append(f"key {k!r}: only in the other reader's rows")
    both = sorted(set(lpos) & set(opos))
    for col in common:
        if col not in lsm.column_names or col not in other.column_names:
            problems.append(f"column {col!r} is missing on one side")
            continue
        lvals = lsm.column(col).to_pylist()
        ovals = _aligned(other.column(col), lsm.schema.field(col).type).to_pylist()
        for k in both:
            a, b = lvals[lpos[k]], ovals[opos[k]]
            if a != b:
                problems.append(f"key {k!r} column {col!r}: lsm_lab {_short(a)} != other {_short(b)}")
                if len(problems) >= MAX_REPORTED:
                    return problems
    return problems


def _short(value: Any, width: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= width else text[: width - 1] + "…"


__all__ = [
    "compare_rows",
    "find_shared",
    "hudi_available",
    "hudi_rs_incremental",
    "hudi_rs_read",
    "table_folder",
    "unpack_tables",
]
