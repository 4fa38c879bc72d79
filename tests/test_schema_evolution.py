"""Schema evolution by Hudi's rules (lsm_lab/merge/evolution.py, docs/FORMAT.md "Schema evolution").

Every rule accepted and refused, on the rule function and through a table; a Hypothesis test that
random sequences of writes with evolving schemas (columns added, nullable columns left out, types
promoted or written narrower) read back equal to a dict model, on COW and MOR, `lsm_tree` and default
layouts, table versions 10 (native logs) and 8 (v1 Avro logs), through compaction, the sorted streaming
merge and time travel; `schema_history`, `lsm-lab show schema`; hudi-rs reads a version 8/9 table after
an added column and a promotion and agrees.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lsm_lab
from lsm_lab.errors import InputError, SchemaError
from lsm_lab.interop.hudi_tables import compare_rows, hudi_available, hudi_rs_read
from lsm_lab.merge import evolution, records
from lsm_lab.services import occ


def _schema(**cols: pa.DataType) -> pa.Schema:
    return pa.schema([pa.field(n, t, True) for n, t in cols.items()])


# --------------------------------------------------------------------------- the rules
PROMOTIONS = [  # (table type, batch type): the table takes the batch's wider type
    (pa.int32(), pa.int64()), (pa.int32(), pa.float32()), (pa.int32(), pa.float64()), (pa.int32(), pa.string()),
    (pa.int64(), pa.float32()), (pa.int64(), pa.float64()), (pa.int64(), pa.string()),
    (pa.float32(), pa.float64()), (pa.float32(), pa.string()), (pa.float64(), pa.string()),
    (pa.int8(), pa.int16()), (pa.int16(), pa.int32()), (pa.int8(), pa.int64()),
]


@pytest.mark.parametrize(("old", "new"), PROMOTIONS, ids=lambda t: str(t))
def test_promotion_widens_the_table(old: pa.DataType, new: pa.DataType) -> None:
    out = records.evolve_schema(_schema(id=pa.string(), v=old), _schema(id=pa.string(), v=new))
    assert out.field("v").type == new
    assert evolution.is_promotion(old, new) and not evolution.is_promotion(new, old)


@pytest.mark.parametrize(("old", "new"), [*PROMOTIONS, (pa.string(), pa.binary()), (pa.binary(), pa.string())],
                         ids=lambda t: str(t))
def test_narrower_batch_is_cast_up_and_the_table_keeps_its_type(old: pa.DataType, new: pa.DataType) -> None:
    """The reverse of a promotion (long → int, string → int, ...) never narrows the table: the batch is cast
    to the table's type, as upstream's `AvroSchemaEvolutionUtils.reconcileSchemaRequirements` does; string and
    bytes read as each other, so either way the table keeps its type."""
    table = _schema(id=pa.string(), v=new)
    assert records.evolve_schema(table, _schema(id=pa.string(), v=old)) == table


REFUSED = [
    (pa.int64(), pa.bool_()), (pa.bool_(), pa.int32()), (pa.float64(), pa.timestamp("us")),
    (pa.string(), pa.date32()), (pa.int32(), pa.decimal128(10, 2)), (pa.timestamp("ms"), pa.timestamp("us")),
    (pa.int64(), pa.struct([("a", pa.int64())])), (pa.list_(pa.int64()), pa.string()),
    (pa.int64(), pa.uint64()), (pa.float64(), pa.list_(pa.float64())),
]


@pytest.mark.parametrize(("old", "new"), REFUSED, ids=lambda t: str(t))
def test_other_type_changes_are_refused_naming_the_column_and_the_rule(old: pa.DataType, new: pa.DataType) -> None:
    with pytest.raises(SchemaError, match=re.escape(f"column 'v' changes type from {old} to {new}; Hudi's schema "
                                                    "evolution on write allows")):
        records.evolve_schema(_schema(id=pa.string(), v=old), _schema(id=pa.string(), v=new))


def test_new_columns_go_at_the_end_nullable_and_left_out_nullable_columns_stay() -> None:
    base = _schema(id=pa.string(), a=pa.int64(), b=pa.string())
    incoming = pa.schema([pa.field("new", pa.float64(), False), ("id", pa.string()), ("b", pa.string())])
    out = records.evolve_schema(base, incoming)
    assert out.names == ["id", "a", "b", "new"] and out.field("new").nullable


def test_a_required_column_cannot_be_left_out() -> None:
    base = pa.schema([pa.field("id", pa.string(), False), pa.field("must", pa.int64(), False)])
    with pytest.raises(SchemaError, match="leaves out column 'must', which is required"):
        records.evolve_schema(base, pa.schema([("id", pa.string())]))
    assert records.evolve_schema(base, pa.schema([("id", pa.string())]), partial=True) == base  # a delete may


def test_nested_fields_evolve_by_the_same_rules() -> None:
    old = pa.struct([("x", pa.int32()), ("y", pa.string())])
    base = _schema(id=pa.string(), s=old, xs=pa.list_(pa.int32()), m=pa.map_(pa.string(), pa.int32()))
    incoming = _schema(id=pa.string(), s=pa.struct([("x", pa.int64()), ("z", pa.float64())]),
                       xs=pa.list_(pa.float64()), m=pa.map_(pa.string(), pa.int64()))
    out = records.evolve_schema(base, incoming)
    assert out.field("s").type == pa.struct([("x", pa.int64()), ("y", pa.string()), ("z", pa.float64())])
    assert out.field("xs").type == pa.list_(pa.float64())
    assert out.field("m").type == pa.map_(pa.string(), pa.int64())
    with pytest.raises(SchemaError, match=re.escape("column 's.x' changes type from int32 to bool")):
        records.evolve_schema(base, _schema(id=pa.string(), s=pa.struct([("x", pa.bool_())])))
    with pytest.raises(SchemaError, match=re.escape("column 'xs.element' changes type from int32 to bool")):
        records.evolve_schema(base, _schema(id=pa.string(), xs=pa.list_(pa.bool_())))
    with pytest.raises(SchemaError, match="the map's key type changes"):
        records.evolve_schema(base, _schema(id=pa.string(), m=pa.map_(pa.int32(), pa.int32())))
    required = _schema(id=pa.string(), s=pa.struct([pa.field("x", pa.int32(), False), ("y", pa.string())]))
    with pytest.raises(SchemaError, match=re.escape("field 's.x' is required (not nullable)")):
        records.evolve_schema(required, _schema(id=pa.string(), s=pa.struct([("y", pa.string())])))


def test_concurrent_writers_promotions_reconcile() -> None:
    """The commit records the committed schema evolved by this writer's (services/occ.py)."""
    assert occ.merge_schemas(_schema(v=pa.int64()), _schema(v=pa.int32())) == _schema(v=pa.int64())
    assert occ.merge_schemas(_schema(v=pa.int32(), a=pa.string()), _schema(v=pa.float64())) == \
        _schema(v=pa.float64(), a=pa.string())
    with pytest.raises(lsm_lab.ConflictError, match="cannot follow"):
        occ.merge_schemas(_schema(v=pa.int64()), _schema(v=pa.bool_()))


def test_cast_rounds_a_promotion_but_never_a_narrowing() -> None:
    big = pa.array([2**60 + 1, None], pa.int64())
    assert evolution.cast_to(big, pa.float64()).to_pylist() == [float(2**60), None]  # as Java's long → double
    with pytest.raises(pa.ArrowInvalid):
        evolution.cast_to(pa.array([2**40], pa.int64()), pa.int32())  # a time-travel narrowing must fit


# --------------------------------------------------------------------------- through a table
def _table(path: Path, *, layout: str = "lsm_tree", table_type: str = "MERGE_ON_READ", version: int = 10,
           partition_by: str | None = None) -> lsm_lab.Table:
    return lsm_lab.create_table(path, name="t", record_key="id", ordering_field="ts", layout=layout,
                                table_type=table_type, table_version=version, partition_by=partition_by)


def _model_cast(value: Any, to: pa.DataType) -> Any:
    """A value of an older type as the reader shows it after a promotion (Python's conversions; a float as
    text in Arrow's shortest form, "2" for 2.0)."""
    if value is None:
        return None
    if pa.types.is_floating(to):
        return float(value)
    if pa.types.is_string(to):
        if isinstance(value, bytes):
            return value.decode()
        if isinstance(value, float):
            text = repr(value)
            return text[:-2] if text.endswith(".0") else text
        return str(value)
    if pa.types.is_binary(to):
        return value.encode() if isinstance(value, str) else value
    return value


_SAMPLE: dict[pa.DataType, list[Any]] = {pa.int8(): [3, -4], pa.int16(): [300, -4], pa.int32(): [70000, -4], pa.int64(): [2**40, -4],
           pa.float32(): [1.5, -0.25], pa.float64(): [2.0, -0.125], pa.string(): ["a", "é"], pa.binary(): [b"a", b"b"]}


@pytest.mark.parametrize(("old", "new"), [*PROMOTIONS, (pa.string(), pa.binary()), (pa.binary(), pa.string())],
                         ids=lambda t: str(t))
@pytest.mark.parametrize("table_type", ["MERGE_ON_READ", "COPY_ON_WRITE"])
def test_every_promotion_reads_older_files_cast(tmp_path: Path, old: pa.DataType, new: pa.DataType,
                                                table_type: str) -> None:
    t = _table(tmp_path / "t", table_type=table_type)
    t.insert(pa.table({"id": ["a", "b", "c"], "ts": [1, 1, 1], "v": pa.array(_SAMPLE[old] + [None], old)}))
    t.upsert(pa.table({"id": ["b", "d"], "ts": [2, 2], "v": pa.array([*_SAMPLE[new][:1], None], new)}))
    want_type = new if evolution.is_promotion(old, new) else old  # string ↔ bytes: the table keeps its type
    assert t.schema is not None and t.schema.field("v").type == want_type
    got = {r["id"]: r["v"] for r in t.read(columns=["id", "v"]).to_pylist()}
    assert got == {"a": _model_cast(_SAMPLE[old][0], want_type), "b": _model_cast(_SAMPLE[new][0], want_type),
                   "c": None, "d": None}
    if t.config.is_mor:
        t.compact(strategy="full")
        assert {r["id"]: r["v"] for r in t.read(columns=["id", "v"]).to_pylist()} == got


def test_refused_writes_leave_the_table_unchanged(tmp_path: Path) -> None:
    t = _table(tmp_path / "t", partition_by="city")
    t.insert(pa.table({"id": ["a"], "city": ["x"], "ts": [1], "n": pa.array([1], pa.int32())}))
    cases = [
        (pa.table({"id": ["a"], "city": ["x"], "ts": [2], "n": [True]}), "column 'n' changes type from int32 to bool"),
        (pa.table({"id": ["a"], "city": ["x"], "ts": [2.5]}), "column 'ts' changes type from int64 to double: it is a "
                                                              "record key, partition or ordering column"),
        (pa.table({"id": ["a"], "city": [True], "ts": [2]}), "column 'city' changes type from string to bool"),
        (pa.table({"id": ["a"], "ts": [2]}), "the data has no partition column 'city'"),
        (pa.table({"id": ["a"], "city": ["x"]}), "the data has no ordering column 'ts'"),
    ]
    for data, message in cases:
        with pytest.raises(SchemaError, match=re.escape(message)):
            t.upsert(data)
    assert len(t.completed_writes()) == 1 and t.schema == _schema(id=pa.string(), city=pa.string(), ts=pa.int64(),
                                                                   n=pa.int32())


def test_time_travel_reads_with_the_schema_of_its_instant(tmp_path: Path) -> None:
    """As upstream's Spark relation (`HoodieBaseRelation`: `TableSchemaResolver.getTableSchema(timestamp)`)."""
    t = _table(tmp_path / "t")
    i1 = t.insert(pa.table({"id": ["a", "b"], "ts": [1, 1], "n": pa.array([1, 2], pa.int32())}))
    i2 = t.upsert(pa.table({"id": ["b"], "ts": [2], "n": pa.array([2.5], pa.float64()), "tip": ["x"]}))
    old = t.read(as_of=i1.begin_time, columns=["id", "n"])
    assert old.schema.field("n").type == pa.int32() and old.to_pylist() == [{"id": "a", "n": 1}, {"id": "b", "n": 2}]
    with pytest.raises(InputError, match="unknown column 'tip'"):
        t.read(as_of=i1.begin_time, columns=["tip"])
    assert t.schema_at(i1.begin_time) == _schema(id=pa.string(), ts=pa.int64(), n=pa.int32())
    now = t.read(as_of=i2, columns=["id", "n", "tip"]).to_pylist()
    assert now == [{"id": "a", "n": 1.0, "tip": None}, {"id": "b", "n": 2.5, "tip": "x"}]
    history = t.schema_history()
    assert history.column("instant").to_pylist() == [i1.begin_time, i2.begin_time]
    assert history.column("change").to_pylist() == ["created: id, ts, n", "added tip; n: int32 → double"]


def test_filters_on_promoted_columns_never_trust_older_statistics(tmp_path: Path) -> None:
    """Old files keep their stored type's statistics (ints); a filter on the promoted (text) column reads them."""
    t = _table(tmp_path / "t")
    t.insert(pa.table({"id": ["a", "b"], "ts": [1, 1], "n": pa.array([9, 10], pa.int32())}))
    t.upsert(pa.table({"id": ["c"], "ts": [1], "n": ["7"]}))
    assert t.read(columns=["id"], filter=[("n", "=", "9")]).column("id").to_pylist() == ["a"]
    assert sorted(t.read(columns=["id"], filter=[("n", ">", "7")]).column("id").to_pylist()) == ["a"]  # "10" < "7"


def test_nested_struct_gains_a_field_through_a_table(tmp_path: Path) -> None:
    t = _table(tmp_path / "t")
    t.insert([{"id": "a", "ts": 1, "s": {"x": 1}}, {"id": "b", "ts": 1, "s": {"x": 2}}])
    t.upsert([{"id": "b", "ts": 2, "s": {"x": 3, "y": "new"}}])
    got = {r["id"]: r["s"] for r in t.read(columns=["id", "s"]).to_pylist()}
    assert got == {"a": {"x": 1, "y": None}, "b": {"x": 3, "y": "new"}}


# --------------------------------------------------------------------------- Hypothesis: writes vs a dict model
LADDER = [pa.int32(), pa.int64(), pa.float64(), pa.string()]  # each promotes to every later one
_VALUES = {0: st.integers(-1000, 1000), 1: st.integers(-1000, 1000),
           2: st.sampled_from([0.5, -2.25, 3.0, 1024.0, -0.125]), 3: st.sampled_from(["p", "q", "r"])}


def _convert(value: Any, frm: int, to: int) -> Any:
    """A value stored under ladder type `frm` read as ladder type `to` (to >= frm)."""
    if value is None or frm == to:
        return value
    if to == 2:
        return float(value)
    if to == 3:
        return _model_cast(value, pa.string())
    return value


@st.composite
def _programs(draw: st.DrawFn) -> list[tuple[Any, ...]]:
    """Writes: ("write", rows, {column: ladder index}) with some columns left out, added or retyped;
    ("delete", keys); ("compact",)."""
    steps: list[tuple[Any, ...]] = []
    table: dict[str, int] = {}
    for _ in range(draw(st.integers(2, 6))):
        kind = draw(st.sampled_from(["write", "write", "write", "delete", "compact"]))
        if kind != "write" and not table:
            kind = "write"
        if kind == "delete":
            steps.append(("delete", sorted(draw(st.sets(st.sampled_from("abcdef"), min_size=1, max_size=2)))))
            continue
        if kind == "compact":
            steps.append(("compact",))
            continue
        cols: dict[str, int] = {}
        for name, _cur in table.items():
            if draw(st.booleans()):  # left out (nullable): null
                continue
            cols[name] = draw(st.integers(0, 3))  # narrower: cast up; same; wider: a promotion
        for name in ("c1", "c2", "c3"):
            if name not in table and draw(st.integers(0, 3)) == 0:
                cols[name] = draw(st.integers(0, 3))
        keys = sorted(draw(st.sets(st.sampled_from("abcdef"), min_size=1, max_size=4)))
        rows = [{c: draw(st.none() | _VALUES[i]) for c, i in cols.items()} for _ in keys]
        steps.append(("write", keys, cols, rows))
        for c, i in cols.items():
            table[c] = max(table.get(c, i), i)
    return steps


def _run(t: lsm_lab.Table, steps: list[tuple[Any, ...]]) -> None:
    model: dict[str, dict[str, tuple[Any, int]]] = {}  # key -> column -> (value as stored, its ladder index)
    types: dict[str, int] = {}
    snapshots: list[tuple[str, dict[str, dict[str, Any]], list[str]]] = []
    ts = 0

    def expected() -> dict[str, dict[str, Any]]:
        return {k: {c: (_convert(*row[c], types[c]) if c in row else None) for c in types} for k, row in model.items()}

    def read_back(**kw: Any) -> dict[str, dict[str, Any]]:
        cols = kw.pop("columns")
        return {r["id"]: {c: r[c] for c in cols} for r in t.read(columns=["id", *cols], **kw).to_pylist()}

    for step in steps:
        ts += 1
        if step[0] == "compact":
            if t.config.is_mor:
                t.compact(strategy="full")
            continue
        if step[0] == "delete":
            t.delete(pa.table({"id": step[1]}))
            for k in step[1]:
                model.pop(k, None)
        else:
            _, keys, cols, rows = step
            data = {"id": pa.array(keys), "ts": pa.array([ts] * len(keys), pa.int64())}
            data |= {c: pa.array([r[c] for r in rows], LADDER[i]) for c, i in cols.items()}
            inst = t.upsert(pa.table(data))
            for c, i in cols.items():
                types[c] = max(types.get(c, i), i)
            for k, r in zip(keys, rows, strict=True):  # each value is stored cast to the table's type after the write
                model[k] = {c: (_convert(r[c], i, types[c]), types[c]) for c, i in cols.items()}
            snapshots.append((inst.begin_time, expected(), sorted(types)))
        want = expected()
        got = read_back(columns=sorted(types))
        assert got == want
        assert t.schema is not None and all(t.schema.field(c).type == LADDER[i] for c, i in types.items())
    if t.config.is_lsm:  # the sorted streaming merge, batch by batch, and the loser tree
        streamed = t.scan(batch_size=2, merge="sorted").to_reader().read_all()
        assert {r["id"]: {c: r[c] for c in types} for r in streamed.to_pylist()} == expected()
    for instant, snap, cols in snapshots:  # time travel: the rows and the columns of that instant
        try:
            got = read_back(as_of=instant, columns=cols)
        except InputError as exc:  # older than the cleaner kept
            assert "the cleaner kept only" in str(exc)
            continue
        assert got == snap


TABLES = [("lsm_tree", "MERGE_ON_READ", 10), ("lsm_tree", "COPY_ON_WRITE", 10), ("default", "MERGE_ON_READ", 10),
          ("default", "COPY_ON_WRITE", 10), ("default", "MERGE_ON_READ", 8), ("lsm_tree", "MERGE_ON_READ", 8)]


@pytest.mark.parametrize(("layout", "table_type", "version"), TABLES)
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(steps=_programs())
def test_random_evolving_writes_read_back_as_the_model(tmp_path_factory: pytest.TempPathFactory, layout: str,
                                                       table_type: str, version: int,
                                                       steps: list[tuple[Any, ...]]) -> None:
    t = _table(tmp_path_factory.mktemp("t") / "t", layout=layout, table_type=table_type, version=version)
    _run(t, steps)
    if version == 8 and table_type == "MERGE_ON_READ" and any(s[0] == "write" for s in steps[1:]):
        logs = [f for fs in t.latest_slices() for f in fs.log_files]
        assert all(f.name.log_format == 1 for f in logs)  # the v1 Avro log path was the one exercised


# --------------------------------------------------------------------------- hudi-rs
@pytest.mark.skipif(not hudi_available(), reason="hudi-rs is not installed (pip install -e '.[interop]')")
@pytest.mark.parametrize("version", [8, 9])
@pytest.mark.parametrize("table_type", ["MERGE_ON_READ", "COPY_ON_WRITE"])
def test_hudi_rs_reads_an_evolved_table(tmp_path: Path, version: int, table_type: str) -> None:
    """hudi-rs 0.5 reads the latest schema for every read, time travel included (upstream's Spark relation
    reads the instant's); the values agree either way."""
    t = _table(tmp_path / "t", layout="default", table_type=table_type, version=version, partition_by="city")
    t.insert(pa.table({"id": ["a", "b", "c"], "city": ["x", "y", "x"], "ts": [1, 1, 1],
                       "n": pa.array([1, 2, 3], pa.int32()), "f": pa.array([1.5, 2.5, None], pa.float32())}))
    t.upsert(pa.table({"id": ["b", "d"], "city": ["y", "x"], "ts": [2, 2], "n": pa.array([20, 2**40], pa.int64()),
                       "f": pa.array([0.25, 9.0], pa.float64()), "tip": ["q", None]}))
    t.upsert(pa.table({"id": ["a"], "city": ["x"], "ts": [3], "n": pa.array([7], pa.int32())}))  # f, tip left out
    if table_type == "MERGE_ON_READ":
        assert {f.name.log_format for fs in t.latest_slices() for f in fs.log_files} == {1}
    path = str(t.path)
    mine, theirs = t.read(), hudi_rs_read(path)
    assert compare_rows(mine, theirs, ["id"]) == []
    for name in ("n", "f", "tip"):
        assert theirs.schema.field(name).type == mine.schema.field(name).type, name
    for inst in t.completed_writes():
        assert compare_rows(t.read(as_of=inst.begin_time), hudi_rs_read(path, as_of=inst.begin_time), ["id"]) == []


# --------------------------------------------------------------------------- the CLI
def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lsm_lab", *args], capture_output=True, text=True, check=False)


def test_show_schema_and_its_history(tmp_path: Path) -> None:
    t = _table(tmp_path / "t")
    i1 = t.insert(pa.table({"id": ["a"], "ts": [1], "n": pa.array([1], pa.int32())}))
    t.upsert(pa.table({"id": ["a"], "ts": [2], "n": pa.array([1.5], pa.float64()), "tip": ["x"]}))
    now = _cli("show", "schema", str(t.path))
    assert now.returncode == 0 and re.search(r"n\s+double\s+True", now.stdout) and "tip" in now.stdout
    then = _cli("show", "schema", str(t.path), "--as-of", i1.begin_time)
    assert then.returncode == 0 and re.search(r"n\s+int32", then.stdout) and "tip" not in then.stdout
    history = _cli("show", "schema", str(t.path), "--history")
    assert history.returncode == 0 and "added tip; n: int32 → double" in history.stdout
    assert "(2 schema version(s))" in history.stderr
    bad = _cli("write", str(t.path), str(_parquet(tmp_path / "bad.parquet", pa.table({"id": ["a"], "ts": [3],
                                                                                          "n": [True]}))))
    assert bad.returncode != 0 and bad.stderr.strip().count("\n") == 0
    assert "column 'n' changes type from double to bool" in bad.stderr


def _parquet(path: Path, table: pa.Table) -> Path:
    import pyarrow.parquet as pq

    pq.write_table(table, path)
    return path


@pytest.mark.parametrize("layout", ["lsm_tree", "default"])
def test_lookups_incremental_read_optimized_and_cdc_read_the_promoted_type(tmp_path: Path, layout: str) -> None:
    t = lsm_lab.create_table(tmp_path / "t", name="t", record_key="id", ordering_field="ts", layout=layout, cdc=True)
    first = t.insert(pa.table({"id": ["a", "b"], "ts": [1, 1], "n": pa.array([1, 2], pa.int32())}))
    t.upsert(pa.table({"id": ["b", "c"], "ts": [2, 2], "n": [2.5, 3.5], "tip": ["x", None]}))  # int32 → double
    t.upsert(pa.table({"id": ["a"], "ts": [3], "n": ["seven"]}))                               # double → string
    assert t.lookup(["a", "b"]).select(["id", "n"]).to_pylist() == [{"id": "a", "n": "seven"}, {"id": "b", "n": "2.5"}]
    assert t.read_incremental(first.completion_time, columns=["id", "n"]).sort_by("id").column("n").to_pylist() \
        == ["seven", "2.5", "3.5"]
    assert {r["id"]: r["n"] for r in t.read_optimized(columns=["id", "n"]).to_pylist()}["a"] == "1"
    changes = {(r["op"], r["record_key"]): (r["before"], r["after"]) for r in t.read_cdc(first.completion_time).to_pylist()}
    before, after = changes[("u", "a")]
    assert before is not None and after is not None and (before["n"], after["n"]) == ("1", "seven")


def test_key_and_partition_columns_keep_their_type(tmp_path: Path) -> None:
    t = lsm_lab.create_table(tmp_path / "t", name="t", record_key="k", partition_by="day")
    t.insert(pa.table({"k": pa.array([1], pa.int32()), "day": pa.array([7], pa.int16()), "v": [1]}))
    for data, column in ((pa.table({"k": pa.array([2], pa.int64()), "day": pa.array([7], pa.int16())}), "k"),
                         (pa.table({"k": pa.array([2], pa.int32()), "day": pa.array([7], pa.int32())}), "day")):
        with pytest.raises(SchemaError, match=f"column '{column}' changes type .*: it is a record key, partition"):
            t.upsert(data)
    t.upsert(pa.table({"k": pa.array([2], pa.int8()), "day": pa.array([7], pa.int8())}))  # narrower: cast up
    assert sorted(t.read(columns=["k", "day", "v"]).to_pylist(), key=lambda r: r["k"]) == [
        {"k": 1, "day": 7, "v": 1}, {"k": 2, "day": 7, "v": None}]
