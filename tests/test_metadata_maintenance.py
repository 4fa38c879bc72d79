"""The metadata table's own table services: its clean (old file slices deleted) and its archival.

After writes with the MDT compacted every 4 deltacommits, MDT cleans delete every slice the retained MDT
commits no longer read (the initial base files among them), while the table reads as a dict model says,
every index (files, column and partition stats, record index, secondary index) still equals the data, and
hudi-rs reads the same rows listing from the MDT (versions 8, 9; on version 10 the MDT logs are native HFile logs).  A writer SIGKILLed half way through an MDT clean leaves
readers unaffected and the next write finishes that clean.  The MDT's archival moves its oldest instants to
its LSM timeline but never one at or after the data table's first active commit or the MDT's latest
compaction, and the data table's archival stops before the MDT's latest compaction.  The retention follows
upstream's derivation from the data table's cleaner policy.  The shortcut that skips planning never skips a
plan that would delete something, and tests/test_crash.py's SIGKILL harness runs on a table whose MDT
compacts, cleans and archives every few writes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from test_metadata_index_write import _rows, check_indexes
from test_metadata_write import native_hfile_logs

import lsm_lab
from lsm_lab.errors import InputError
from lsm_lab.format import naming
from lsm_lab.interop.hudi_tables import hudi_available
from lsm_lab.services import clean_plan, mdt_services
from lsm_lab.table.state import TableState
from lsm_lab.timeline.archive import ArchivedTimeline
from lsm_lab.timeline.config import read_config

ROOT = Path(__file__).resolve().parents[1]


def _make(path: Path, version: int, table_type: str, **props: str) -> lsm_lab.Table:
    return lsm_lab.create_table(path, name="trips", record_key="id", ordering_field="ts", partition_by="city",
                                table_type=table_type, layout="default", table_version=version,
                                properties={"hoodie.metadata.enable": "true",
                                            "hoodie.metadata.record.index.enable": "true",
                                            "hoodie.metadata.compact.max.delta.commits": "4",
                                            mdt_services.PROP_RETAINED: "2", **props})


def _mdt(path: Path) -> Path:
    return path / ".hoodie" / "metadata"


def _mdt_files(path: Path) -> set[str]:
    return {f"{p}/{n}" for p, names in mdt_services.view_files(_mdt(path)).items() for n in names}


def _hudi_rs_check(path: Path) -> None:
    """hudi-rs reads lsm_lab's rows, and provably lists from the MDT: hiding the MDT deltacommit of the data
    table's last write (not of an automatic clean, whose hiding changes no latest slice) changes what it reads."""
    import hudi
    import pyarrow as pa

    from lsm_lab.interop.hudi_tables import compare_rows

    def read() -> pa.Table:
        table = hudi.HudiTableBuilder.from_base_uri(str(path)).with_hudi_option("hoodie.metadata.enable", "true").build()
        return pa.Table.from_batches(table.read(hudi.HudiReadOptions()))

    t = lsm_lab.open_table(path)
    ours = t.read()
    assert compare_rows(ours, read(), ["id"], columns=["id", "city", "ts", "fare"]) == []
    last = [i for i in t.instants() if i.is_completed and i.action in ("commit", "deltacommit")][-1]
    timeline = _mdt(path) / ".hoodie" / "timeline"
    name = next(n for n in os.listdir(timeline) if n.startswith(last.begin_time + "_") and n.endswith(".deltacommit"))
    (timeline / name).rename(timeline / (name + ".hidden"))
    try:
        assert compare_rows(ours, read(), ["id"], columns=["id", "city", "ts", "fare"]) != []
    finally:
        (timeline / (name + ".hidden")).rename(timeline / name)


def _model_check(path: Path, model: dict[str, float]) -> None:
    got = {r["id"]: r["fare"] for r in lsm_lab.open_table(path).read(columns=["id", "fare"]).to_pylist()}
    assert got == model


def _write(t: lsm_lab.Table, model: dict[str, float], step: int) -> None:
    ids = [*range(step % 5, 40, 5), 100 + step]
    t.upsert(_rows(ids, 10 + step, float(step)))
    model.update({f"id{i:03d}": float(step) + i for i in ids})


@pytest.mark.parametrize(("version", "table_type"), [(9, "MERGE_ON_READ"), (8, "COPY_ON_WRITE"), (10, "MERGE_ON_READ")])
def test_old_mdt_slices_are_cleaned(tmp_path: Path, version: int, table_type: str) -> None:
    path = tmp_path / "t"
    t = _make(path, version, table_type)
    t.insert(_rows(range(40), 1, 10.0))
    t.create_index("merchant_idx", "merchant")
    model = {f"id{i:03d}": 10.0 + i for i in range(40)}
    initial = {f for f in _mdt_files(path) if (n := naming.parse(f.split("/")[1])) is not None and n.is_base}
    assert initial
    ever: set[str] = set(_mdt_files(path))
    skipped = 0  # (retained 2: a compaction is nearly always inside the window, the shortcut rarely applies)
    for step in range(12):
        _write(t, model, step)
        ever |= _mdt_files(path)
        m = lsm_lab.open_table(path).metadata_table()
        assert m is not None and all(i.is_completed for i in m.mdt.instants())
        # the shortcut that skips planning never skips a plan that would delete something
        skipped += _shortcut_is_safe(path, 2)
    _model_check(path, model)
    check_indexes(path)
    m = lsm_lab.open_table(path).metadata_table()
    assert m is not None
    cleans = [i for i in m.mdt.instants() if i.action == "clean"]
    assert cleans, "no MDT clean ran"
    now = _mdt_files(path)
    assert not (initial & now), "the initial MDT base files outlived two compactions and the retention"
    assert ever - now  # files were deleted, and each of them was named by a completed MDT clean's metadata
    deleted = set()
    for c in cleans:
        meta = m.mdt.instant_metadata(c)
        for pm in meta["partitionMetadata"].values():
            deleted |= set(pm["successDeleteFiles"])
    assert ever - now == deleted
    # every file group keeps its latest slice (what readers read), and no more than the retained ones need
    for s in m.mdt.latest_slices():
        assert all(f.path.exists() for f in s.files)
    per_group: dict[tuple[str, str], set[str]] = {}
    for f in now:
        parsed = naming.parse(f.split("/")[1])
        assert parsed is not None
        if parsed.kind == "base":
            per_group.setdefault((f.split("/")[0], parsed.file_id), set()).add(parsed.instant)
    assert per_group and max(len(v) for v in per_group.values()) <= 3
    if version == 10:  # upstream's native HFile logs (hudi-rs 0.5 refuses version 10)
        native_hfile_logs(path)
    elif hudi_available():
        _hudi_rs_check(path)


def _shortcut_is_safe(path: Path, retained: int) -> int:
    """1 when the shortcut that skips planning applies now (and then a full plan deletes nothing), else 0."""
    mdt = TableState(_mdt(path), read_config(_mdt(path)))
    if not mdt_services._nothing_new(mdt.active_timeline, mdt.active_timeline.instants(), "KEEP_LATEST_COMMITS",
                                     retained):
        return 0
    assert clean_plan.files_in_plan(clean_plan.plan_clean(mdt, "KEEP_LATEST_COMMITS", retained)) == []
    return 1


def test_the_planning_shortcut_never_skips_a_clean(tmp_path: Path) -> None:
    path = tmp_path / "t"
    t = _make(path, 9, "COPY_ON_WRITE", **{"hoodie.metadata.record.index.enable": "false",
                                          mdt_services.PROP_RETAINED: "6"})
    t.insert(_rows(range(10), 1, 0.0))
    model = {f"id{i:03d}": float(i) for i in range(10)}
    skipped = 0
    for step in range(18):
        _write(t, model, step)
        skipped += _shortcut_is_safe(path, 6)
    m = lsm_lab.open_table(path).metadata_table()
    assert m is not None and any(i.action == "clean" for i in m.mdt.instants())
    assert skipped  # it did apply, and each time a full plan agreed
    _model_check(path, model)


def test_mdt_clean_waits_for_grace_instants_after_a_compaction(tmp_path: Path) -> None:
    path = tmp_path / "t"
    t = _make(path, 9, "COPY_ON_WRITE", **{"hoodie.metadata.record.index.enable": "false"})
    t.insert(_rows(range(10), 1, 0.0))
    model = {f"id{i:03d}": float(i) for i in range(10)}
    for step in range(8):
        _write(t, model, step)
        m = lsm_lab.open_table(path).metadata_table()
        assert m is not None
        instants = m.mdt.instants()
        # a full compaction (not one of `files` alone: lsm_lab.metadata.files.compact.max.log.files)
        full = [i for i in instants if i.action in ("commit", "compaction") and i.is_completed
                and not mdt_services.is_partial(m.mdt.active_timeline, i)]
        for c in (i for i in instants if i.action == "clean"):
            assert full
            # every clean ran once at least GRACE_INSTANTS MDT instants followed a full compaction
            before = [i for i in full if i.begin_time < c.begin_time]
            assert before
            after = [i for i in instants if max(x.begin_time for x in before) < i.begin_time < c.begin_time]
            assert len(after) >= mdt_services.GRACE_INSTANTS  # (the deltacommit written with it begins before it)
    _model_check(path, model)


def test_clean_policy_follows_upstream_derivation() -> None:
    assert mdt_services.clean_policy({}) == ("KEEP_LATEST_COMMITS", 20)  # max(20, 1.2 × 10)
    assert mdt_services.clean_policy({"hoodie.cleaner.commits.retained": "30"}) == ("KEEP_LATEST_COMMITS", 36)
    assert mdt_services.clean_policy({"hoodie.cleaner.policy": "KEEP_LATEST_FILE_VERSIONS"}) == \
        ("KEEP_LATEST_FILE_VERSIONS", 4)  # ceil(1.2 × 3)
    assert mdt_services.clean_policy({"hoodie.cleaner.policy": "KEEP_LATEST_FILE_VERSIONS",
                                      "hoodie.cleaner.fileversions.retained": "5"}) == ("KEEP_LATEST_FILE_VERSIONS", 6)
    assert mdt_services.clean_policy({mdt_services.PROP_RETAINED: "3"}) == ("KEEP_LATEST_COMMITS", 3)
    for bad in ("x", "0"):
        with pytest.raises(InputError, match=mdt_services.PROP_RETAINED):
            mdt_services.clean_policy({mdt_services.PROP_RETAINED: bad})
    d = mdt_services.describe({"hoodie.keep.min.commits": "4", "hoodie.keep.max.commits": "6"})
    assert (d["keep_min"], d["keep_max"], d["retained"]) == (5, 7, 20)


_CRASH = """
import os, signal, sys
import lsm_lab
from lsm_lab.services import clean_plan, mdt_services
from lsm_lab.table.state import TableState
from lsm_lab.storage import paths
calls = []
class _Paths:
    inside = staticmethod(paths.inside)
    @staticmethod
    def unlink(p, **kw):
        r = paths.unlink(p, **kw)
        calls.append(p)
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGKILL)   # half way through an MDT clean's deletions
        return r
mdt_services.paths = _Paths
t = lsm_lab.open_table(sys.argv[1])
for step in range(40):
    ids = list(range(step % 5, 40, 5))
    t.upsert([{"id": f"id{i:03d}", "city": ("sf", "nyc", "chennai")[i % 3], "ts": 100 + step, "fare": 1000.0 + step,
               "merchant": "z"} for i in ids])
    print(step, flush=True)
"""


def test_sigkill_during_an_mdt_clean_leaves_reads_right(tmp_path: Path) -> None:
    path = tmp_path / "t"
    t = _make(path, 9, "MERGE_ON_READ")
    t.insert(_rows(range(40), 1, 10.0))
    t.create_index("merchant_idx", "merchant")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", _CRASH, str(path)], env=env, capture_output=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]
    done = len(proc.stdout.decode().split())  # upserts that completed before the kill
    model = {f"id{i:03d}": 10.0 + i for i in range(40)}
    for step in range(done):
        model.update({f"id{i:03d}": 1000.0 + step for i in range(step % 5, 40, 5)})
    m = lsm_lab.open_table(path).metadata_table()
    assert m is not None
    pending = [i for i in m.mdt.instants() if not i.is_completed]
    assert [i.action for i in pending] == ["clean"]  # killed inside the MDT clean
    _model_check(path, model)  # the dead writer's data instant never completed; readers unaffected
    check_indexes(path)
    if hudi_available():
        _hudi_rs_check(path)
    t = lsm_lab.open_table(path)
    _write(t, model, 200)  # the next writer (a newer ts) finishes the MDT clean, then writes
    m = lsm_lab.open_table(path).metadata_table()
    assert m is not None and all(i.is_completed for i in m.mdt.instants())
    plan_files = set()
    for c in (i for i in m.mdt.instants() if i.action == "clean" and i.begin_time == pending[0].begin_time):
        for pm in m.mdt.instant_metadata(c)["partitionMetadata"].values():
            plan_files |= set(pm["successDeleteFiles"])
    assert plan_files and not (plan_files & _mdt_files(path))
    _model_check(path, model)
    check_indexes(path)


def test_mdt_archival_respects_the_data_table(tmp_path: Path) -> None:
    path = tmp_path / "t"
    t = _make(path, 9, "COPY_ON_WRITE", **{"hoodie.keep.min.commits": "3", "hoodie.keep.max.commits": "4",
                                          "hoodie.archive.automatic": "true", "hoodie.clean.automatic": "true",
                                          "hoodie.cleaner.commits.retained": "2"})
    t.insert(_rows(range(20), 1, 0.0))
    t.create_index("merchant_idx", "merchant")
    model = {f"id{i:03d}": float(i) for i in range(20)}
    archived_before = data_archived = 0
    for step in range(14):
        _write(t, model, step)
        folder = _mdt(path)
        history = ArchivedTimeline(folder, read_config(folder))
        rows = history.instants()
        m = lsm_lab.open_table(path).metadata_table()
        assert m is not None
        active = m.mdt.instants()
        assert len(rows) >= archived_before
        archived_before = len(rows)
        if rows:
            newest = max(r.begin_time for r in rows)
            # never at or after the latest MDT compaction, nor the data table's first active commit
            compactions = [i.begin_time for i in active if i.action in ("commit", "compaction")]
            assert compactions and newest < max(compactions)
            data_commits = [i.begin_time for i in lsm_lab.open_table(path).instants()
                            if i.action in ("commit", "deltacommit", "replacecommit")]
            assert newest < min(data_commits)
            assert not ({r.begin_time for r in rows} & {i.begin_time for i in active})
        # and the data table's own archival stops before the MDT's latest compaction (upstream's rule)
        data_rows = ArchivedTimeline(path, read_config(path)).instants()
        compacted = [i.begin_time for i in active if i.action in ("commit", "compaction") and i.is_completed]
        assert not data_rows or (compacted and max(r.begin_time for r in data_rows) < max(compacted))
        data_archived = max(data_archived, len(data_rows))
    assert archived_before > 0 and data_archived > 0, "the MDT or the data table archived nothing"
    _model_check(path, model)
    check_indexes(path)
    if hudi_available():
        _hudi_rs_check(path)


def test_sigkill_loop_with_mdt_services(tmp_path: Path) -> None:
    """tests/test_crash.py's harness on a table whose MDT compacts every 4 deltacommits, cleans keeping 2
    commits and archives (the data table archives too): kills at random instants, the MDT's clean and
    archival among them; after every kill the table reads a prefix of the acknowledged batches and the MDT
    lists exactly the committed files (plus those a pending data clean already deleted)."""
    from test_metadata_write import sigkill_loop_with_mdt

    sigkill_loop_with_mdt(tmp_path, table_version=9, seed=11,
                          properties={"hoodie.keep.min.commits": "3", "hoodie.keep.max.commits": "4",
                                      "hoodie.metadata.compact.max.delta.commits": "4",
                                      mdt_services.PROP_RETAINED: "2"})
    m = lsm_lab.open_table(tmp_path / "table").metadata_table()
    assert m is not None  # (how many MDT cleans ran depends on the random kill times: the test above kills one)
