"""`lsm-lab bench peers` at a tiny size: the workload, lsm_lab's worker, and (when the peers' venv exists) Paimon.

Speed is not checked here (benchmarks only); these tests check that every contender
runs the workload and ends with the same keys as a plain dict model of it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from lsm_lab.bench import peers


def _model(data_dir: Path) -> set[tuple[str, str]]:
    """The workload applied row by row to a dict: latest ts per (city, uuid) wins; deletes remove."""
    live: dict[tuple[str, str], int] = {}
    for f in sorted(data_dir.glob("*.parquet")):
        for row in pq.read_table(f).to_pylist():
            k = (row["city"], row["uuid"])
            if row["_op"] == "delete":
                if k in live and row["ts"] >= live[k]:
                    del live[k]
            elif k not in live or row["ts"] >= live[k]:
                live[k] = row["ts"]
    return set(live)


def test_workload_files_and_lsm_lab_worker(tmp_path: Path) -> None:
    files = peers.write_workload(tmp_path / "data", 2_000)
    assert [f.name for f in files] == ["00_upsert.parquet", "01_upsert.parquet", "02_upsert.parquet",
                                       "03_upsert.parquet", "04_delete.parquet"]
    figures = peers.lsm_lab_worker(tmp_path / "data", tmp_path / "t", tmp_path / "keys.parquet")
    keys = pq.read_table(tmp_path / "keys.parquet").to_pylist()
    expected = _model(tmp_path / "data")
    assert 1_900 <= len(expected) < 2_000  # the 1% deletes removed rows
    assert figures["rows"] == len(expected)
    assert figures["read_cpu_s"] > 0 and set(figures) == {"write_s", "read_s", "read_cpu_s", "rows"}
    again = peers.reread_worker(tmp_path / "t", tmp_path / "keys.parquet")  # checks both reads give the same keys
    assert again["read_by_key_s"] > 0 and again["read_again_s"] > 0
    assert {(r["city"], r["uuid"]) for r in keys} == expected


def test_missing_peer_venv_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LSM_LAB_PEER_PYTHON", raising=False)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(Exception, match="make bench-peers"):
        peers.run(rows=100, hudi=False)


def test_bench_peers_smoke(tmp_path: Path) -> None:
    peer = peers.default_peer_python()
    if peer is None:
        pytest.skip("no peers' venv (.venv-peers or $LSM_LAB_PEER_PYTHON): run `make bench-peers` to create it")
    report = peers.run(rows=3_000, peer_python=peer, hudi=False, work_dir=tmp_path)
    paimon = report["contenders"]["paimon_rust"]
    assert paimon["same_keys"] is True
    assert paimon["rows"] == report["contenders"]["lsm_lab"]["rows"] == len(_model(tmp_path / "data"))
    assert "paimon_rust" in peers.format_report(report) and "by key as Paimon merges" in peers.format_report(report)
    assert paimon["read_cpu_s"] > 0 and paimon["ratios"]["read_cpu_s"] is not None
    assert "read CPU seconds: lsm_lab" in peers.format_report(report)


def test_the_worker_runs_this_process_code_not_a_checkout_in_the_working_folder(tmp_path: Path,
                                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    # `python -m` puts the working folder first on sys.path: a bench started inside another checkout
    # (e.g. an export of the commit before) would time that checkout's lsm_lab in its worker
    decoy = tmp_path / "checkout"
    (decoy / "lsm_lab").mkdir(parents=True)
    (decoy / "lsm_lab" / "__init__.py").write_text("DECOY = True\n")
    monkeypatch.chdir(decoy)
    show = [sys.executable, "-c", "import json, lsm_lab; print(json.dumps({'at': lsm_lab.__file__}))"]
    clean = tmp_path / "work"
    clean.mkdir()
    figures, _ = peers._run_process(show, "probe", clean)
    assert Path(figures["at"]).resolve() == Path(peers.__file__).resolve().parents[1] / "__init__.py"
    figures, _ = peers._run_process(show, "probe", decoy)  # the trap itself: the working folder wins
    assert Path(figures["at"]).resolve() == (decoy / "lsm_lab" / "__init__.py").resolve()


def test_reread_worker_refuses_other_keys(tmp_path: Path) -> None:
    """The re-read worker compares what it read with the timed read's keys: a difference is an error, not a figure."""
    peers.write_workload(tmp_path / "data", 500)
    peers.lsm_lab_worker(tmp_path / "data", tmp_path / "t", tmp_path / "keys.parquet")
    keys = pq.read_table(tmp_path / "keys.parquet")
    pq.write_table(keys.slice(1), tmp_path / "fewer.parquet")
    with pytest.raises(Exception, match="other rows"):
        peers.reread_worker(tmp_path / "t", tmp_path / "fewer.parquet")


def test_a_kept_work_folder_can_be_used_again(tmp_path: Path) -> None:
    """A second run in the same `--dir` replaces the first run's tables (the lsm_lab worker refuses to create
    a table over an existing one: fails without the clearing) and leaves other files alone."""
    peers.write_workload(tmp_path / "data", 1_000)
    peers.lsm_lab_worker(tmp_path / "data", tmp_path / "lsm_lab", tmp_path / "lsm_lab_keys.parquet")
    (tmp_path / "interop").mkdir()
    (tmp_path / "notes.txt").write_text("mine")
    peers.clear_earlier_run(tmp_path)
    assert not (tmp_path / "lsm_lab").exists() and not (tmp_path / "lsm_lab_keys.parquet").exists()
    assert not (tmp_path / "interop").exists()
    assert (tmp_path / "notes.txt").read_text() == "mine" and (tmp_path / "data").is_dir()
    figures = peers.lsm_lab_worker(tmp_path / "data", tmp_path / "lsm_lab", tmp_path / "lsm_lab_keys.parquet")
    assert figures["rows"] == len(_model(tmp_path / "data"))


def test_a_relative_peer_interpreter_is_taken_from_the_callers_folder(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """`--peer-python .venv-peers/bin/python` names a file in the caller's folder, though the workers run in
    the work folder (issue 34, item 13); made absolute, not resolved (a venv's python is a symlink)."""
    import subprocess
    import sys

    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python").symlink_to(sys.executable)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(Exception, match="does not exist"):
        peers.run(rows=100, peer_python=Path("nowhere/python"), hudi=False)
    started: list[list[str]] = []
    real_run = subprocess.run

    def fake_run(cmd: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
        started.append(cmd)
        if cmd[0] == sys.executable:  # lsm_lab's own worker runs for real (100 rows)
            return real_run(cmd, **kw)
        return subprocess.CompletedProcess(cmd, 1, "", "stopped by the test")

    monkeypatch.setattr(subprocess, "run", fake_run)  # (the module peers runs its workers with)
    with pytest.raises(Exception, match="stopped by the test"):
        peers.run(rows=100, peer_python=Path("bin/python"), hudi=False, work_dir=tmp_path / "work")
    peer_cmds = [c for c in started if c[0] != sys.executable]
    assert peer_cmds and all(c[0] == str(tmp_path / "bin" / "python") for c in peer_cmds)
