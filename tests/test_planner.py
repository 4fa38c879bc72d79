"""The hybrid compaction planner (lsm_lab.filegroup.planner): rules, thresholds, plan JSON, pending plans.

The rules are checked on hand-made file slices (sizes only, no disk); the
timeline side (plan saved as `<t>.compaction.requested`, file groups of a
pending plan left out, `lsm-lab show plan`) on real tables.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

import lsm_lab
from lsm_lab import InputError
from lsm_lab.cli.app import main
from lsm_lab.filegroup import planner
from lsm_lab.filegroup.fsview import DataFile, FileSlice
from lsm_lab.filegroup.planner import FULL, LOG, CompactionPlan, PlannerConfig, choose, make_plan
from lsm_lab.format import naming
from lsm_lab.timeline.instant import State

FID = "00000001-aaaa-bbbb-cccc-000000000000-0"
MB = 1024 * 1024


def _parsed(name: str) -> naming.FileName:
    parsed = naming.parse(name)
    assert parsed is not None, name
    return parsed


def fake_slice(base_bytes: int | None, log_bytes: list[int], partition: str = "p=1") -> FileSlice:
    base = None
    if base_bytes is not None:
        name = naming.base_file_name(FID, "0-0-0", "20260101000000000")
        base = DataFile(partition, Path("/nowhere") / name, _parsed(name), base_bytes, "20260101000000001")
    logs = []
    for i, size in enumerate(log_bytes):
        t = f"2026010100000{i + 1:02d}00"
        name = naming.log_file_name(FID, "0-0-0", t, 1)
        logs.append(DataFile(partition, Path("/nowhere") / name, _parsed(name), size, t[:-1] + "9"))
    return FileSlice(partition, FID, "20260101000000000", base, tuple(logs))


CFG = PlannerConfig(log_file_num=4, log_total_bytes=512 * MB, small_base_bytes=100 * MB, ratio=0.5)


@pytest.mark.parametrize("base, logs, expected", [
    (200 * MB, [], None),                              # nothing in L0
    (None, [10], FULL),                                # no base file
    (50 * MB, [10], FULL),                             # small base
    (200 * MB, [60 * MB, 50 * MB], FULL),              # logs >= 0.5 x base
    (2000 * MB, [300 * MB, 300 * MB], FULL),           # logs above the total log size threshold (< ratio)
    (200 * MB, [1 * MB] * 4, LOG),                     # large base, many small logs
    (200 * MB, [1 * MB] * 3, None),                    # large base, a few small logs: not yet
])
def test_hybrid_rules(base: int | None, logs: list[int], expected: str | None) -> None:
    op, reason = choose(fake_slice(base, logs), CFG)
    assert op == expected, reason
    assert reason


def test_forced_strategies() -> None:
    big_few = fake_slice(200 * MB, [1 * MB])
    assert choose(big_few, CFG, "full")[0] == FULL
    assert choose(big_few, CFG, "log")[0] is None  # one log: nothing to fold
    assert choose(fake_slice(200 * MB, [1, 2]), CFG, "log")[0] == LOG
    assert choose(fake_slice(200 * MB, []), CFG, "full")[0] is None
    with pytest.raises(InputError, match="strategy"):
        choose(big_few, CFG, "everything")


def test_thresholds_from_properties() -> None:
    cfg = PlannerConfig.from_props({planner.KEY_LOG_FILE_NUM: "2", planner.KEY_RATIO: "0.25",
                                    planner.KEY_SMALL_BASE: "10", planner.KEY_LOG_TOTAL_SIZE: "1000"})
    assert cfg == PlannerConfig(log_file_num=2, log_total_bytes=1000, small_base_bytes=10, ratio=0.25)
    assert PlannerConfig.from_props({}) == PlannerConfig()
    assert PlannerConfig().ratio == 0.5
    with pytest.raises(InputError, match="not a number"):
        PlannerConfig.from_props({planner.KEY_RATIO: "half"})
    with pytest.raises(InputError, match="negative"):
        PlannerConfig.from_props({planner.KEY_LOG_FILE_NUM: "-1"})


def test_plan_json_shape_and_round_trip() -> None:
    slices = [fake_slice(None, [10, 20]), fake_slice(200 * MB, [1 * MB] * 5, partition="p=2")]
    plan = make_plan(slices, strategy="hybrid", merge="hash", config=CFG)
    raw = plan.to_json()
    assert raw["version"] == 3
    assert [op["operationType"] for op in raw["operations"]] == [FULL, LOG]
    op = raw["operations"][0]
    assert set(op) >= {"partitionPath", "fileId", "baseInstantTime", "dataFilePath", "deltaFilePaths", "metrics",
                       "operationType"}
    assert op["dataFilePath"] is None and len(op["deltaFilePaths"]) == 2
    assert op["metrics"]["TOTAL_LOG_FILES"] == 2.0
    assert raw["extraMetadata"]["lsm_lab.merge"] == "hash"
    assert CompactionPlan.from_json(json.loads(json.dumps(raw))) == plan
    assert plan.action == "compaction"
    assert make_plan(slices, strategy="log", config=CFG).action == "logcompaction"
    # excluded file groups are left out
    assert make_plan(slices, config=CFG, exclude={("p=2", FID)}).file_groups == {("p=1", FID)}


def _three_writes(table: lsm_lab.Table) -> None:
    for v in range(3):
        table.upsert([{"id": f"k{i}", "ts": v, "v": v} for i in range(8)])


def test_plan_saved_on_the_timeline_and_pending_groups_excluded(tmp_table: Callable[..., lsm_lab.Table]) -> None:
    table = tmp_table(ordering_field="ts", num_buckets=2)
    _three_writes(table)
    first = table.compact(plan_only=True)
    assert first is not None and first.state is State.REQUESTED and first.action == "compaction"
    assert (table.active_timeline.folder / f"{first.begin_time}.compaction.requested").is_file()
    raw = table.active_timeline.read_content(first, State.REQUESTED)
    assert raw["version"] == 3 and {op["operationType"] for op in raw["operations"]} == {FULL}
    # every file group is in the pending plan: nothing left for a second plan
    assert table.compact(plan_only=True) is None
    # new logs do not change that: the groups stay reserved until the plan runs
    table.upsert([{"id": "k1", "ts": 9, "v": 9}])
    assert table.compact(plan_only=True) is None
    done = table.compact()  # runs the pending plan, then plans the log written meanwhile
    assert table.active_timeline.find(first.begin_time).is_completed
    assert done is not None and done.begin_time > first.begin_time and done.is_completed
    timeline = table.timeline()
    assert list(timeline[timeline.begin_time == first.begin_time].action) == ["compaction"]


def test_copy_on_write_has_nothing_to_compact(tmp_table: Callable[..., lsm_lab.Table]) -> None:
    table = tmp_table(table_type="COPY_ON_WRITE")
    _three_writes(table)
    assert table.compact() is None and table.compact(plan_only=True) is None


def test_show_plan_and_compact_cli(tmp_table: Callable[..., lsm_lab.Table], capsys: pytest.CaptureFixture[str]) -> None:
    table = tmp_table(ordering_field="ts", num_buckets=2)
    path = str(table.path)
    assert main(["show", "plan", path]) == 0
    assert "no compaction plan" in capsys.readouterr().out
    _three_writes(table)
    assert main(["compact", path, "--plan-only", "--strategy", "log"]) == 0
    out = capsys.readouterr().out
    assert "logcompaction" in out and "LOG" in out and "saved as" in out
    assert main(["show", "plan", path]) == 0
    out = capsys.readouterr().out
    assert "[requested]" in out and "strategy=log" in out
    assert main(["show", "plan", path, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["plan"]["version"] == 3 and shown["state"] == "requested"
    assert main(["compact", path, "--merge", "hash"]) == 0
    assert "completed" in capsys.readouterr().out
    assert main(["compact", path, "--strategy", "full", "--option", "nonsense"]) == 2
    assert "key=value" in capsys.readouterr().err
