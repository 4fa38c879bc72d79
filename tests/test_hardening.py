"""Hardening, one test per finding of the attack review: no path out of the table, no silent wrong answer, no traceback for a mistake.

(The randomised versions are in tests/fuzz/, under the `slow` marker.)
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from instantfiles import read_instant, write_instant_json
from localpath import local

import lsm_lab
from lsm_lab.cli.app import main as cli_main
from lsm_lab.errors import (
    CorruptFileError,
    CorruptTableError,
    InputError,
    LsmLabError,
    PartitionValueError,
    SchemaError,
)
from lsm_lab.filegroup import fsview
from lsm_lab.storage import paths


def _table(tmp_path: Path, **kw: Any) -> lsm_lab.Table:
    kw.setdefault("record_key", "id")
    t = lsm_lab.create_table(tmp_path / "t", name="t", **kw)
    t.upsert([{"id": f"k{i}", "v": i} for i in range(6)])
    return t


def _timeline(t: lsm_lab.Table) -> Path:
    return local(t.active_timeline.folder)


def _completed(t: lsm_lab.Table) -> Path:
    return _timeline(t) / t.instants()[-1].file_name


# --------------------------------------------------------------------------- the path guard
@pytest.mark.parametrize("value", ["../x", "a/../../b", "/etc/passwd", "a\\b", "", ".", "a//b", "a/./b", "x\x00"])
def test_relative_paths_that_leave_are_refused(value: str) -> None:
    with pytest.raises(CorruptTableError, match="plan.json") as err:
        paths.relative(value, file="plan.json", field="partitionPath")
    assert err.value.field == "partitionPath"


def test_guard_accepts_what_tables_hold(tmp_path: Path) -> None:
    assert paths.data_file("city=a/f_0-1-0_20261122001500123.parquet") == ("city=a", "f_0-1-0_20261122001500123.parquet")
    assert paths.data_file(".f_20261122001500123.log.1_0-1-0") == ("", ".f_20261122001500123.log.1_0-1-0")
    assert paths.instant_time("20261122001500123") == "20261122001500123"
    with pytest.raises(CorruptTableError):
        paths.instant_time("../../..")
    with pytest.raises(CorruptTableError, match="outside the table"):
        paths.inside(tmp_path / "t", "../x")
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "link").symlink_to(tmp_path)
    with pytest.raises(CorruptTableError, match="outside the table"):
        paths.inside(tmp_path / "t", "link/x")


def test_restore_plan_climbing_out_is_refused_and_nothing_outside_is_removed(tmp_path: Path) -> None:
    t = _table(tmp_path)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("x")
    plan = {"instantsToRollback": [{"commitTime": "../../../victim", "action": "deltacommit"}], "version": 1}
    (_timeline(t) / "20991231235959000.restore.requested").write_text(json.dumps(plan))
    with pytest.raises(CorruptTableError, match=r"instantsToRollback\[0\]\.commitTime"):
        t.upsert([{"id": "z", "v": 0}])
    assert (victim / "keep.txt").read_text() == "x"


def test_timeline_path_outside_the_table_is_refused(tmp_path: Path) -> None:
    t = _table(tmp_path)
    props = t.path / ".hoodie" / "hoodie.properties"
    props.write_text(props.read_text().replace("hoodie.timeline.path=timeline", "hoodie.timeline.path=../../x"))
    with pytest.raises(CorruptTableError, match="hoodie.timeline.path"):
        lsm_lab.open_table(t.path)


def test_a_missing_timeline_folder_is_not_an_empty_table(tmp_path: Path) -> None:
    t = _table(tmp_path)
    props = t.path / ".hoodie" / "hoodie.properties"
    props.write_text(props.read_text().replace("hoodie.timeline.path=timeline", "hoodie.timeline.path=elsewhere"))
    with pytest.raises(CorruptTableError, match="timeline folder"):
        lsm_lab.open_table(t.path).read()


# --------------------------------------------------------------------------- silent wrong answers
def test_a_missing_delete_log_is_an_error_naming_instant_and_file(tmp_path: Path) -> None:
    t = _table(tmp_path)
    done = t.delete(["k1"])
    (log,) = [p for _, p, n in fsview.list_data_files(t.path) if n.is_delete]
    log.unlink()
    with pytest.raises(CorruptTableError, match=done.begin_time) as err:
        t.read()
    assert log.name in str(err.value)


def test_completion_before_begin_is_refused(tmp_path: Path) -> None:
    t = _table(tmp_path)
    f = _completed(t)
    begin, rest = f.name.split("_", 1)
    f.rename(f.with_name(f"{begin}_{'19990101000000000'}.{rest.split('.', 1)[1]}"))
    with pytest.raises(CorruptTableError, match="before begin time"):
        t.read()


def test_stored_schema_missing_a_column_is_an_error(tmp_path: Path) -> None:
    t = _table(tmp_path)
    f = _completed(t)
    meta = read_instant(f)
    from lsm_lab.filegroup.write import schema_to_text

    meta["extraMetadata"]["lsm_lab.arrow_schema"] = schema_to_text(pa.schema([("id", pa.string())]))
    write_instant_json(f, meta)
    with pytest.raises(CorruptTableError, match="'v'"):
        t.read()


@pytest.mark.usefixtures("hand_edited")
def test_a_log_whose_footer_retypes_a_column_is_a_schema_error_naming_the_file(tmp_path: Path) -> None:
    """A damaged footer (or a foreign writer) that turns an int column into text: typed error, not ArrowInvalid."""
    import pyarrow.parquet as pq

    t = _table(tmp_path, table_type="MERGE_ON_READ")
    t.upsert([{"id": "k1", "v": 100}])
    (log,) = [p for _, p, n in fsview.list_data_files(t.path) if n.is_log and not n.is_delete]
    data = pq.read_table(log)
    i = data.schema.get_field_index("v")
    retyped = data.set_column(i, pa.field("v", pa.string()), pa.array(["\x9c\x01"] * data.num_rows))
    pq.write_table(retyped.replace_schema_metadata(data.schema.metadata), log, write_page_checksum=True)
    with pytest.raises(SchemaError, match="'v'") as err:
        t.read()
    assert log.name in str(err.value)


def _v8_with_corrupt_block(tmp_path: Path) -> tuple[lsm_lab.Table, dict[str, int]]:
    t = lsm_lab.create_table(tmp_path / "t8", name="t8", record_key="id", table_version=8, layout="default",
                             num_buckets=1)
    t.insert([{"id": f"k{i}", "v": i} for i in range(4)])
    t.upsert([{"id": "k1", "v": 100}])
    (log,) = [p for _, p, n in fsview.list_data_files(t.path) if n.log_format == 1]
    log.write_bytes(log.read_bytes() + b"#HUDI#\x00\x00\x00\x00\x00\x00\x01\x00garbage")  # a torn append
    return t, {"k0": 0, "k1": 100, "k2": 2, "k3": 3}


@pytest.mark.usefixtures("hand_edited")
def test_corrupt_v1_blocks_skipped_by_default_refused_when_strict(tmp_path: Path) -> None:
    t, want = _v8_with_corrupt_block(tmp_path)
    rows = t.read()
    assert dict(zip(rows.column("id").to_pylist(), rows.column("v").to_pylist())) == want  # as Hudi: skipped
    with pytest.raises(CorruptFileError, match="corrupt block"):
        t.read(strict=True)
    with pytest.raises(CorruptFileError, match="corrupt block"):
        lsm_lab.open_table(t.path, strict=True).read()


@pytest.mark.usefixtures("hand_edited")
def test_cli_read_strict_refuses_a_corrupt_v1_block_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    t, want = _v8_with_corrupt_block(tmp_path)
    assert cli_main(["read", str(t.path), "--json", "--limit", "0"]) == 0
    printed = capsys.readouterr().out
    assert all(f'"{k}"' in printed for k in want)
    assert cli_main(["read", str(t.path), "--strict"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "corrupt block" in err and err.count("\n") == 1


@pytest.mark.parametrize("content", [
    b'{"x": ' + b"9" * 5000 + b"}",
    b"[" * 100_000 + b"]" * 100_000,
    b'{"extraMetadata": [1, 2], "partitionToWriteStats": {}}',
    b'{"partitionToWriteStats": [1]}',
    b'{"partitionToWriteStats": {"": [{"path": 7}]}}',
])
def test_damaged_instant_files_are_typed_errors(tmp_path: Path, content: bytes) -> None:
    t = _table(tmp_path)
    _completed(t).write_bytes(content)
    with pytest.raises(CorruptFileError):
        t.read()


@pytest.mark.parametrize("text", ["!!notbase64", "AAAA", 12])
def test_corrupt_arrow_schema_is_a_typed_error(tmp_path: Path, text: Any) -> None:
    t = _table(tmp_path)
    f = _completed(t)
    meta = read_instant(f)
    meta["extraMetadata"]["lsm_lab.arrow_schema"] = text
    write_instant_json(f, meta)
    with pytest.raises(CorruptFileError):
        t.read()


# --------------------------------------------------------------------------- user mistakes
@pytest.mark.parametrize(("kw", "param"), [
    ({"record_key": 123}, "record_key"),
    ({"num_buckets": "abc"}, "num_buckets"),
    ({"num_buckets": 2.7}, "num_buckets"),
    ({"table_type": None}, "table_type"),
    ({"hive_style": "yes"}, "hive_style"),
    ({"hoodie.table.recordkey.fields": "other"}, "record_key"),
    ({"hoodie.table.type": "COPY_ON_WRITE"}, "table_type"),
    ({"properties": {"hoodie.table.name": "x"}}, "name"),
])
def test_create_table_arguments_checked_before_anything_is_written(tmp_path: Path, kw: dict[str, Any],
                                                                   param: str) -> None:
    args: dict[str, Any] = {"name": "t", "record_key": "id", **kw}
    with pytest.raises(InputError, match=param):
        lsm_lab.create_table(tmp_path / "t", **args)
    assert not (tmp_path / "t").exists()


def test_more_mistakes_are_typed(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(InputError, match="is a file"):
        lsm_lab.create_table(tmp_path / "file", name="t", record_key="id")
    with pytest.raises(InputError, match="path"):
        lsm_lab.open_table(None)  # type: ignore[arg-type]
    t = _table(tmp_path)
    for call, param in ((lambda: t.archive(keep="x"), "keep"),  # type: ignore[arg-type]  # wrong types on purpose
                        (lambda: t.clean(retained="3"), "retained"),  # type: ignore[arg-type]
                        (lambda: t.read(columns="id"), "columns"),
                        (lambda: t.compact(options={"hoodie.no.such": "1"}), "unknown compaction option")):
        with pytest.raises(InputError, match=param):
            call()
    with pytest.raises(SchemaError, match="empty"):
        t.upsert([{"id": "", "v": 1}])


def test_long_partition_values_are_refused(tmp_path: Path) -> None:
    t = lsm_lab.create_table(tmp_path / "t", name="t", record_key="id", partition_by="p")
    with pytest.raises(PartitionValueError, match="255"):
        t.upsert([{"id": "a", "p": "x" * 300}])


def test_delete_of_absent_keys_reports_zero(tmp_path: Path) -> None:
    t = _table(tmp_path)
    t.delete(["nope"])
    assert int(t.timeline()["records_deleted"].iloc[-1]) == 0
    t.delete(["k1", "nope"])
    assert int(t.timeline()["records_deleted"].iloc[-1]) == 1
    assert "k1" not in t.read().column("id").to_pylist()


def test_a_failed_first_write_does_not_block_creating_again(tmp_path: Path) -> None:
    t = lsm_lab.create_table(tmp_path / "t", name="t", record_key="key")
    with pytest.raises(SchemaError):
        t.upsert([{"id": "a"}])
    t = lsm_lab.create_table(tmp_path / "t", name="t", record_key="id")
    t.upsert([{"id": "a"}])
    assert t.read().num_rows == 1
    with pytest.raises(LsmLabError, match="already exists"):  # a table with data stays protected
        lsm_lab.create_table(tmp_path / "t", name="t", record_key="id")


# --------------------------------------------------------------------------- CLI
def test_cli_os_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    t = _table(tmp_path)
    assert cli_main(["read", str(t.path), "--out", str(tmp_path / "missing_dir" / "x.parquet")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1


def test_cli_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    t = lsm_lab.create_table(tmp_path / "t", name="t", record_key="id")
    t.upsert([{"id": f"k{i:05d}", "v": i} for i in range(20_000)])
    cmd = f"{sys.executable} -m lsm_lab.cli.app read {t.path} --limit 0 | head -1"
    proc = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=120)
    assert proc.stdout.strip()  # head got its line
    assert proc.stderr == "", proc.stderr  # quiet: no traceback, no "error:", no "Exception ignored"


def test_a_first_write_failing_half_way_does_not_block_creating_again(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from lsm_lab.filegroup import write as writer

    t = lsm_lab.create_table(tmp_path / "t", name="t", record_key="id")

    def boom(**kw: Any) -> Any:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(writer, "write_file_group", boom)
    with pytest.raises(OSError):
        t.upsert([{"id": "a"}])
    monkeypatch.undo()
    t = lsm_lab.create_table(tmp_path / "t", name="t", record_key="id", ordering_field="ts")
    t.upsert([{"id": "a", "ts": 1}])
    assert t.config.ordering_field == "ts" and t.read().num_rows == 1


def test_reading_columns_of_a_table_no_write_completed_on_is_empty_not_a_key_error(tmp_path: Path) -> None:
    """A crash before the first commit leaves a table without a schema: asked-for columns come back empty."""
    t = lsm_lab.create_table(tmp_path / "t", name="t", record_key="id", partition_by="p", ordering_field="ts")
    got = t.read(columns=["id", "p"])
    assert got.num_rows == 0 and got.column_names == ["id", "p"]
    t.insert([{"id": "a", "p": "x", "ts": 1}])
    with pytest.raises(InputError, match="unknown column 'nope'"):   # no row matches, the column is still checked
        t.read(columns=["nope"], filter=[("id", "=", "zz")])
