"""Change data capture: CDC logs in every mode, `read_cdc` from logs and from inference.

The reference is a plain dict model of the change stream: a dict (partition, key)
→ row, and for every write the records it inserted, updated (before, after) or
deleted (deletes of absent keys change nothing).  Every logging mode, every
operation, both table types, compaction and clustering between changes, and the
inference from snapshots (CDC off) must give exactly the model's stream.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from instantfiles import read_instant, write_instant_json
from localpath import local

import lsm_lab
from lsm_lab.cli.app import main as cli_main
from lsm_lab.errors import CorruptFileError, InputError, TableConfigError, UnsupportedFeatureError
from lsm_lab.filegroup import fsview
from lsm_lab.format import cdc as cdclog_format
from lsm_lab.format import log_v2 as v2
from lsm_lab.format import naming
from lsm_lab.table import cdc as cdc_reader
from lsm_lab.timeline import config as cfg

MODES = ("DATA_BEFORE_AFTER", "DATA_BEFORE", "OP_KEY_ONLY")
TYPES = ("MERGE_ON_READ", "COPY_ON_WRITE")
PARTS = ("north", "south")


# --------------------------------------------------------------------------- the model
def part(key: int) -> str:
    return PARTS[key % 2]


def rows_of(keys: list[int], value: int) -> list[dict[str, Any]]:
    return [{"id": f"k{k:02d}", "p": part(k), "v": value * 100 + k} for k in keys]


def model_stream(steps: list[tuple[str, list[int], int]]) -> list[list[tuple[Any, ...]]]:
    """Per write step: the changes, sorted by key: (op, key, before, after) with rows as dicts."""
    state: dict[tuple[str, str], dict[str, Any]] = {}
    out: list[list[tuple[Any, ...]]] = []
    for op, keys, value in steps:
        if op in ("compact", "cluster"):
            continue
        changes: list[tuple[str, str, dict[str, Any] | None, dict[str, Any] | None]] = []
        for row in rows_of(sorted(set(keys)), value):
            ident = (row["p"], row["id"])
            if op == "delete":
                if ident in state:
                    changes.append(("d", row["id"], state.pop(ident), None))
            else:
                before = state.get(ident)
                state[ident] = row
                changes.append(("u" if before else "i", row["id"], before, row))
        out.append(sorted(changes, key=lambda c: c[1]))
    return out


def apply(table: lsm_lab.Table, steps: list[tuple[str, list[int], int]]) -> list[str]:
    """Run the steps; returns the begin times of the writes (one per write step, in order)."""
    begins = []
    for op, keys, value in steps:
        if op == "compact":
            table.compact(strategy="full")
            continue
        if op == "cluster":
            table.cluster(options={"hoodie.clustering.plan.strategy.small.file.limit": "1" + "0" * 12})
            continue
        data = rows_of(sorted(set(keys)), value)
        if op == "delete":
            data = [{"id": r["id"], "p": r["p"]} for r in data]
        begins.append(getattr(table, op)(data).begin_time)
    return begins


def stream_of(result: pa.Table, begins: list[str]) -> list[list[tuple[Any, ...]]]:
    by_instant: dict[str, list[tuple[Any, ...]]] = {b: [] for b in begins}
    for r in result.to_pylist():
        by_instant.setdefault(r["commit_time"], []).append((r["op"], r["record_key"], r["before"], r["after"]))
    return [by_instant[b] for b in begins] + [v for k, v in by_instant.items() if k not in begins]


WORKLOAD = [
    ("insert", [1, 2, 3, 4], 1),
    ("upsert", [2, 5], 2),              # one update, one insert
    ("delete", [3, 9], 3),              # 9 is absent: no change record
    ("compact", [], 0),
    ("bulk_insert", [4, 6, 7], 4),      # an existing key: an update
    ("upsert", [1, 6], 5),
    ("delete", [1, 2, 4, 5, 6, 7], 6),  # everything, one partition after the other
    ("insert", [1], 7),                 # a deleted key comes back: an insert
]


# --------------------------------------------------------------------------- configuration
def test_table_config_round_trip(tmp_path: Path) -> None:
    t = lsm_lab.create_table(tmp_path / "t", name="t", record_key="id", cdc=True, cdc_mode="data_before")
    props = cfg.read_config(t.path).props
    assert props["hoodie.table.cdc.enabled"] == "true"
    assert props["hoodie.table.cdc.supplemental.logging.mode"] == "DATA_BEFORE"
    assert (t.config.cdc_enabled, t.config.cdc_mode) == (True, "DATA_BEFORE")
    off = lsm_lab.create_table(tmp_path / "off", name="t", record_key="id")
    assert cfg.read_config(off.path).props["hoodie.table.cdc.enabled"] == "false"
    assert (off.config.cdc_enabled, off.config.cdc_mode) == (False, "DATA_BEFORE_AFTER")


def test_bad_cdc_arguments_are_named(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cdc_mode"):
        lsm_lab.create_table(tmp_path / "a", name="t", record_key="id", cdc=True, cdc_mode="EVERYTHING")
    with pytest.raises(InputError, match="cdc"):
        lsm_lab.create_table(tmp_path / "b", name="t", record_key="id", cdc="yes")  # type: ignore[arg-type]  # the mistake under test
    with pytest.raises(UnsupportedFeatureError, match="table_version"):
        lsm_lab.create_table(tmp_path / "c", name="t", record_key="id", cdc=True, table_version=8)
    assert not (tmp_path / "a" / ".hoodie").exists()
    props = {"hoodie.table.name": "t", "hoodie.table.type": "MERGE_ON_READ", "hoodie.table.version": "10",
             "hoodie.table.recordkey.fields": "id"}
    with pytest.raises(TableConfigError, match="supplemental.logging.mode"):
        cfg.TableConfig.from_props({**props, cfg.KEY_CDC_MODE: "SOMETIMES"})
    with pytest.raises(TableConfigError, match="cdc.enabled"):
        cfg.TableConfig.from_props({**props, cfg.KEY_CDC_ENABLED: "maybe"})
    assert cfg.TableConfig.from_props({**props, cfg.KEY_CDC_MODE: "op_key_only"}).cdc_mode == "OP_KEY_ONLY"
    assert cfg.TableConfig.from_props({**props, cfg.KEY_CDC_MODE: "cdc_data_before"}).cdc_mode == "DATA_BEFORE"


# --------------------------------------------------------------------------- the stream against the model
@pytest.mark.parametrize("table_type", TYPES)
@pytest.mark.parametrize("mode", [*MODES, None])  # None: CDC off, every instant inferred
@pytest.mark.parametrize("layout", ["lsm_tree", "default"])
def test_stream_equals_model(tmp_path: Path, table_type: str, mode: str | None, layout: str) -> None:
    t = lsm_lab.create_table(tmp_path / "t", name="t", record_key="id", partition_by="p", table_type=table_type,
                             layout=layout, num_buckets=2, cdc=mode is not None, cdc_mode=mode or MODES[0])
    begins = apply(t, WORKLOAD)
    result = t.read_cdc(None)
    assert result.schema.names == ["op", "ts_ms", "commit_time", "record_key", "before", "after", "inferred"]
    assert stream_of(result, begins) == model_stream(WORKLOAD)
    inferred = json.loads(result.schema.metadata[cdc_reader.INFERRED_KEY.encode()])
    assert inferred == (begins if mode is None else [])
    assert result.column("inferred").to_pylist() == [mode is None] * result.num_rows
    completion = {i.begin_time: i.completion_time for i in t.completed_writes()}
    assert [completion[c] for c in result.column("commit_time").to_pylist()] == result.column("ts_ms").to_pylist()
    logs = list(local(t.path).rglob("*.cdc.parquet"))
    assert bool(logs) == (mode is not None)
    assert t.read(columns=["id", "p", "v"]).sort_by("id").to_pylist() == [{"id": "k01", "p": "south", "v": 701}]
    # the same stream handed out instant by instant, batch by batch (Table.scan_cdc)
    changes = t.scan_cdc(None, batch_size=2)
    batches = list(changes.to_reader())
    assert batches and max(b.num_rows for b in batches) <= 2
    streamed = pa.Table.from_batches(batches, schema=changes.schema)
    assert stream_of(streamed, begins) == model_stream(WORKLOAD)
    assert streamed.equals(result.replace_schema_metadata(None))
    assert changes.inferred == inferred
    assert pl.DataFrame(t.scan_cdc(None)).height == result.num_rows


def test_event_time_ordering_loser_is_no_change(tmp_path: Path) -> None:
    """An upsert whose ordering value loses the merge changes nothing; neither does its delete."""
    for mode in (MODES[0], None):
        t = lsm_lab.create_table(tmp_path / str(mode), name="t", record_key="id", ordering_field="ts",
                                 cdc=mode is not None)
        t.insert([{"id": "a", "ts": 5, "v": 1}])
        late = t.upsert([{"id": "a", "ts": 3, "v": 2}, {"id": "b", "ts": 1, "v": 3}])
        old = t.delete([{"id": "a", "ts": 1}])
        got = t.read_cdc(None).to_pylist()
        assert [(r["op"], r["record_key"], r["commit_time"]) for r in got] == [
            ("i", "a", got[0]["commit_time"]), ("i", "b", late.begin_time)], mode
        assert old.begin_time not in {r["commit_time"] for r in got}


def test_logs_and_inference_agree(tmp_path: Path) -> None:
    """The same workload on a CDC table (logs) and a plain one (inferred): the same changes."""
    outs = []
    for mode in (*MODES, None):
        t = lsm_lab.create_table(tmp_path / str(mode), name="t", record_key="id", partition_by="p",
                                 cdc=mode is not None, cdc_mode=mode or MODES[0])
        apply(t, WORKLOAD)
        outs.append(t.read_cdc(None).drop_columns(["ts_ms", "commit_time", "inferred"]).to_pylist())
    assert outs[0] and all(o == outs[0] for o in outs)


def test_time_bounds_and_columns(tmp_path: Path) -> None:
    t = lsm_lab.create_table(tmp_path / "t", name="t", record_key="id", partition_by="p", cdc=True)
    apply(t, WORKLOAD[:3])
    w = t.completed_writes()
    mid = t.read_cdc(w[0].completion_time, w[1].completion_time)
    assert set(mid.column("commit_time").to_pylist()) == {w[1].begin_time}
    assert t.read_cdc(w[-1].completion_time).num_rows == 0
    assert t.read_cdc(w[0]).num_rows == t.read_cdc(w[0].completion_time).num_rows  # an Instant is its completion
    narrow = t.read_cdc(None, columns=["v"])
    assert narrow.schema.field("before").type == pa.struct([pa.field("v", pa.int64())])
    assert narrow.column("after").to_pylist()[0] == {"v": 101}
    with pytest.raises(InputError, match="nope"):
        t.read_cdc(None, columns=["nope"])
    with pytest.raises(InputError, match="columns"):
        t.read_cdc(None, columns="v")


def test_cdc_log_file_content(tmp_path: Path) -> None:
    """Names, columns per mode, footer like any native log, rows sorted by key; data readers skip the logs."""
    for mode, names in zip(MODES, (["op", "ts_ms", "before", "after"], ["op", "record_key", "before"],
                                   ["op", "record_key"]), strict=True):
        t = lsm_lab.create_table(tmp_path / mode, name="t", record_key="id", cdc=True, cdc_mode=mode,
                                 num_buckets=1)
        done = t.insert(rows_of([3, 1, 2], 1))
        t.upsert(rows_of([2, 4], 2))
        logs = sorted(local(t.path).rglob("*.cdc.parquet"))
        assert len(logs) == 2
        parsed = naming.parse(logs[0].name)
        assert parsed is not None and parsed.content == "cdc" and parsed.instant == done.begin_time
        pf = pq.ParquetFile(logs[0])
        assert pf.schema_arrow.names == names
        header = v2.read_log_header(logs[0])
        assert header["INSTANT_TIME"] == done.begin_time and header["BLOCK_TYPE"] == v2.BLOCK_CDC
        assert json.loads(header["SCHEMA"])["type"] == "record"
        got_mode, rows, _ = cdclog_format.read_cdc_log(logs[0])
        assert got_mode == mode and rows.column("op").to_pylist() == ["i", "i", "i"]
        if mode != "DATA_BEFORE_AFTER":
            assert rows.column("record_key").to_pylist() == ["k01", "k02", "k03"]
        else:
            assert [a["_hoodie_record_key"] for a in rows.column("after").to_pylist()] == ["k01", "k02", "k03"]
            assert rows.column("ts_ms").to_pylist() == [done.begin_time] * 3
        meta = t.instant_metadata(t.completed_writes()[-1])
        stats = [s for ss in meta["partitionToWriteStats"].values() for s in ss]
        assert all(isinstance(s["cdcStats"], dict) for s in stats)
        assert t.read(columns=["id", "v"]).num_rows == 4  # the CDC logs hold no table rows
        fs = t.latest_slices()[0]
        assert fs.cdc_files and all(f.name.content != "cdc" for f in fs.log_files)


def test_compaction_keeps_cdc_logs_out_and_changes_nothing(tmp_path: Path) -> None:
    t = lsm_lab.create_table(tmp_path / "t", name="t", record_key="id", cdc=True, num_buckets=1)
    t.insert(rows_of([1, 2], 1))
    t.upsert(rows_of([2], 2))
    before = t.read_cdc(None).num_rows
    done = t.compact(strategy="full")
    assert done is not None
    plan = t.compaction_plans()[-1][1]
    assert all(".cdc." not in n for op in plan.operations for n in op.log_files)
    assert t.read_cdc(None).num_rows == before == 3
    assert t.read_cdc(t.completed_writes()[-2].completion_time).num_rows == 0


def test_rollback_leaves_no_change_records(tmp_path: Path) -> None:
    for table_type in TYPES:
        t = lsm_lab.create_table(tmp_path / table_type, name="t", record_key="id", cdc=True, table_type=table_type)
        t.insert(rows_of([1, 2], 1))
        kept = t.read_cdc(None).to_pylist()
        bad = t.upsert(rows_of([1, 3], 2))
        assert any(bad.begin_time in p.name for p in local(t.path).rglob("*.cdc.parquet"))
        t.rollback(bad)
        assert t.read_cdc(None).to_pylist() == kept
        assert not any(bad.begin_time in p.name for p in local(t.path).rglob("*.cdc.parquet"))


def test_clean_removes_old_images_with_a_clear_error(tmp_path: Path) -> None:
    t = lsm_lab.create_table(tmp_path / "t", name="t", record_key="id", table_type="COPY_ON_WRITE", cdc=True,
                             cdc_mode="OP_KEY_ONLY")
    for i in range(5):
        t.upsert(rows_of([1, 2], i))
    t.clean(policy="KEEP_LATEST_COMMITS", retained=2)
    w = t.completed_writes()
    with pytest.raises(InputError, match="cleaner"):
        t.read_cdc(None)
    recent = t.read_cdc(w[-2].completion_time)  # the retained snapshots still give the latest changes
    assert [r["op"] for r in recent.to_pylist()] == ["u", "u"]


def test_damaged_cdc_log_is_a_typed_error(tmp_path: Path) -> None:
    t = lsm_lab.create_table(tmp_path / "t", name="t", record_key="id", cdc=True, num_buckets=1)
    t.insert(rows_of([1, 2], 1))
    log = next(local(t.path).rglob("*.cdc.parquet"))
    good = log.read_bytes()
    for damaged in (good[:20] + b"\xff" * 8 + good[28:], good[: len(good) // 2]):  # a page, then a torn tail
        log.write_bytes(damaged)
        with pytest.raises(CorruptFileError) as err:
            t.read_cdc(None)
        assert log.name in str(err.value)
    # a well-formed Parquet file that is not a CDC log
    pq.write_table(pa.table({"x": [1]}), log)  # no native-log footer
    with pytest.raises(CorruptFileError, match="footer"):
        t.read_cdc(None)
    parsed = naming.parse(log.name)
    assert parsed is not None
    instant = parsed.instant
    for rows, problem in ((pa.table({"x": [1]}), "not a CDC log"),
                          (pa.table({"op": ["x"], "record_key": ["k"]}), "op 'x'"),
                          (pa.table({"op": ["i"], "record_key": pa.array([None], pa.string())}), "record_key"),
                          (pa.table({"op": ["i"], "ts_ms": ["1"], "before": pa.array([{"v": 1}], pa.struct([("v", pa.int64())])),
                                     "after": pa.array([None], pa.struct([("v", pa.int64())]))}), "_hoodie_record_key")):
        log.unlink()
        cdclog_format.write_cdc_log(log, rows, instant_time=instant, upstream=True, table_name="t")
        with pytest.raises(CorruptFileError, match=problem):
            t.read_cdc(None)


def test_missing_cdc_log_falls_back_to_inference(tmp_path: Path) -> None:
    t = lsm_lab.create_table(tmp_path / "t", name="t", record_key="id", cdc=True, num_buckets=1)
    t.insert(rows_of([1, 2], 1))
    t.upsert(rows_of([2], 2))
    expected = t.read_cdc(None).drop_columns(["inferred"]).to_pylist()
    for log in local(t.path).rglob("*.cdc.parquet"):
        log.unlink()
    again = t.read_cdc(None)
    assert again.drop_columns(["inferred"]).to_pylist() == expected
    assert all(again.column("inferred").to_pylist())


def test_cli_read_cdc(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    t = lsm_lab.create_table(tmp_path / "t", name="t", record_key="id", cdc=True)
    apply(t, WORKLOAD[:3])
    assert cli_main(["read", str(t.path), "--cdc", "--start", "0", "--json", "--limit", "0"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert [(r["op"], r["record_key"]) for r in got] == [
        ("i", "k01"), ("i", "k02"), ("i", "k03"), ("i", "k04"), ("u", "k02"), ("i", "k05"), ("d", "k03")]
    first = t.completed_writes()[0].completion_time
    assert first is not None
    assert cli_main(["read", str(t.path), "--cdc", "--start", first, "--columns", "v"]) == 0
    out = capsys.readouterr().out
    assert "before.v" in out and "after.v" in out and "k01" not in out
    out_file = tmp_path / "changes.csv"
    assert cli_main(["read", str(t.path), "--cdc", "--start", "0", "--out", str(out_file)]) == 0
    assert out_file.read_text().splitlines()[0].startswith('"op","ts_ms"')
    assert cli_main(["read", str(t.path), "--cdc"]) == 2
    assert cli_main(["read", str(t.path), "--start", first]) == 2
    assert "error:" in capsys.readouterr().err


def test_cli_creates_a_cdc_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "in.csv"
    src.write_text("id,v\na,1\nb,2\n")
    assert cli_main(["create", str(tmp_path / "t"), "--name", "t", "--key", "id", "--cdc", "OP_KEY_ONLY"]) == 0
    assert cli_main(["create", str(tmp_path / "d"), "--name", "d", "--key", "id", "--cdc"]) == 0
    assert cli_main(["create", str(tmp_path / "x"), "--name", "x", "--key", "id", "--cdc", "BOGUS"]) == 2
    assert "cdc_mode" in capsys.readouterr().err
    assert lsm_lab.open_table(tmp_path / "t").config.cdc_mode == "OP_KEY_ONLY"
    assert lsm_lab.open_table(tmp_path / "d").config.cdc_mode == "DATA_BEFORE_AFTER"
    assert cli_main(["write", str(tmp_path / "t"), str(src)]) == 0
    assert list(tmp_path.glob("t/*.cdc.parquet"))
    capsys.readouterr()
    assert cli_main(["read", str(tmp_path / "t"), "--cdc", "--start", "0"]) == 0
    out = capsys.readouterr().out
    assert "after.v" in out and "NaN" not in out and " 1.0 " not in out  # ints stay ints beside nulls


def test_s3_table(s3_table: Callable[..., lsm_lab.Table]) -> None:
    t = s3_table(partition_by="p", cdc=True, cdc_mode="DATA_BEFORE")
    begins = apply(t, WORKLOAD[:4])
    assert stream_of(t.read_cdc(None), begins) == model_stream(WORKLOAD[:4])
    assert not json.loads(t.read_cdc(None).schema.metadata[cdc_reader.INFERRED_KEY.encode()])


# --------------------------------------------------------------------------- random workloads
STEP: st.SearchStrategy[tuple[str, list[int], int]] = st.one_of(
    st.tuples(st.sampled_from(["insert", "upsert", "bulk_insert", "delete"]),
              st.lists(st.integers(0, 7), min_size=1, max_size=5), st.integers(1, 50)),
    st.tuples(st.just("compact"), st.just([]), st.just(0)),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(STEP, min_size=1, max_size=6), mode=st.sampled_from([*MODES, None]),
       table_type=st.sampled_from(TYPES), layout=st.sampled_from(["lsm_tree", "default"]))
def test_random_workloads_equal_model(tmp_path_factory: pytest.TempPathFactory,
                                      steps: list[tuple[str, list[int], int]], mode: str | None, table_type: str,
                                      layout: str) -> None:
    path = tmp_path_factory.mktemp("cdc")
    t = lsm_lab.create_table(path / "t", name="t", record_key="id", partition_by="p", table_type=table_type,
                             layout=layout, num_buckets=2, cdc=mode is not None, cdc_mode=mode or MODES[0])
    begins = apply(t, steps)
    assert stream_of(t.read_cdc(None), begins) == model_stream(steps)


# --------------------------------------------------------------------------- crashes
_CHILD = textwrap.dedent("""
    import os, sys
    import lsm_lab
    from lsm_lab.format import cdc

    real = cdc.write_cdc_log

    def die_after(*args, **kwargs):
        size = real(*args, **kwargs)
        os.kill(os.getpid(), 9)  # SIGKILL with the CDC log on disk, before the commit
        return size

    cdc.write_cdc_log = die_after
    table = lsm_lab.open_table(sys.argv[1])
    table.upsert([{"id": "k01", "p": "south", "v": -1}, {"id": "k09", "p": "south", "v": -9}])
""")


@pytest.mark.parametrize("table_type", TYPES)
def test_killed_cdc_write_leaves_no_changes(tmp_path: Path, table_type: str) -> None:
    t = lsm_lab.create_table(tmp_path / "t", name="t", record_key="id", partition_by="p", cdc=True,
                             table_type=table_type)
    apply(t, WORKLOAD[:2])
    kept = t.read_cdc(None).to_pylist()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).resolve().parents[1]),
                                                        os.environ.get("PYTHONPATH", "")]), TQDM_DISABLE="1")
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(t.path)], env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == -9, proc.stderr
    dead = [i for i in lsm_lab.open_table(t.path).instants() if not i.is_completed]
    assert dead and any(dead[0].begin_time in p.name for p in local(t.path).rglob("*.cdc.parquet"))
    t = lsm_lab.open_table(t.path)
    assert t.read_cdc(None).to_pylist() == kept  # nothing of the dead write
    t.upsert(rows_of([1], 9))  # the next writer rolls the dead write back
    assert not any(dead[0].begin_time in p.name for p in local(t.path).rglob("*.cdc.parquet"))
    got = t.read_cdc(None).to_pylist()
    assert got[:-1] == kept and (got[-1]["op"], got[-1]["record_key"]) == ("u", "k01")
    assert {n.instant for _, _, n in fsview.list_data_files(t.path)} <= set(t.completion_map())


# --------------------------------------------------------------------------- real Hudi tables (inferred)
REAL = ("qs_mor_avro_v6_trips_8i3d", "qs_mor_avro_v8_trips_8i3u1d", "s_cow_v8_complexkeygen_hivestyle",
        "s_cow_v9_txns_nonpart_nometa", "s_mor_avro_v9_txns_simple_nometa",
        "s_mor_parquet_v6_simplekeygen_hivestyle_no_metafields")


@pytest.fixture(scope="module")
def real_tables(shared_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from lsm_lab.interop.hudi_tables import unpack_tables

    return unpack_tables(shared_dir / "hudi-tables", tmp_path_factory.mktemp("real-cdc"))


def _snapshot(t: lsm_lab.Table, as_of: str | None) -> dict[tuple[str, str], dict[str, Any]]:
    if as_of is None:
        return {}
    rows = t.read(as_of=as_of).drop_columns(["_hoodie_file_name"]).to_pylist()  # a COW rewrite renames every row
    return {(r["_hoodie_partition_path"], r["_hoodie_record_key"]): r for r in rows}


@pytest.mark.parametrize("stem", REAL)
def test_real_tables_stream_replays_their_snapshots(real_tables: dict[str, Path], stem: str) -> None:
    """Versions 6/8/9, COW and MOR, with compaction, clustering and replacecommits: every instant's inferred
    changes take the snapshot before it to the snapshot after it (and clustering/compaction change nothing)."""
    t = lsm_lab.open_table(real_tables[stem])
    stream = t.read_cdc(None, columns=[c for c in t.read().column_names if c != "_hoodie_file_name"])
    assert stream.num_rows > 0
    writes = t.completed_writes()
    assert json.loads(stream.schema.metadata[cdc_reader.INFERRED_KEY.encode()]) == [
        w.begin_time for w in writes if cdc_reader.is_change(t, w)]
    prev: str | None = None
    for w in writes:
        assert_replays(t, stream, w, prev)
        prev = w.completion_time


def assert_replays(t: lsm_lab.Table, stream: pa.Table, w: Any, prev: str | None) -> None:
    """The changes `stream` holds for instant `w` take the snapshot as of `prev` to the snapshot as of `w`."""
    state = _snapshot(t, prev)
    mine = [r for r in stream.to_pylist() if r["commit_time"] == w.begin_time]
    assert not mine or cdc_reader.is_change(t, w)
    for r in mine:
        image = r["after"] if r["op"] != "d" else r["before"]
        ident = (image["_hoodie_partition_path"], r["record_key"])
        if r["op"] == "i":
            assert ident not in state and r["before"] is None
        else:
            assert state[ident] == r["before"]
        if r["op"] == "d":
            del state[ident]
        else:
            state[ident] = r["after"]
    assert state == _snapshot(t, w.completion_time), w


def test_readme_example_runs(tmp_path: Path) -> None:
    import re

    text = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    block = next(b for b in re.findall(r"```python\n(.*?)```", text, flags=re.S) if "read_cdc" in b)
    namespace: dict[str, Any] = {"lsm_lab": lsm_lab}
    exec(compile(block.replace('"/tmp/orders"', repr(str(tmp_path / "orders"))), "README.md", "exec"), namespace)
    got = namespace["t"].read_cdc(namespace["first"].completion_time).to_pylist()
    assert [(r["op"], r["record_key"], r["before"], r["after"]) for r in got] == [
        ("u", "a", {"id": "a", "qty": 1}, {"id": "a", "qty": 5}), ("d", "b", {"id": "b", "qty": 2}, None)]


def test_sigkill_loop_on_a_cdc_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The crash harness (tests/test_crash.py) on a CDC table: SIGKILLs inside writes (CDC logs included),
    compactions, clusterings, cleans; afterwards every data and CDC file belongs to a known instant and the
    last write's change stream, read from its CDC logs, replays the snapshot before it into the one after."""
    from test_crash import load_harness

    load: Callable[[], ModuleType] = load_harness  # test_crash.load_harness has no annotations: typed here
    harness = load()
    original = harness.create

    def create_with_cdc(path: Any, layout: str = "lsm_tree") -> None:
        original(path, layout)
        t = lsm_lab.open_table(path)
        cfg.write_config(t.path, {**t.config.props, cfg.KEY_CDC_ENABLED: "true",
                                  cfg.KEY_CDC_MODE: "DATA_BEFORE"}, create=False)

    monkeypatch.setattr(harness, "create", create_with_cdc)
    stats = harness.run(6, workdir=tmp_path, seed=3, max_delay=1.0, verbose=False)
    assert stats["kills"] == 6 and stats["batches"] > 0
    t = lsm_lab.open_table(tmp_path / "table")
    assert t.config.cdc_enabled
    done = t.completed_writes()  # in reader (completion) order
    columns = [c for c in t.read().column_names if c != "_hoodie_file_name"]
    # the last two writes that may change records: one of any two batches in a row is an upsert, which always
    # changes the state (the harness's marker row); a delete batch may find none of its keys and change nothing
    changed = 0
    for last in [w for w in done if cdc_reader.is_change(t, w)][-2:]:
        i = done.index(last)
        before = done[i - 1].completion_time if i > 0 else None
        stream = t.read_cdc(before, last.completion_time, columns=columns)
        assert not any(stream.column("inferred").to_pylist())
        assert_replays(t, stream, last, before)
        changed += stream.num_rows
    assert changed > 0
    known = set(t.completion_map())
    logged = {n.instant for _, _, n in fsview.list_data_files(t.path) if n.content == "cdc"}
    assert logged <= known and len(logged) >= 2  # the killed writers wrote CDC logs too


def test_cluster_archive_restore_and_new_columns(tmp_path: Path) -> None:
    """Clustering changes nothing; archived instants keep their CDC logs (cdcStats survive archiving);
    a restore drops the restored-away changes; images of older rows have the later columns as null."""
    keep: dict[str, Any] = {"hoodie.keep.min.commits": "2", "hoodie.keep.max.commits": "3"}
    t = lsm_lab.create_table(tmp_path / "t", name="t", record_key="id", num_buckets=2, cdc=True, **keep)
    for i in range(5):
        t.upsert([{"id": f"k{j}", "v": i} for j in range(i, i + 3)])
    point = t.savepoint()
    clustered = t.cluster(options={"hoodie.clustering.plan.strategy.small.file.limit": "1" + "0" * 9})
    assert clustered is not None
    t.upsert([{"id": "k1", "v": 99, "w": "new"}])
    stream = t.read_cdc(None)
    assert clustered.begin_time not in stream.column("commit_time").to_pylist()
    assert stream.to_pylist()[-1]["before"] == {"id": "k1", "v": 1, "w": None}
    assert stream.to_pylist()[-1]["after"] == {"id": "k1", "v": 99, "w": "new"}
    assert t.archive(keep=2)
    again = t.read_cdc(None)
    assert again.equals(stream) and not json.loads(again.schema.metadata[cdc_reader.INFERRED_KEY.encode()])
    t.restore(point)
    kept = t.read_cdc(None)
    assert kept.num_rows == stream.num_rows - 1 and kept.equals(stream.slice(0, kept.num_rows).cast(kept.schema))


@pytest.mark.parametrize("table_type", TYPES)
def test_delete_of_absent_keys_writes_no_change(tmp_path: Path, table_type: str) -> None:
    t = lsm_lab.create_table(tmp_path / "t", name="t", record_key="id", cdc=True, table_type=table_type,
                             num_buckets=1)
    t.insert(rows_of([1], 1))
    logs = set(local(t.path).rglob("*.cdc.parquet"))
    gone = t.delete([{"id": "k07"}, {"id": "k08"}])
    assert set(local(t.path).rglob("*.cdc.parquet")) == logs  # no CDC log for a commit that changed nothing
    stream = t.read_cdc(t.completed_writes()[0].completion_time)
    assert stream.num_rows == 0
    assert gone.begin_time not in json.loads(stream.schema.metadata[cdc_reader.INFERRED_KEY.encode()])


ORDERED_STEP = st.tuples(st.sampled_from(["upsert", "insert", "delete"]),
                         st.lists(st.tuples(st.integers(0, 5), st.integers(0, 4), st.booleans()), min_size=1,
                                  max_size=4))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(ORDERED_STEP, min_size=1, max_size=5), mode=st.sampled_from(MODES),
       table_type=st.sampled_from(TYPES))
def test_event_time_ordering_logs_equal_inference_and_replay(tmp_path_factory: pytest.TempPathFactory,
                                                             steps: list[tuple[str, list[tuple[int, int, bool]]]],
                                                             mode: str, table_type: str) -> None:
    """Random ordering values (late events lose, deletes with or without an ordering value): the CDC logs
    give exactly what inference gives, and every instant's changes replay one snapshot into the next."""
    path = tmp_path_factory.mktemp("cdc-ordered")
    tables = [lsm_lab.create_table(path / name, name="t", record_key="id", partition_by="p", ordering_field="ts",
                                   table_type=table_type, num_buckets=2, cdc=on, cdc_mode=mode)
              for name, on in (("logs", True), ("plain", False))]
    for op, items in steps:
        rows = []
        for key, ts, has_ts in {k: (k, t, h) for k, t, h in items}.values():
            row: dict[str, Any] = {"id": f"k{key}", "p": part(key)}
            if op != "delete" or has_ts:
                row["ts"] = ts
            if op != "delete":
                row["v"] = key * 10 + ts
            rows.append(row)
        for t in tables:
            getattr(t, op)(rows)
    logged, plain = tables
    cols = [c for c in logged.read().column_names if c != "_hoodie_file_name"]
    a, b = logged.read_cdc(None, columns=cols), plain.read_cdc(None, columns=cols)
    assert not any(a.column("inferred").to_pylist()) and all(b.column("inferred").to_pylist())
    strip = ["ts_ms", "commit_time", "inferred"]
    no_meta = [c for c in cols if not c.startswith("_hoodie")]
    assert a.drop_columns(strip).cast(b.drop_columns(strip).schema).select(["op", "record_key"]).to_pylist() == \
        b.drop_columns(strip).select(["op", "record_key"]).to_pylist()
    assert [(r["before"] and {k: r["before"][k] for k in no_meta}, r["after"] and {k: r["after"][k] for k in no_meta})
            for r in a.to_pylist()] == \
        [(r["before"] and {k: r["before"][k] for k in no_meta}, r["after"] and {k: r["after"][k] for k in no_meta})
         for r in b.to_pylist()]
    prev = None
    for w in logged.completed_writes():
        assert_replays(logged, a, w, prev)
        prev = w.completion_time


def test_cdc_stats_outside_the_table_are_refused(tmp_path: Path) -> None:
    """A hostile commit file whose cdcStats name a path outside the table: CorruptTableError naming the field."""
    from lsm_lab.errors import CorruptTableError

    t = lsm_lab.create_table(tmp_path / "t", name="t", record_key="id", cdc=True, num_buckets=1)
    done = t.insert(rows_of([1], 1))
    commit = next((local(t.path) / ".hoodie" / "timeline").glob(f"{done.begin_time}_*.deltacommit"))
    meta = read_instant(commit)
    for stats in meta["partitionToWriteStats"].values():
        stats[0]["cdcStats"] = {"../../outside.cdc.parquet": 1}
    write_instant_json(commit, meta)
    with pytest.raises(CorruptTableError, match="cdcStats"):
        lsm_lab.open_table(t.path).read_cdc(None)


def test_empty_table_and_empty_writes(tmp_path: Path) -> None:
    t = lsm_lab.create_table(tmp_path / "t", name="t", record_key="id", cdc=True)
    assert t.read_cdc(None).num_rows == 0
    t.delete(["nobody"])
    t.insert([])
    stream = t.read_cdc(None)
    assert stream.num_rows == 0 and json.loads(stream.schema.metadata[cdc_reader.INFERRED_KEY.encode()]) == []
