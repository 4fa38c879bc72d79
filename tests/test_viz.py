"""lsm_lab.viz figures, headless: bar counts, sizes, colours and hatches match the table's facts."""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

os.environ.setdefault("MPLBACKEND", "Agg")

import pandas as pd
import pytest
from matplotlib.colors import to_hex
from matplotlib.figure import Figure

import lsm_lab
from lsm_lab.lab.datagen import TripsGenerator
from lsm_lab.viz import (
    KeyScale,
    level_files,
    levels_frame,
    load_records,
    plot_bench,
    plot_key_ranges,
    plot_levels,
    plot_lookup_bench,
    plot_merge_bench,
    plot_plan,
    plot_timeline,
    write_figures,
)
from lsm_lab.viz.bench import series
from lsm_lab.viz.plan import plan_operations


def make_trips(path: Path) -> lsm_lab.Table:
    """trips_300i_2x60u_10d: 300 inserts, two rounds of 60 updates, 10 deletes; 3 cities x 2 buckets."""
    table = lsm_lab.create_table(path, name="trips", record_key="uuid", partition_by="city", ordering_field="ts",
                                 num_buckets=2)
    gen = TripsGenerator(11)
    table.insert(gen.inserts(300))
    table.upsert(gen.updates(60))
    table.upsert(gen.updates(60))
    table.delete(gen.deletes(10))
    return table


@pytest.fixture(scope="module")
def trips(tmp_path_factory: pytest.TempPathFactory) -> lsm_lab.Table:
    return make_trips(tmp_path_factory.mktemp("viz") / "trips")


def bars(fig: Figure) -> list[Any]:
    """Every drawn bar (patches carrying a gid), in drawing order."""
    return [p for ax in fig.axes for p in ax.patches if p.get_gid()]


def geometry(fig: Figure) -> list[tuple[Any, ...]]:
    return [(p.get_gid(), round(p.get_x(), 9), round(p.get_y(), 9), round(p.get_width(), 9),
             round(p.get_height(), 9), to_hex(p.get_facecolor()), p.get_hatch()) for p in bars(fig)]


# ------------------------------------------------------------------------------ levels

def test_level_files_match_the_dump(trips: lsm_lab.Table) -> None:
    files = level_files(trips)
    groups = trips.file_groups()
    assert len(groups) == 6
    n = sum(len(g.latest.files) for g in groups)
    assert len(files) == n and n > 18  # a base and three writes' logs per group (a delete may miss one)
    frame = levels_frame(trips)
    assert list(frame["level"].value_counts().sort_index()) == [n - 6, 6]  # L0, L1
    assert frame.loc[frame["is_delete"], "level"].eq("L0").all()
    assert frame["rows"].notna().all() and frame["min_key"].notna().all()


def test_plot_levels_draws_one_bar_per_file_sized_by_rows(trips: lsm_lab.Table) -> None:
    fig = plot_levels(trips)
    assert isinstance(fig, Figure)
    drawn = {p.get_gid(): p for p in bars(fig)}
    frame = levels_frame(trips)
    assert len(drawn) == len(frame) == len(level_files(trips))
    for row in frame.itertuples():
        patch = drawn[f"{row.partition}/{row.name}"]
        assert patch.get_width() == pytest.approx(row.rows)
        assert bool(patch.get_hatch()) == row.is_delete
    # one colour per instant, the same for every file that instant wrote
    by_instant: dict[str, set[str]] = {}
    for row in frame.itertuples():
        by_instant.setdefault(row.instant, set()).add(to_hex(drawn[f"{row.partition}/{row.name}"].get_facecolor()))
    assert all(len(c) == 1 for c in by_instant.values())
    assert len({next(iter(c)) for c in by_instant.values()}) == len(by_instant) == 4
    # rows of the figure: one y per file group, base first (leftmost) in each
    ax = fig.axes[0]
    assert len(ax.get_yticklabels()) == 6
    for (_, group) in frame.groupby(["partition", "file_id"]):
        xs = [drawn[f"{r.partition}/{r.name}"].get_x() for r in group.sort_values("position").itertuples()]
        assert xs == sorted(xs) and xs[0] == 0
    legend = fig.legends[0]
    assert len(legend.get_texts()) == 5  # four instants + the delete-log hatch


def test_plot_levels_by_bytes_and_files(trips: lsm_lab.Table) -> None:
    frame = levels_frame(trips)
    widths = sorted(p.get_width() for p in bars(plot_levels(trips, size="bytes")))
    assert widths == pytest.approx(sorted(frame["bytes"].astype(float)))
    assert {p.get_width() for p in bars(plot_levels(trips, size="files"))} == {1.0}
    with pytest.raises(ValueError, match="size"):
        plot_levels(trips, size="pages")


def test_plot_levels_as_of_the_first_write(trips: lsm_lab.Table) -> None:
    first = trips.instants()[0]
    fig = plot_levels(trips, as_of=first)
    assert len(bars(fig)) == 6  # base files only
    assert all(p.get_linewidth() > 1 for p in bars(fig))


def test_figures_are_deterministic(trips: lsm_lab.Table) -> None:
    for draw in (plot_levels, plot_key_ranges, plot_timeline):
        first, second = geometry(draw(trips)), geometry(draw(trips))
        assert first == second and first


# ------------------------------------------------------------------------------ key ranges

def test_key_scale_preserves_order() -> None:
    keys = ["00ab", "0a", "0a-", "10", "7fff", "8", "80", "f", "ffff", "a1", "zz"]
    scale = KeyScale(keys)
    xs = [scale(k) for k in sorted(keys)]
    assert xs == sorted(xs) and len(set(xs)) == len(xs)
    assert all(0 <= x < 1 for x in xs)
    # unseen characters land between their neighbours (keys that differ only there may tie)
    assert scale("1") < scale("5") <= scale("5~") <= scale("6") < scale("7")


def test_plot_key_ranges_one_panel_per_group_one_bar_per_file(trips: lsm_lab.Table) -> None:
    fig = plot_key_ranges(trips)
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert len(panels) == 6
    frame = levels_frame(trips)
    drawn = {p.get_gid(): p for p in bars(fig)}
    assert len(drawn) == len(frame)
    scale = KeyScale(list(frame["min_key"]) + list(frame["max_key"]))
    for row in frame.itertuples():
        patch = drawn[f"{row.partition}/{row.name}"]
        assert patch.get_y() + patch.get_height() / 2 == pytest.approx(row.position)  # level row
        if row.min_key != row.max_key:
            assert patch.get_x() == pytest.approx(scale(row.min_key))
            assert patch.get_x() + patch.get_width() == pytest.approx(scale(row.max_key))
        assert bool(patch.get_hatch()) == row.is_delete
    for ax in panels:  # L1 row at the bottom
        assert ax.get_yticklabels()[0].get_text() == "L1 base"


def test_plot_key_ranges_one_partition_and_a_cap(trips: lsm_lab.Table) -> None:
    fig = plot_key_ranges(trips, partition="city=chennai")
    assert len([ax for ax in fig.axes if ax.get_visible()]) == 2
    assert len(bars(fig)) == len(levels_frame(trips).query("partition == 'city=chennai'"))
    capped = plot_key_ranges(trips, max_groups=3)
    assert len([ax for ax in capped.axes if ax.get_visible()]) == 3
    assert "first 3 of 6" in capped.get_suptitle()


# ------------------------------------------------------------------------------ timeline

def test_plot_timeline_one_bar_per_instant(trips: lsm_lab.Table) -> None:
    fig = plot_timeline(trips)
    frame = trips.timeline()
    drawn = bars(fig)
    assert [p.get_gid() for p in drawn] == sorted(frame["begin_time"])
    assert not any(p.get_hatch() for p in drawn)
    assert len({to_hex(p.get_facecolor()) for p in drawn}) == 1  # all deltacommits
    starts = [p.get_x() for p in drawn]
    assert starts[0] == 0 and starts == sorted(starts)


def test_plot_timeline_pending_instant_is_open_ended(tmp_path: Path) -> None:
    table = make_trips(tmp_path / "t")
    pending = table.active_timeline.start(table.active_timeline.request("deltacommit", {"operationType": "UPSERT"}))
    drawn = {p.get_gid(): p for p in bars(plot_timeline(table))}
    assert len(drawn) == 5
    open_bar = drawn[pending.begin_time]
    assert open_bar.get_hatch()
    ends = [p.get_x() + p.get_width() for gid, p in drawn.items() if gid != pending.begin_time]
    assert open_bar.get_x() + open_bar.get_width() > max(ends)


def test_plot_timeline_archived_and_the_fallback(trips: lsm_lab.Table) -> None:
    fig = plot_timeline(trips, archived=True)
    assert len(bars(fig)) == len(trips.timeline(archived=True))

    class OldTable:  # a Table whose timeline() predates the archive
        name = "old"

        def timeline(self) -> pd.DataFrame:
            return trips.timeline()[["begin_time", "completion_time", "action", "state", "operation"]]

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fig = plot_timeline(OldTable(), archived=True)
    assert any("archived" in str(w.message) for w in caught)
    assert "archive not available" in fig.axes[0].get_title(loc="left")
    assert len(bars(fig)) == 4


# ------------------------------------------------------------------------------ plan

def _plain(partition: str, fid: str, instant: str, logs: int) -> list[dict[str, Any]]:
    out = [{"partition": partition, "file_id": fid, "level": "L1", "position": 0, "instant": instant,
            "name": f"{fid}_0-0-0_{instant}.parquet", "rows": 100, "bytes": 1000}]
    for i in range(1, logs + 1):
        t = f"2026010100000{i}000"
        out.append({"partition": partition, "file_id": fid, "level": "L0", "position": i, "instant": t,
                    "name": f"{fid}_0-0-0_{t}_1.parquet", "rows": 10, "bytes": 300})
    return out


def test_plot_plan_from_plain_records() -> None:
    before = _plain("p=a", "g1", "20260101000000000", 3) + _plain("p=a", "g2", "20260101000000000", 1)
    after = _plain("p=a", "g1", "20260101000009000", 0) + _plain("p=a", "g2", "20260101000000000", 1)
    fig = plot_plan(before, after, plan={("p=a", "g1"): "FULL"})
    left, right = fig.axes[0], fig.axes[1]
    assert len([p for p in left.patches if p.get_gid()]) == 6
    assert len([p for p in right.patches if p.get_gid()]) == 3
    assert left.get_xlim() == right.get_xlim()  # one scale for both
    labels = [t.get_text() for t in left.get_yticklabels()]
    assert labels == ["p=a/g1  [FULL]", "p=a/g2  [—]"]
    assert "240 rows" in left.get_title(loc="left") and "1 log file" in right.get_title(loc="left")


def test_plot_plan_around_a_compaction(tmp_path: Path) -> None:
    table = make_trips(tmp_path / "t")
    before, frame_before = table.file_groups(), table.file_slices()
    n = len(level_files(before))
    table.compact(strategy="full")
    after, frame_after = table.file_groups(), table.file_slices()
    fig = plot_plan(before, after, table=table, plan=table.compaction_plans()[-1][1])
    assert len([p for p in fig.axes[0].patches if p.get_gid()]) == n
    assert len([p for p in fig.axes[1].patches if p.get_gid()]) == 6
    assert all("[FULL]" in t.get_text() for t in fig.axes[0].get_yticklabels())
    # file_slices() frames know names, not per-file sizes: one unit per file
    fig = plot_plan(frame_before, frame_after)
    assert {p.get_width() for p in bars(fig)} == {1.0}
    assert len(bars(fig)) == n + 6


def test_plan_operations_accepts_objects_and_dicts() -> None:
    class Op:
        partition, file_id, operation_type = "p", "f", "LOG"

    class Plan:
        operations = (Op(),)

    assert plan_operations(Plan()) == {("p", "f"): "LOG"}
    assert plan_operations([{"partitionPath": "p", "fileId": "g", "operationType": "full"}]) == {("p", "g"): "FULL"}
    assert plan_operations(None) == {}


# ------------------------------------------------------------------------------ bench

MERGE = [
    {"contender": c, "k": k, "rows_in": 1000, "seconds": s, "rows_per_s": 1000 / s, "peak_rss_mib": m}
    for c, k, s, m in [("sorted", 2, 1.0, 50), ("sorted", 4, 1.5, 60), ("sorted", 8, 2.0, 70),
                       ("hash", 2, 2.0, 80), ("hash", 4, 3.0, 120), ("hash", 8, 5.0, 200),
                       ("hash", 8, 7.0, 200), ("hash", 8, 6.0, 200)]
] + [{"contender": "duckdb", "error": ["failed"]}]


def test_series_take_the_median_and_skip_bad_records() -> None:
    data = series(MERGE, "k", "seconds", "contender")
    assert list(data) == ["hash", "sorted"]
    assert data["hash"] == [(2, 2.0), (4, 3.0), (8, 6.0)]


def test_plot_bench_lines_for_numbers_bars_for_names() -> None:
    fig = plot_bench(MERGE, x="k", y="seconds", group="contender", logx=True, logy=True)
    ax = fig.axes[0]
    assert [line.get_gid() for line in ax.lines] == ["series:hash", "series:sorted"]
    assert list(cast(Sequence[float], ax.lines[1].get_xdata())) == [2, 4, 8]  # the x values it drew (the stub: ArrayLike)
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    lookups = [{"layout": lay, "mode": "lookup", "seconds": s, "bytes_read": b, "files_opened": f}
               for lay, s, b, f in [("lsm_tree", 0.01, 100, 2), ("default", 0.05, 900, 7), ("shuffled", 0.2, 5000, 9)]]
    fig = plot_bench(lookups, x="layout", y="files_opened")
    drawn = bars(fig)
    assert [p.get_height() for p in drawn] == [2, 7, 9]
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["lsm_tree", "default", "shuffled"]
    fig = plot_lookup_bench([*lookups, {"layout": "ratio", "mode": "x", "seconds": 9.0}])
    assert len(fig.axes) == 3 and all(len([p for p in ax.patches if p.get_gid()]) == 3 for ax in fig.axes)


def test_plot_merge_bench_panels_and_spark_records() -> None:
    fig = plot_merge_bench(MERGE)
    assert [ax.get_ylabel() for ax in fig.axes] == ["rows per second", "peak RSS (MiB)"]
    assert all(len(ax.lines) == 2 for ax in fig.axes)
    spark = [{"engine": "spark", "merge": m, "rows": 8_000_000, "k": k, "seconds": 10.0 + k, "peak_rss_mib": 900.0}
             for m in ("hash", "sorted") for k in (2, 4)]
    fig = plot_merge_bench(spark)
    assert fig.axes[0].get_ylabel() == "seconds"
    assert [line.get_gid() for line in fig.axes[0].lines] == ["series:hash", "series:sorted"]


def test_load_records_json_and_json_lines(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text(json.dumps(MERGE))
    (tmp_path / "b.jsonl").write_text("\n".join(json.dumps(r) for r in MERGE))
    assert load_records(tmp_path / "a.json") == load_records(tmp_path / "b.jsonl") == MERGE
    fig = plot_bench(tmp_path / "a.json", x="k", y="seconds", group="contender")
    assert len(fig.axes[0].lines) == 2


# ------------------------------------------------------------------------------ files

def test_write_figures(trips: lsm_lab.Table, tmp_path: Path) -> None:
    paths = write_figures(trips, tmp_path / "figs")
    assert [p.name for p in paths] == ["levels.png", "key_ranges.png", "timeline.png"]
    for p in paths:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_figures_show_themselves_in_a_notebook(trips: lsm_lab.Table) -> None:
    png = plot_levels(trips)._repr_png_()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"


def test_empty_table_draws_without_error(tmp_path: Path) -> None:
    table = lsm_lab.create_table(tmp_path / "e", name="empty", record_key="uuid")
    for draw in (plot_levels, plot_key_ranges, plot_timeline):
        assert bars(draw(table)) == []
