"""The main job (`lsm-lab demo`) and the trips generator it runs on."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from lsm_lab import InputError, open_table
from lsm_lab.lab.datagen import CITIES, SCHEMA, TripsGenerator, trips
from lsm_lab.lab.demo import run_demo


def test_run_demo_small(tmp_path: Path) -> None:
    lines: list[str] = []
    table = run_demo(tmp_path, rows=300, rounds=2, echo=lines.append)
    text = "\n".join(lines)
    assert "check: snapshot and time-travel reads equal the dict model" in text
    assert "Timeline:" in text and "L1: base" in text and "L0 (" in text
    assert table.path == tmp_path / "trips"
    reopened = open_table(tmp_path / "trips")
    assert reopened.config.is_lsm and reopened.config.is_mor and reopened.config.partition_by == ("city",)
    tl = reopened.timeline()
    assert list(tl["operation"]) == ["INSERT", "UPSERT", "UPSERT", "DELETE"]
    assert set(reopened.partitions()) == {f"city={c}" for c in CITIES}


def test_run_demo_with_cdc(tmp_path: Path) -> None:
    """`cdc_mode=`: the same job on a CDC-enabled table, whose stream is read from CDC logs, one record per
    distinct key of each batch (the demo's batches, replayed from its seed)."""
    table = run_demo(tmp_path, rows=300, rounds=2, seed=11, echo=lambda _: None, cdc_mode="DATA_BEFORE")
    props = (tmp_path / "trips" / ".hoodie" / "hoodie.properties").read_text()
    assert "hoodie.table.cdc.enabled=true" in props and "hoodie.table.cdc.supplemental.logging.mode=DATA_BEFORE\n" in props
    stream = table.read_cdc(None)
    assert not any(stream.column("inferred").to_pylist())
    gen = TripsGenerator(11)
    batches = [gen.inserts(300), gen.updates(60), gen.updates(60), gen.deletes(6)]
    per_commit = [len(pc.unique(b.column("uuid"))) for b in batches]
    commits = stream.column("commit_time").to_pylist()
    assert [commits.count(i.begin_time) for i in table.completed_writes()] == per_commit
    assert run_demo(tmp_path / "plain", rows=50, rounds=0, echo=lambda _: None).config.cdc_enabled is False


def test_run_demo_on_a_local_s3_server() -> None:
    """`lsm-lab demo --storage s3`: moto started, the job run in a bucket with request counts, moto stopped."""
    lines: list[str] = []
    table = run_demo(rows=300, rounds=1, echo=lines.append, storage="s3")
    text = "\n".join(lines)
    assert "local S3 server (moto) at http://127.0.0.1:" in text
    assert "equal the dict model" in text
    assert str(table.path).startswith("s3://demo-")
    snapshot_line = next(line for line in text.splitlines() if line.startswith("Snapshot read"))
    assert "[LIST " in snapshot_line and " GET " in snapshot_line
    with pytest.raises(InputError, match="storage"):
        run_demo(rows=10, storage="ftp")


def test_demo_command(tmp_path: Path) -> None:
    script = Path(sys.executable).with_name("lsm-lab")
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "lsm_lab.cli.app"]
    env = {k: v for k, v in os.environ.items() if k != "LSM_LAB_DEBUG"}
    done = subprocess.run([*cmd, "demo", "--rows", "2000", "--dir", str(tmp_path)], capture_output=True,
                          text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "equal the dict model ✓" in done.stdout
    assert "Traceback" not in done.stderr
    assert open_table(tmp_path / "trips").read(columns=["uuid"]).num_rows > 1900


@pytest.mark.parametrize(("rows", "rounds"), [(1, 0), (1, 2)])
def test_tiny_demos(tmp_path: Path, rows: int, rounds: int) -> None:
    table = run_demo(tmp_path, rows=rows, rounds=rounds, echo=lambda _: None)
    assert len(table.completed_writes()) == rounds + 2


@pytest.mark.parametrize(("rows", "rounds"), [(0, 1), (-3, 1), (10, -1)])
def test_demo_rejects_bad_sizes(tmp_path: Path, rows: int, rounds: int) -> None:
    with pytest.raises(InputError, match="at least 1 row"):
        run_demo(tmp_path, rows=rows, rounds=rounds, echo=lambda _: None)
    assert not (tmp_path / "trips").exists()


def test_demo_refuses_an_existing_table(tmp_path: Path) -> None:
    run_demo(tmp_path, rows=50, rounds=1, echo=lambda _: None)
    with pytest.raises(Exception, match="already exists"):
        run_demo(tmp_path, rows=50, rounds=1, echo=lambda _: None)


# --------------------------------------------------------------------------- the generator
def test_generator_is_deterministic() -> None:
    def batches(seed: int) -> list[pa.Table]:
        gen = TripsGenerator(seed)
        return [gen.inserts(200), gen.updates(50), gen.deletes(20), gen.inserts(10)]

    assert all(a.equals(b) for a, b in zip(batches(3), batches(3)))
    assert not batches(3)[0].equals(batches(4)[0])
    assert trips(100, seed=9).equals(TripsGenerator(9).inserts(100))


def test_generator_batches() -> None:
    gen = TripsGenerator(1)
    ins = gen.inserts(500)
    assert ins.schema == SCHEMA and ins.num_rows == 500
    assert len(set(ins.column("uuid").to_pylist())) == 500
    assert set(ins.column("city").to_pylist()) == set(CITIES)
    assert pc.min(ins.column("fare")).as_py() >= 5.0 and pc.max(ins.column("fare")).as_py() <= 120.0
    known = dict(zip(ins.column("uuid").to_pylist(), ins.column("city").to_pylist()))
    upd = gen.updates(100)
    keys = upd.column("uuid").to_pylist()
    assert all(k in known and known[k] == c for k, c in zip(keys, upd.column("city").to_pylist()))
    assert len(set(keys)) < 100  # some keys repeat inside the batch
    assert pc.min(upd.column("ts")).as_py() > pc.max(ins.column("ts")).as_py()  # later events
    dels = gen.deletes(30)
    assert dels.column_names == ["uuid", "city", "ts"]
    dkeys = dels.column("uuid").to_pylist()
    assert len(set(dkeys)) == len(dkeys) and all(known[k] == c for k, c in zip(dkeys, dels.column("city").to_pylist()))


def test_generator_late_events_and_errors() -> None:
    gen = TripsGenerator(2, late_fraction=0.5)
    first = gen.inserts(100)
    late = gen.updates(200)
    assert pc.sum(pc.less(late.column("ts"), pc.min(first.column("ts")))).as_py() > 50
    with pytest.raises(ValueError, match="no trips inserted yet"):
        TripsGenerator(0).updates(5)
    assert TripsGenerator(0).inserts(0).num_rows == 0


def test_demo_without_dir_leaves_nothing_behind(tmp_path: Path) -> None:
    # `make demo`: no --dir, so the table goes to a temporary folder that is removed at the end
    script = Path(sys.executable).with_name("lsm-lab")
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "lsm_lab.cli.app"]
    env = {**{k: v for k, v in os.environ.items() if k != "LSM_LAB_DEBUG"}, "TMPDIR": str(tmp_path)}
    done = subprocess.run([*cmd, "demo", "--rows", "500", "--rounds", "1"], capture_output=True, text=True,
                          timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "equal the dict model ✓" in done.stdout and "removed " in done.stdout
    assert list(tmp_path.iterdir()) == []
    kept = subprocess.run([*cmd, "demo", "--rows", "500", "--rounds", "1", "--keep"], capture_output=True,
                          text=True, timeout=300, env=env)
    assert kept.returncode == 0, kept.stderr[-3000:]
    [folder] = list(tmp_path.iterdir())
    assert f"kept {folder}" in kept.stdout and open_table(folder / "trips").read().num_rows > 0


def test_the_s3_demo_names_no_local_folder(capsys: pytest.CaptureFixture[str]) -> None:
    """`make demo-s3` ends without "removed /tmp/…": its table was in the server's memory (issue 34, item 10)."""
    from lsm_lab.cli.app import main

    assert main(["demo", "--storage", "s3", "--rows", "300", "--rounds", "1"]) == 0
    out = capsys.readouterr().out
    assert "removed" not in out and "--keep" not in out
    assert main(["demo", "--storage", "s3", "--keep"]) == 2
    assert "the S3 demo's bucket is gone" in capsys.readouterr().err


@pytest.mark.parametrize("fraction", [0.0, 0.05, 0.25])
def test_an_update_batch_repeats_exactly_the_keys_asked_for(fraction: float) -> None:
    """`repeat_fraction` is the share of repeated keys, no more (issue 34, item 6: 13.4 % for 5 % before)."""
    gen = TripsGenerator(seed=3)
    gen.inserts(2_000)
    batch = gen.updates(1_000, repeat_fraction=fraction)
    assert len(pc.unique(batch.column("uuid"))) == 1_000 - int(1_000 * fraction)
    deletes = gen.deletes(300)
    assert deletes.num_rows == len(pc.unique(deletes.column("uuid"))) == 300


def test_run_demo_without_a_folder_keeps_its_table_and_says_so(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Without `directory` the table (the result) stays in a new temporary folder the last line names; a demo that
    fails otherwise than by a model disagreement removes that folder."""
    import tempfile

    from lsm_lab.lab import demo

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    lines: list[str] = []
    table = run_demo(rows=50, rounds=0, echo=lines.append)
    (kept,) = tmp_path.iterdir()
    assert kept.name.startswith("lsm_lab_demo_") and table.path == kept / "trips"
    assert lines[-1] == f"kept {kept} (a new temporary folder: remove it when done)"

    def broken(path: Path, *a: object, **kw: object) -> None:
        path.mkdir(parents=True)
        raise OSError("disk full")

    monkeypatch.setattr(demo, "_run", broken)
    with pytest.raises(OSError, match="disk full"):
        run_demo(rows=50, rounds=0, echo=lines.append)
    assert list(tmp_path.iterdir()) == [kept]
