"""The metadata table lsm_lab writes: the HFile writer, and the `files` partition kept by every commit.

HFile: random cells round-trip through lsm_lab's strict reader (GZIP and NONE, tiny and default block
sizes), a real Hudi HFile's cells re-written give the same uncompressed data block, and bad input is a
typed error.  The MDT: on version 8, 9 and 10 tables (COW and MOR) with `hoodie.metadata.enable=true`,
after every step of insert, upsert, delete, compaction, clustering, clean, a failed write, a rollback of
the latest commit and a restore — with the MDT compacted every 3 deltacommits or never —
`t.metadata_table().files()` equals the model (the data files on disk minus those of pending instants,
with their sizes), a version 10 MDT's logs are native HFile logs decoded by upstream's rules, and at the
end (versions 8 and 9; hudi-rs refuses version 10) hudi-rs reads the same rows as lsm_lab and provably lists from the
MDT (hiding the last MDT deltacommit changes what it reads).  Crashes: a writer SIGKILLed right after
its MDT deltacommit, one killed inside an MDT compaction, an MDT rollback killed half way, and
tests/test_crash.py's SIGKILL loop with the MDT on: the table reads a prefix of its commits and the MDT
lists exactly the committed files after every kill.  Also: not partitioned ("." key), enabled on a
table with data (built from a listing), turned off (dropped), and on the S3 server.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lsm_lab
from lsm_lab.errors import InputError
from lsm_lab.filegroup import fsview
from lsm_lab.format import hfile, hfile_write
from lsm_lab.format import log_v1 as v1
from lsm_lab.interop.hudi_tables import compare_rows, hudi_available
from lsm_lab.services import mdt_write
from lsm_lab.timeline.instant import State

ROOT = Path(__file__).resolve().parents[1]


# ----------------------------------------------------------------------------------------- HFile
@settings(max_examples=40, deadline=None)
@given(cells=st.dictionaries(st.binary(min_size=1, max_size=40), st.binary(max_size=300), max_size=200),
       codec=st.sampled_from(["GZIP", "NONE"]), block_size=st.sampled_from([1, 64, 1024, 64 * 1024]))
def test_hfile_round_trip(cells: dict[bytes, bytes], codec: str, block_size: int) -> None:
    want = sorted(cells.items())
    data = hfile_write.write_hfile(want, codec=codec, block_size=block_size, file_info={b"schema": b"{}"},
                                   create_time_ms=1)
    h = hfile.parse_hfile(data)
    assert list(h.items()) == want
    assert h.trailer.codec == codec and h.trailer.entry_count == len(want)
    assert h.file_info[b"schema"] == b"{}" and h.avro_schema == "{}"
    assert h.file_info[b"hfile.LASTKEY"] == (len(want[-1][0]).to_bytes(2, "big") + want[-1][0] if want else b"")
    for key, value in want[:20]:
        assert h.get(key) == value
    assert h.get(b"\xff" * 41) is None
    if want and block_size == 1:
        assert len(h.data_index) == len(want)  # one cell per block
    assert hfile_write.write_hfile(want, codec=codec, block_size=block_size, file_info={b"schema": b"{}"},
                                   create_time_ms=1) == data  # deterministic


@settings(max_examples=40, deadline=None)
@given(cells=st.dictionaries(st.binary(min_size=1, max_size=40), st.binary(max_size=300), max_size=200),
       codec=st.sampled_from(["GZIP", "NONE"]), block_size=st.sampled_from([1, 64, 1024, 64 * 1024]))
def test_hfile_arrays_writes_the_same_bytes(cells: dict[bytes, bytes], codec: str, block_size: int) -> None:
    """The columnar writer (NumPy scatters) gives the scalar writer's bytes exactly."""
    import pyarrow as pa
    want = sorted(cells.items())
    keys = pa.array([k for k, _ in want], pa.binary())
    values = pa.array([v for _, v in want], pa.binary())
    assert hfile_write.write_hfile_arrays(keys, values, codec=codec, block_size=block_size, file_info={b"s": b"1"},
                                          create_time_ms=1) == \
        hfile_write.write_hfile(want, codec=codec, block_size=block_size, file_info={b"s": b"1"}, create_time_ms=1)
    if len(want) > 1:
        with pytest.raises(InputError, match="sorted"):
            hfile_write.write_hfile_arrays(keys.take(pa.array(range(len(want) - 1, -1, -1))), values)


def test_hfile_same_data_block_as_hudi(real_table: Any) -> None:
    """A real Hudi MDT base file's cells, written again, give its very data block (uncompressed)."""
    src = next((real_table("v9_txns_simple_meta") / ".hoodie" / "metadata" / "files").glob("*_2026*.hfile"))
    real = hfile.read_hfile(src)
    cells = list(real.items())
    ours = hfile.parse_hfile(hfile_write.write_hfile(cells, codec="GZIP", file_info={b"schema": b"x"}))
    assert list(ours.items()) == cells
    assert len(ours.data_index) == len(real.data_index) == 1
    from lsm_lab.format.hfile import DATA_MAGIC, _read_block  # the reader's own block decoding
    assert (_read_block(ours.data, 0, DATA_MAGIC, "GZIP")
            == _read_block(real.data, real.data_index[0].offset, DATA_MAGIC, "GZIP"))
    assert ours.trailer.comparator == real.trailer.comparator and ours.trailer.major_version == 3


def test_hfile_bad_input() -> None:
    with pytest.raises(InputError, match="sorted"):
        hfile_write.write_hfile([(b"b", b""), (b"a", b"")])
    with pytest.raises(InputError, match="codec"):
        hfile_write.write_hfile([], codec="SNAPPY")
    with pytest.raises(InputError, match="32767"):
        hfile_write.write_hfile([(b"k" * 40000, b"")])
    assert list(hfile.parse_hfile(hfile_write.write_hfile([])).items()) == []


@settings(max_examples=30, deadline=None)
@given(cells=st.dictionaries(st.text(min_size=1, max_size=90), st.binary(max_size=200), max_size=80),
       gone=st.lists(st.text(min_size=1, max_size=300), max_size=60))
def test_native_hfile_log_round_trip(tmp_path_factory: pytest.TempPathFactory, cells: dict[str, bytes],
                                     gone: list[str]) -> None:
    """A version 10 MDT log (`format/hfile_log.py`): cells and removed keys read back as written, the delete
    values are the Avro `hudi_delete_log_record` of their key (checked with fastavro, keys of any length: the
    vectorised varint), and the header is upstream's one JSON map."""
    import io
    import json

    import fastavro
    import pyarrow as pa

    from lsm_lab.format import hfile_log, naming

    folder = tmp_path_factory.mktemp("native")
    t = "20261129120000123"
    header = {"INSTANT_TIME": t, "SCHEMA": "{}"}
    keys = pa.array(sorted(k.encode() for k in cells), pa.binary())
    values = pa.array([cells[k.decode()] for k in keys.to_pylist()], pa.binary())
    data_name = naming.native_log_file_name("files-0000-0", "0-0-0", t, 1, naming.NATIVE_DATA, "hfile")
    (folder / data_name).write_bytes(hfile_log.data_log(keys, values, header, mdt_write.SCHEMA_TEXT))
    parsed = naming.parse(data_name)
    assert parsed is not None and parsed.log_format == 2 and parsed.ext == "hfile" and not parsed.is_delete
    log = hfile_log.read(folder / data_name, parsed)
    assert not log.is_delete and log.instant_time == t and log.schema == mdt_write.SCHEMA_TEXT
    assert dict(zip(log.keys.to_pylist(), log.values.to_pylist() if log.values is not None else [], strict=True)) == cells
    assert next(iter(json.loads(hfile.read_hfile(folder / data_name).file_info[b"hudi.log.format.metadata"]))) == "VERSION"
    if gone:
        del_name = naming.native_log_file_name("files-0000-0", "0-0-0", t, 1, naming.NATIVE_DELETES, "hfile")
        (folder / del_name).write_bytes(hfile_log.delete_log(gone, header))
        parsed_del = naming.parse(del_name)
        assert parsed_del is not None and parsed_del.is_delete
        dlog = hfile_log.read(folder / del_name, parsed_del)
        assert dlog.is_delete and dlog.values is None and dlog.keys.to_pylist() == sorted(set(gone), key=str.encode)
        h = hfile.read_hfile(folder / del_name)
        schema = fastavro.parse_schema(json.loads(h.file_info[b"schema"]))
        for key, value in h.items():
            assert fastavro.schemaless_reader(io.BytesIO(value), schema, schema) == {"_hoodie_record_key": key.decode()}


def test_native_hfile_log_bad_input(tmp_path: Path) -> None:
    import pyarrow as pa

    from lsm_lab.errors import CorruptFileError, UnsupportedFeatureError
    from lsm_lab.format import hfile_log, naming

    t = "20261129120000123"
    name = naming.native_log_file_name("files-0000-0", "0-0-0", t, 1, naming.NATIVE_DATA, "hfile")
    parsed = naming.parse(name)
    assert parsed is not None
    (tmp_path / name).write_bytes(hfile_write.write_hfile([(b"k", b"v")]))  # an HFile without the header entry
    with pytest.raises(CorruptFileError, match="hudi.log.format.metadata"):
        hfile_log.read(tmp_path / name, parsed)
    keys, values = pa.array([b"k"], pa.binary()), pa.array([b"v"], pa.binary())
    (tmp_path / name).write_bytes(hfile_log.data_log(keys, values, {"INSTANT_TIME": "20261129120000999"}, "{}"))
    with pytest.raises(CorruptFileError, match="INSTANT_TIME"):
        hfile_log.read(tmp_path / name, parsed)
    (tmp_path / name).write_bytes(b"not an hfile")
    with pytest.raises(CorruptFileError):
        hfile_log.read(tmp_path / name, parsed)
    pq_name = naming.native_log_file_name("files-0000-0", "0-0-0", t, 1, naming.NATIVE_DATA, "parquet")
    pq_parsed = naming.parse(pq_name)
    assert pq_parsed is not None
    with pytest.raises(UnsupportedFeatureError, match="HFiles"):
        hfile_log.read(tmp_path / pq_name, pq_parsed)


# ----------------------------------------------------------------------------------------- the MDT
def _rows(ids: Any, ts: int, fare: float) -> list[dict[str, Any]]:
    return [{"id": f"id{i:03d}", "city": ("sf", "nyc", "chennai")[i % 3], "ts": ts, "fare": fare + i} for i in ids]


def _make(path: Path, version: int, table_type: str, compact_every: int = 10) -> lsm_lab.Table:
    """`compact_every` 100 or more: an MDT never compacted (nor its `files` partition alone, early)."""
    early = {mdt_write.PROP_FILES_COMPACT_LOGS: "0"} if compact_every >= 100 else {}
    return lsm_lab.create_table(path, name="trips", record_key="id", ordering_field="ts", partition_by="city",
                                table_type=table_type, layout="default", table_version=version,
                                properties={"hoodie.metadata.enable": "true",
                                            "hoodie.metadata.compact.max.delta.commits": str(compact_every), **early})


def model(path: Path) -> dict[tuple[str, str], int]:
    """The committed files: every data file on disk whose instant is not pending, with its size."""
    t = lsm_lab.open_table(path)
    pending = {i.begin_time for i in t.instants() if not i.is_completed}
    return {(part, p.name): p.stat().st_size for part, p, name in fsview.list_data_files(path)
            if name.instant not in pending}


def listed(path: Path) -> dict[tuple[str, str], int]:
    m = lsm_lab.open_table(path).metadata_table()
    assert m is not None and "files" in m.partitions()
    f = m.files()
    return {(p, n): s for p, n, s in zip(f.column("partition").to_pylist(), f.column("file_name").to_pylist(),
                                         f.column("size").to_pylist(), strict=True)}


class _Killed(BaseException):
    pass


def _failed_write(t: lsm_lab.Table, rows: list[dict[str, Any]] | None = None) -> None:
    """An upsert (of `rows`, else this file's rows) that dies right after its MDT deltacommit, before the data
    commit (its own abort runs)."""
    real = mdt_write.update

    def die(*a: Any, **kw: Any) -> Any:
        real(*a, **kw)
        raise _Killed

    with mock.patch.object(mdt_write, "update", die), pytest.raises(_Killed):
        t.upsert(rows if rows is not None else _rows(range(0, 30, 3), 30, 99.0))


def _steps(t: lsm_lab.Table) -> list[tuple[str, Any]]:
    return [
        ("insert", lambda: t.insert(_rows(range(30), 1, 10.0))),
        ("upsert", lambda: t.upsert(_rows(range(0, 30, 4), 5, 100.0))),
        ("delete", lambda: t.delete([{"id": f"id{i:03d}", "city": ("sf", "nyc", "chennai")[i % 3]} for i in (1, 7)])),
        ("compact", lambda: t.compact(strategy="full") if t.config.is_mor else None),
        ("cluster", lambda: t.cluster()),
        ("upsert again", lambda: t.upsert(_rows(range(3, 45, 6), 9, 7.0))),
        ("clean", lambda: t.clean(retained=1)),
        ("failed write", lambda: _failed_write(t)),
        ("savepoint", lambda: t.savepoint()),
        ("upsert after savepoint", lambda: t.upsert(_rows(range(0, 12, 2), 12, -1.0))),
        ("rollback latest", lambda: t.rollback()),
        ("upsert to restore away", lambda: t.upsert(_rows(range(20, 26), 13, -2.0))),
        ("restore", lambda: t.restore(t.savepoints()[-1]["savepointedInstant"])),
        ("upsert after restore", lambda: t.upsert(_rows(range(5, 15), 20, 3.0))),
    ]


@pytest.mark.parametrize("version", [8, 9, 10])
@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
@pytest.mark.parametrize("compact_every", [3, 100])
def test_files_partition_follows_every_step(tmp_path: Path, version: int, table_type: str, compact_every: int) -> None:
    """`compact_every` 3: the MDT is compacted along the way (a rollback of a compacted instant rebuilds it)."""
    path = tmp_path / "t"
    t = _make(path, version, table_type, compact_every)
    assert lsm_lab.open_table(path).metadata_table() is None  # created on the first write
    compacted = dropped = False
    for step, run in _steps(t):
        run()
        t = lsm_lab.open_table(path)
        assert not [i for i in t.instants() if not i.is_completed and i.is_write], step
        m = t.metadata_table()
        if m is None:  # a rollback of an instant the MDT had compacted: dropped, built again by the next write
            assert compact_every == 3 and not t.config.props.get("hoodie.table.metadata.partitions"), step
            dropped = True
            continue
        assert listed(path) == model(path), step
        compacted |= any(i.action == "compaction" for i in m.mdt.instants())
    props = lsm_lab.open_table(path).config.props
    assert props["hoodie.table.metadata.partitions"] == "column_stats,files,partition_stats"  # upstream's defaults
    m = lsm_lab.open_table(path).metadata_table()
    assert m is not None
    assert m.all_partitions() == ["chennai", "nyc", "sf"] or m.all_partitions() == ["city=chennai", "city=nyc",
                                                                                    "city=sf"]
    mdt = m.mdt
    assert all(i.state is State.COMPLETED for i in mdt.instants())  # every MDT instant finished
    assert compacted == (compact_every == 3) and dropped <= compacted
    if compact_every == 100:
        assert any(i.action == "rollback" for i in mdt.instants())  # the failed write / rollback / restore
    if version == 10:
        native_hfile_logs(path)
    elif hudi_available():  # hudi-rs 0.5 refuses table version 10 ("Only support table version 6, 8, and 9")
        _hudi_rs_reads_through_the_mdt(path)


def native_hfile_logs(path: Path) -> None:
    """A version 10 MDT's logs are upstream's native HFile logs (`FileNameParser.NATIVE_LOG_FILE_PATTERN`,
    `.log.hfile` / `.deletes.hfile`), decoded here by upstream's rules without lsm_lab's MDT reader: a whole
    HFile whose file info holds `hudi.log.format.metadata` (one JSON map, VERSION first, INSTANT_TIME the
    name's instant) and whose cells are Avro values of the file info's `schema` (`HoodieMetadataRecord`, or
    `hudi_delete_log_record` {_hoodie_record_key = the cell key} in a delete log); no `#HUDI#` log anywhere."""
    import io
    import json
    import re

    import fastavro

    pattern = re.compile(r"^([^._]+)_(\d+-\d+-\d+)_([^_]+)_(\d+)\.(log|deletes|cdc)\.([^.]+)$")
    mdt = path / ".hoodie" / "metadata"
    seen = 0
    for part in (d for d in mdt.iterdir() if d.is_dir() and not d.name.startswith(".")):
        for name in os.listdir(part):
            assert not (name.startswith(".") and ".log." in name), name  # no v1 log
            if not (".log." in name or ".deletes." in name):
                continue
            m = pattern.match(name)
            assert m is not None and m.group(6) == "hfile" and m.group(5) in ("log", "deletes"), name
            h = hfile.read_hfile(part / name)
            header = json.loads(h.file_info[b"hudi.log.format.metadata"])
            assert next(iter(header)) == "VERSION" and header["VERSION"] == "2" and header["INSTANT_TIME"] == m.group(3)
            assert "SCHEMA" in header
            schema = fastavro.parse_schema(json.loads(h.file_info[b"schema"]))
            for key, value in h.items():
                rec = fastavro.schemaless_reader(io.BytesIO(value), schema, schema)
                assert isinstance(rec, dict)
                if m.group(5) == "deletes":
                    assert rec == {"_hoodie_record_key": key.decode()}
                else:
                    assert rec["type"] in (1, 2, 3, 5, 6, 7), rec
            seen += 1
    assert seen


def _hudi_rs_reads_through_the_mdt(path: Path) -> None:
    import hudi

    def read() -> Any:
        import pyarrow as pa
        table = hudi.HudiTableBuilder.from_base_uri(str(path)).with_hudi_option("hoodie.metadata.enable",
                                                                                 "true").build()
        return table, pa.Table.from_batches(table.read(hudi.HudiReadOptions()))

    t = lsm_lab.open_table(path)
    ours = t.read()
    table, theirs = read()
    assert compare_rows(ours, theirs, ["id"], columns=["id", "city", "ts", "fare"]) == []
    slices = {(s.partition_path, s.base_file_name) for s in table.get_file_slices()}
    assert {(p, n) for p, n in listed(path) if n in {b for _, b in slices}} == slices
    # proof that hudi-rs lists from the MDT: hide the MDT's last deltacommit, and the files it added vanish
    # (hudi-rs 0.5 uses the MDT whenever the table declares `files`, whatever hoodie.metadata.enable says)
    timeline = path / ".hoodie" / "metadata" / ".hoodie" / "timeline"
    last = sorted(n for n in os.listdir(timeline) if n.endswith(".deltacommit") and "_" in n)[-1]
    (timeline / last).rename(timeline / (last + ".hidden"))
    try:
        _, stale = read()
        assert compare_rows(ours, stale, ["id"], columns=["id", "city", "ts", "fare"]) != []
    finally:
        (timeline / (last + ".hidden")).rename(timeline / last)


def test_table_without_the_option_has_no_mdt(tmp_path: Path) -> None:
    t = lsm_lab.create_table(tmp_path / "t", name="trips", record_key="id", partition_by="city", layout="default",
                             table_version=8)
    t.insert(_rows(range(5), 1, 0.0))
    assert not (tmp_path / "t" / ".hoodie" / "metadata").exists()
    assert lsm_lab.open_table(tmp_path / "t").metadata_table() is None


def test_enabled_later_starts_from_a_listing(tmp_path: Path) -> None:
    """A table that gets the option after some writes: the MDT's base file lists its committed files."""
    from lsm_lab.timeline.config import read_config, write_config
    path = tmp_path / "t"
    t = lsm_lab.create_table(path, name="trips", record_key="id", partition_by="city", layout="default",
                             table_version=9, table_type="MERGE_ON_READ")
    t.insert(_rows(range(12), 1, 0.0))
    t.upsert(_rows(range(0, 12, 2), 2, 1.0))
    write_config(path, {**read_config(path).props, "hoodie.metadata.enable": "true"}, create=False)
    t = lsm_lab.open_table(path)
    t.upsert(_rows(range(1, 12, 3), 3, 2.0))
    assert listed(path) == model(path)
    base = list((path / ".hoodie" / "metadata" / "files").glob("*.hfile"))
    assert [p.name for p in base] == [f"files-0000-0_0-0-0_{mdt_write.INIT_INSTANT}.hfile"]
    assert hfile.read_hfile(base[0]).entry_count == 4  # three partitions + __all_partitions__


#: a child script's start: the process kills itself once the MDT deltacommit is written, before the data commit
KILL_AFTER_MDT_UPDATE = textwrap.dedent("""
    import os, signal, sys
    import lsm_lab
    from lsm_lab.services import mdt_write
    real = mdt_write.update
    def die(*a, **kw):
        real(*a, **kw)
        os.kill(os.getpid(), signal.SIGKILL)   # after the MDT deltacommit, before the data commit
    mdt_write.update = die
""")

_CRASH = KILL_AFTER_MDT_UPDATE + textwrap.dedent("""
    t = lsm_lab.open_table(sys.argv[1])
    t.upsert([{"id": f"id{i:03d}", "city": ("sf", "nyc", "chennai")[i % 3], "ts": 50, "fare": -9.0}
              for i in range(0, 30, 2)])
""")


@pytest.mark.parametrize("version", [8, 9, 10])
def test_sigkill_after_the_mdt_deltacommit(tmp_path: Path, version: int) -> None:
    path = tmp_path / "t"
    t = _make(path, version, "MERGE_ON_READ")
    t.insert(_rows(range(30), 1, 10.0))
    before, listing = t.read(), listed(path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", _CRASH, str(path)], env=env, capture_output=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]
    t = lsm_lab.open_table(path)
    pending = [i for i in t.instants() if not i.is_completed]
    mdt = t.metadata_table()
    assert mdt is not None and pending
    assert any(i.begin_time == pending[0].begin_time and i.is_completed for i in mdt.mdt.instants())  # MDT went first
    assert compare_rows(before, t.read(), ["id"]) == []  # the table reads its last commit
    assert listed(path) == listing == model(path)  # the MDT ignores the pending write
    t.upsert(_rows(range(3), 60, 0.0))  # the next writer rolls the dead one back, in both tables
    t = lsm_lab.open_table(path)
    assert not [i for i in t.instants() if not i.is_completed and i.is_write]
    assert not [i for i in t.metadata_table().mdt.instants() if i.begin_time == pending[0].begin_time]  # type: ignore[union-attr]
    assert listed(path) == model(path)
    if hudi_available() and version < 10:
        _hudi_rs_reads_through_the_mdt(path)


def test_option_turned_off_drops_the_mdt(tmp_path: Path) -> None:
    """`hoodie.metadata.enable=false` on a table that has one: the next write removes it (undeclared first)."""
    from lsm_lab.timeline.config import read_config, write_config
    path = tmp_path / "t"
    t = _make(path, 8, "COPY_ON_WRITE")
    t.insert(_rows(range(6), 1, 0.0))
    assert lsm_lab.open_table(path).metadata_table() is not None
    write_config(path, {**read_config(path).props, "hoodie.metadata.enable": "false"}, create=False)
    lsm_lab.open_table(path).upsert(_rows(range(3), 2, 1.0))
    t = lsm_lab.open_table(path)
    assert t.metadata_table() is None and "hoodie.table.metadata.partitions" not in t.config.props
    assert not (path / ".hoodie" / "metadata").exists()
    assert t.read().num_rows == 6


@pytest.mark.parametrize("version", [8, 9, 10])
def test_not_partitioned(tmp_path: Path, version: int) -> None:
    """The table root is the `files` key "." (upstream's identifier of the non-partitioned partition)."""
    path = tmp_path / "t"
    t = lsm_lab.create_table(path, name="trips", record_key="id", ordering_field="ts", table_type="MERGE_ON_READ",
                             layout="default", table_version=version, properties={"hoodie.metadata.enable": "true"})
    rows = [{"id": f"id{i:03d}", "ts": 1, "fare": 1.0 * i} for i in range(20)]
    assert t.metadata_table() is None
    t.insert(rows)
    assert t.metadata_table() is not None  # the same Table object sees the MDT its first write made
    t.upsert([{**r, "ts": 2, "fare": -1.0} for r in rows[::3]])
    t.compact(strategy="full")
    t.clean(retained=1)
    assert listed(path) == model(path) and {p for p, _ in listed(path)} == {""}
    m = lsm_lab.open_table(path).metadata_table()
    assert m is not None and m.all_partitions() == [""]
    if version == 10:  # a native HFile log: the whole file is the HFile
        first = sorted((path / ".hoodie" / "metadata" / "files").glob("files-0000-0_0-0-0_*_1.log.hfile"))[0]
        assert [k for k, _ in hfile.read_hfile(first).items()] == [b".", b"__all_partitions__"]
        return
    first_log = sorted((path / ".hoodie" / "metadata" / "files").glob(".files-0000-0_*.log.1_0-0-0"))[0]
    blocks = v1.read_log_file(first_log)
    assert [b.block_type for b in blocks] == [v1.BlockType.HFILE]
    assert blocks[0].records is not None and blocks[0].records.column("key").to_pylist() == [".", "__all_partitions__"]
    if hudi_available():
        import hudi
        import pyarrow as pa
        table = hudi.HudiTableBuilder.from_base_uri(str(path)).build()
        theirs = pa.Table.from_batches(table.read(hudi.HudiReadOptions()))
        assert compare_rows(lsm_lab.open_table(path).read(), theirs, ["id"], columns=["id", "ts", "fare"]) == []


@pytest.mark.parametrize(("version", "seed"), [(8, 5), (10, 7)])
def test_sigkill_loop_with_the_mdt(tmp_path: Path, version: int, seed: int) -> None:
    """tests/test_crash.py's harness on a version-8 and a version-10 table (native HFile MDT logs) keeping the MDT:
    writes, compactions, clusterings,
    cleans and archivals killed at random; after every kill the table reads a prefix of the acknowledged
    batches (the harness's check) and the MDT lists exactly the committed files — plus, while a clean is
    pending, the files it already deleted (upstream's MDT shows them too until the clean completes)."""
    sigkill_loop_with_mdt(tmp_path, table_version=version, seed=seed,
                          properties={"hoodie.keep.min.commits": "6", "hoodie.keep.max.commits": "9"})


def sigkill_loop_with_mdt(tmp_path: Path, *, table_version: int, seed: int, properties: dict[str, str]) -> None:
    """Six random kills of the crash harness on a default-layout table with the MDT on (plus `properties`);
    after each, the harness's own check and: the MDT lists the committed files, and beyond them only files a
    pending data clean already deleted (tests/test_metadata_maintenance.py runs it with the MDT's services)."""
    from lsm_lab.services.clean import files_in_plan
    from lsm_lab.timeline.instant import CLEAN
    harness = load_harness()

    def create(path: Any, layout: str = "lsm_tree") -> None:
        lsm_lab.create_table(path, name="crash", record_key="id", partition_by="p", ordering_field="ts",
                             layout="default", table_version=table_version,
                             properties={"hoodie.compaction.hybrid.log.file.num.threshold": "2",
                                         "hoodie.metadata.enable": "true", **properties})

    checked = []
    check_files = harness._check_files

    def check(table: Any) -> None:
        check_files(table)
        path = Path(table.path)
        want = model(path)
        if lsm_lab.open_table(path).metadata_table() is None:  # killed inside the MDT's initialisation
            assert want == {}
            checked.append(0)  # a state checked too: no committed row, no MDT
            return
        got = listed(path)
        cleaning = {os.path.basename(f) for i in table.instants() if i.action == CLEAN and not i.is_completed
                    for f in files_in_plan(table.active_timeline.read_content(i, State.REQUESTED))}
        assert {k: v for k, v in got.items() if k in want} == want
        assert {name for _, name in set(got) - set(want)} <= cleaning
        checked.append(len(want))

    with mock.patch.object(harness, "create", create), mock.patch.object(harness, "_check_files", check):
        stats = harness.run(6, workdir=tmp_path, seed=seed, max_delay=2.0, verbose=False, layout="default")
    assert stats["kills"] == 6 and len(checked) >= 6 and max(checked) > 0


def load_harness() -> Any:
    import importlib.util
    spec = importlib.util.spec_from_file_location("lsm_lab_crash_test_mdt", ROOT / "benchmarks" / "crash_test.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_killed_mdt_rollback_is_finished_before_the_instant_is_written_again(tmp_path: Path) -> None:
    """A compaction fails after its MDT deltacommit; the MDT rollback of it is killed half way (its
    completed file gone, the rollback pending); the compaction runs again with the same instant: the
    pending MDT rollback is finished first, else readers would hide the new MDT deltacommit it names."""
    path = tmp_path / "t"
    t = _make(path, 9, "MERGE_ON_READ")
    t.insert(_rows(range(30), 1, 10.0))
    t.upsert(_rows(range(0, 30, 4), 5, 100.0))
    from lsm_lab.storage import list_names as real_list
    real_update = mdt_write.update
    calls = {"n": 0, "armed": 0}

    def update_then_die(*a: Any, **kw: Any) -> Any:
        real_update(*a, **kw)
        calls["armed"] = 1  # count the listings of the MDT rollback only
        raise _Killed

    def list_then_die(folder: Any) -> Any:  # the MDT rollback: its completed-file removal lists, then the files
        calls["n"] += calls["armed"]
        if calls["n"] == 2:
            raise _Killed
        return real_list(folder)

    with mock.patch.object(mdt_write, "update", update_then_die), \
            mock.patch.object(mdt_write, "list_names", list_then_die), pytest.raises(_Killed):
        t.compact(strategy="full")
    t = lsm_lab.open_table(path)
    mdt = t.metadata_table()
    assert mdt is not None
    assert [i.action for i in mdt.mdt.instants() if not i.is_completed].count("rollback") == 1
    assert listed(path) == model(path)  # the half-rolled-back compaction is not listed
    t.compact(strategy="full")  # the plan runs again, same instant
    t = lsm_lab.open_table(path)
    assert not [i for i in lsm_lab.open_table(path).metadata_table().mdt.instants()  # type: ignore[union-attr]
                if not i.is_completed]
    assert listed(path) == model(path)
    assert any(n.endswith(".parquet") and not n.startswith(".") for _, n in listed(path))


def test_on_an_object_store(s3_table: Any) -> None:
    """The same protocol on the S3 server: the listing the MDT gives equals one LIST of the data."""
    t = s3_table(name="trips", record_key="id", ordering_field="ts", partition_by="city", layout="default",
                 table_type="MERGE_ON_READ", table_version=8, properties={"hoodie.metadata.enable": "true"})
    t.insert(_rows(range(20), 1, 0.0))
    t.upsert(_rows(range(0, 20, 3), 2, 1.0))
    t.compact(strategy="full")
    t.clean(retained=1)
    t = lsm_lab.open_table(t.path)
    m = t.metadata_table()
    assert m is not None
    f = m.files()
    got = {(p, n): s for p, n, s in zip(f.column("partition").to_pylist(), f.column("file_name").to_pylist(),
                                        f.column("size").to_pylist(), strict=True)}
    want = {(p, path.name): size for p, path, _, size in fsview.list_data_files_sized(t.path)}
    assert got == want and len(got) >= 3


_CRASH_IN_MDT_COMPACTION = textwrap.dedent("""
    import os, signal, sys
    import lsm_lab
    from lsm_lab.services import mdt_write
    real = mdt_write.commit_metadata
    def die(*a, **kw):
        if kw.get("operation") == "compact":   # the MDT compaction's base file is written, its commit not
            os.kill(os.getpid(), signal.SIGKILL)
        return real(*a, **kw)
    mdt_write.commit_metadata = die
    t = lsm_lab.open_table(sys.argv[1])
    t.upsert([{"id": f"id{i:03d}", "city": ("sf", "nyc", "chennai")[i % 3], "ts": 50, "fare": -9.0}
              for i in range(0, 30, 2)])
""")


def test_sigkill_inside_the_mdt_compaction(tmp_path: Path) -> None:
    path = tmp_path / "t"
    t = _make(path, 8, "MERGE_ON_READ", compact_every=2)
    t.insert(_rows(range(30), 1, 10.0))
    t.upsert(_rows(range(0, 30, 5), 2, 1.0))
    before, listing = t.read(), listed(path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", _CRASH_IN_MDT_COMPACTION, str(path)], env=env, capture_output=True,
                          timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]
    t = lsm_lab.open_table(path)
    m = t.metadata_table()
    assert m is not None and [i.action for i in m.mdt.instants() if not i.is_completed] == ["compaction"]
    assert compare_rows(before, t.read(), ["id"]) == []
    assert listed(path) == listing == model(path)  # the half-made MDT compaction changes nothing
    for ts in (60, 61, 62):  # the dead write is rolled back, the MDT compaction undone, then done again
        t.upsert(_rows(range(3), ts, 0.0))
        t = lsm_lab.open_table(path)
        assert listed(path) == model(path)
    m = t.metadata_table()
    assert m is not None and all(i.is_completed for i in m.mdt.instants())
    assert [i.action for i in m.mdt.instants()].count("compaction") >= 1
    if hudi_available():
        _hudi_rs_reads_through_the_mdt(path)


def test_upgrade_to_version_10_builds_the_mdt_again(tmp_path: Path) -> None:
    """`Table.upgrade()` rewrites a version 9 table's files as version 10; the next write finds the MDT at the old
    version and builds it again at 10 (native HFile logs from then on), listing exactly the committed files."""
    path = tmp_path / "t"
    t = _make(path, 9, "MERGE_ON_READ")
    t.insert(_rows(range(30), 1, 10.0))
    t.upsert(_rows(range(0, 30, 4), 2, 1.0))
    t = t.upgrade()
    assert t.config.version == 10
    t.upsert(_rows(range(0, 30, 5), 3, 2.0))
    t = lsm_lab.open_table(path)
    m = t.metadata_table()
    assert m is not None and m.mdt.config.version == 10
    assert listed(path) == model(path)
    native_hfile_logs(path)
    got = {r["id"]: r["fare"] for r in t.read(columns=["id", "fare"]).to_pylist()}
    assert got == {f"id{i:03d}": (2.0 + i if i % 5 == 0 else 1.0 + i if i % 4 == 0 else 10.0 + i) for i in range(30)}
