"""Merging sorted Parquet runs into one file, and the ``merge`` subcommand."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lsm_lab.cli.app import main as command_main
from lsm_lab.errors import InputError
from lsm_lab.merge import ENGINES, MergeMode, MergeSpec, model_merge
from lsm_lab.merge.files import merge_parquet_files

SCHEMA = pa.schema([("id", pa.string()), ("ts", pa.int64()), ("fare", pa.float64()), ("del", pa.bool_())])


def write_runs(tmp_path: Path, k: int = 4, n: int = 500, seed: int = 1, with_deletes: bool = True) -> list[Path]:
    rnd = random.Random(seed)
    universe = [f"trip-{i:06d}" for i in range(n * 2)]
    paths = []
    for r in range(k):
        rows = []
        for key in sorted(rnd.sample(universe, n)):
            d = with_deletes and rnd.random() < 0.1
            rows.append({"id": key, "ts": rnd.randint(0, 5), "fare": None if d else rnd.random(), "del": d})
        path = tmp_path / f"run{r}.parquet"
        pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), path, row_group_size=97)
        paths.append(path)
    return paths


def expected(paths: list[Path], ordering: str | None, delete: bool) -> dict[str, dict[str, Any]]:
    mode = MergeMode.EVENT_TIME_ORDERING if ordering else MergeMode.COMMIT_TIME_ORDERING
    sources = []
    for p in paths:
        rows = pq.read_table(p).to_pylist()
        if not delete:
            for row in rows:
                row["__d"] = False
        sources.append(rows)
    spec = MergeSpec(mode, key="id", ordering=ordering, delete="del" if delete else "__d")
    out = model_merge(sources, spec)
    for row in out.values():
        row.pop("__d", None)
    return out


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("ordering, delete", [("ts", "del"), (None, None)])
def test_merge_files_equals_the_model(tmp_path: Path, engine: str, ordering: str | None,
                                      delete: str | None) -> None:
    paths = write_runs(tmp_path)
    out = tmp_path / "out.parquet"
    stats = merge_parquet_files(out, paths, key="id", ordering=ordering, engine=engine, delete_column=delete,
                                row_group_size=300, batch_size=64)
    table = pq.read_table(out)
    rows = table.to_pylist()
    assert {r["id"]: r for r in rows} == expected(paths, ordering, delete is not None)
    assert stats["rows_out"] == len(rows) and stats["rows_in"] == 2000
    assert ("del" in table.schema.names) == (delete is None)
    meta = pq.ParquetFile(out).metadata
    assert all(meta.row_group(i).num_rows == 300 for i in range(meta.num_row_groups - 1))
    if engine != "hash":
        ids = table.column("id").to_pylist()
        assert ids == sorted(ids)


def test_unsorted_input_names_the_file(tmp_path: Path) -> None:
    paths = write_runs(tmp_path, k=2, with_deletes=False)
    bad = tmp_path / "bad.parquet"
    t = pq.read_table(paths[1])
    pq.write_table(t.take(pa.array(list(range(t.num_rows - 1, -1, -1)))), bad)
    out = tmp_path / "out.parquet"
    with pytest.raises(InputError, match="bad.parquet.*not strictly sorted"):
        merge_parquet_files(out, [paths[0], bad], key="id")
    assert not out.exists() and not list(tmp_path.glob(".out.parquet*"))


def test_an_error_late_in_the_merge_names_the_file(tmp_path: Path) -> None:
    """The input goes out of order near its end, after many merged batches and row groups were
    written (batch_size 16): the error still names the file and nothing is published."""
    paths = write_runs(tmp_path, k=2, with_deletes=False)
    t = pq.read_table(paths[1])
    n = t.num_rows
    bad = tmp_path / "late.parquet"
    pq.write_table(t.take(pa.array([*range(n - 2), n - 1, n - 2])), bad)  # the last two rows swapped
    out = tmp_path / "out.parquet"
    with pytest.raises(InputError, match="late.parquet.*not strictly sorted"):
        merge_parquet_files(out, [paths[0], bad], key="id", batch_size=16, row_group_size=32)
    assert not out.exists() and not list(tmp_path.glob(".out.parquet*"))


def test_a_writer_error_reaches_the_caller(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The writer fails while the merge's threads are busy reading and resolving: the caller gets the
    writer's error and no file."""
    from lsm_lab.format import parquet_write

    calls = []
    real_write = parquet_write.ParquetFileWriter.write

    def failing(self: parquet_write.ParquetFileWriter, data: pa.RecordBatch) -> None:
        calls.append(1)
        if len(calls) == 3:
            raise OSError("disk full (simulated)")
        real_write(self, data)

    monkeypatch.setattr(parquet_write.ParquetFileWriter, "write", failing)
    paths = write_runs(tmp_path, k=4)
    out = tmp_path / "out.parquet"
    with pytest.raises(OSError, match="disk full"):
        merge_parquet_files(out, paths, key="id", ordering="ts", delete_column="del", batch_size=8)
    assert len(calls) == 3 and not out.exists() and not list(tmp_path.glob(".out.parquet*"))


def test_missing_key_column_names_the_file(tmp_path: Path) -> None:
    paths = write_runs(tmp_path, k=2)
    with pytest.raises(InputError, match="run1.parquet: missing key column 'trip'"):
        merge_parquet_files(tmp_path / "o.parquet", paths[1:], key="trip")


def test_mismatched_schemas_name_the_file(tmp_path: Path) -> None:
    paths = write_runs(tmp_path, k=2)
    other = tmp_path / "other.parquet"
    pq.write_table(pq.read_table(paths[1]).drop_columns(["fare"]), other)
    with pytest.raises(InputError, match="other.parquet: schema differs"):
        merge_parquet_files(tmp_path / "o.parquet", [paths[0], other], key="id")


def test_missing_file_and_bad_engine(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="nope.parquet: input file does not exist"):
        merge_parquet_files(tmp_path / "o.parquet", [tmp_path / "nope.parquet"], key="id")
    with pytest.raises(InputError, match="unknown merge engine"):
        merge_parquet_files(tmp_path / "o.parquet", [tmp_path / "nope.parquet"], key="id", engine="x")


def test_output_may_not_be_an_input(tmp_path: Path) -> None:
    paths = write_runs(tmp_path, k=2)
    with pytest.raises(InputError, match="also an input"):
        merge_parquet_files(paths[0], paths, key="id")


def test_command_merges_and_reports_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = write_runs(tmp_path, k=3)
    out = tmp_path / "cli.parquet"
    code = command_main(["merge", str(out), *map(str, paths), "--key", "id", "--ordering", "ts",
                         "--delete-column", "del", "-q"])
    assert code == 0 and "rows out" in capsys.readouterr().out
    assert {r["id"]: r for r in pq.read_table(out).to_pylist()} == expected(paths, "ts", True)
    code = command_main(["merge", str(out), str(tmp_path / "missing.parquet"), "--key", "id", "-q"])
    assert code == 2 and "does not exist" in capsys.readouterr().err


def test_memory_release_while_merging_keeps_the_result(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`release_mib`: the pool gives freed pages back when the RSS grew that much; the output is the same."""
    from lsm_lab.merge import files

    paths = write_runs(tmp_path, n=2000)
    plain = merge_parquet_files(tmp_path / "a.parquet", paths, key="id", ordering="ts", delete_column="del",
                                batch_size=64)
    assert plain["memory_releases"] == 0  # off by default
    grown = iter(range(0, 1 << 40, 2 << 20))  # a process whose RSS grows 2 MiB between two reads
    monkeypatch.setattr(files._Releaser, "_rss", lambda self: next(grown) if self.fd is not None else 0)
    released = merge_parquet_files(tmp_path / "b.parquet", paths, key="id", ordering="ts", delete_column="del",
                                   batch_size=64, release_mib=1)
    assert released["memory_releases"] > 0 or files._Releaser(1 << 20).fd is None  # (no /proc: nothing done)
    assert pq.read_table(tmp_path / "b.parquet").equals(pq.read_table(tmp_path / "a.parquet"))
    monkeypatch.setenv("LSM_LAB_MERGE_RELEASE_MIB", "lots")
    with pytest.raises(InputError, match="LSM_LAB_MERGE_RELEASE_MIB"):
        merge_parquet_files(tmp_path / "c.parquet", paths, key="id", ordering="ts", delete_column="del")


@pytest.mark.parametrize("read_ahead", [True, False])
def test_every_input_batch_is_decoded_on_the_reader_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           read_ahead: bool) -> None:
    """With read-ahead no batch of a file is decoded on the caller's thread, not even the first (the merge
    learns the schema from the footer): each thread's allocator arena keeps what it decoded (issue 33,
    docs/PERFORMANCE.md "Stop 41"). Without read-ahead everything is read on the caller's thread."""
    import threading

    from lsm_lab.merge import files

    threads: list[str] = []
    real = files._batches

    def spy(*args: Any, **kwargs: Any) -> Any:
        for batch in real(*args, **kwargs):
            threads.append(threading.current_thread().name)
            yield batch

    monkeypatch.setattr(files, "_batches", spy)
    paths = write_runs(tmp_path, k=3)
    out = tmp_path / "out.parquet"
    merge_parquet_files(out, paths, key="id", ordering="ts", delete_column="del", batch_size=64,
                        read_ahead=read_ahead)
    main = threading.main_thread().name
    assert len(threads) == sum(1 for p in paths for _ in pq.ParquetFile(p).iter_batches(batch_size=64))
    if read_ahead:
        assert main not in threads and all(t.startswith("lsm-merge-read") for t in threads)
    else:
        assert set(threads) == {main}
    assert {r["id"]: r for r in pq.read_table(out).to_pylist()} == expected(paths, "ts", True)
