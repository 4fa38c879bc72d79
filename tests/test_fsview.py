"""The file-system view: which files are visible, how they form file groups and slices, as of a time.

The files here are empty placeholders: the view only looks at names, instants and sizes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lsm_lab.filegroup import fsview
from lsm_lab.format import naming

FG = "00000000-aaaa-bbbb-cccc-000000000000-0"
FG2 = "00000001-aaaa-bbbb-cccc-000000000000-0"
TOK = "0-0-0"


def t(n: int) -> str:
    """Instant time number n (17 digits, ordered like n)."""
    return f"2026010100000{n:04d}"


def touch(base: Path, name: str, partition: str = "p") -> str:
    folder = base / partition if partition else base
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(b"x" * 10)
    return name


def base_file(base: Path, begin: int, fid: str = FG, partition: str = "p") -> str:
    return touch(base, naming.base_file_name(fid, TOK, t(begin)), partition)


def log_file(base: Path, begin: int, fid: str = FG, partition: str = "p", *, delete: bool = False,
             version: int = 1) -> str:
    return touch(base, naming.log_file_name(fid, TOK, t(begin), version, delete=delete), partition)


def layout(groups: list[fsview.FileGroup]) -> dict[tuple[str, str], list[tuple[str | None, list[str]]]]:
    """{(partition, file id): [(base file name, [log names in order]) per slice]}."""
    return {
        (g.partition, g.file_id): [(s.base_file.path.name if s.base_file else None,
                                    [f.path.name for f in s.log_files]) for s in g.slices]
        for g in groups
    }


def test_slices_and_completion_order(tmp_path: Path) -> None:
    b1 = base_file(tmp_path, 1)
    l2 = log_file(tmp_path, 2)
    l3 = log_file(tmp_path, 3)
    d3 = log_file(tmp_path, 3, delete=True)
    # instant 3 began after 2 but completed first: logs are ordered by *completion* time
    done = {t(1): t(1), t(2): t(9), t(3): t(5)}
    groups = fsview.build_file_groups(tmp_path, done, read_time=None)
    assert layout(groups) == {("p", FG): [(b1, [l3, d3, l2])]}
    s = groups[0].latest
    assert s.base_instant == t(1) and s.size_bytes == 40 and len(s.files) == 4
    assert [f.completion_time for f in s.log_files] == [t(5), t(5), t(9)]


def test_logs_completed_after_a_newer_base_go_to_the_newer_slice(tmp_path: Path) -> None:
    b1 = base_file(tmp_path, 1)
    l2 = log_file(tmp_path, 2)   # completed before the compaction began: merged into it
    b4 = base_file(tmp_path, 4)  # a compaction planned at 4
    l3 = log_file(tmp_path, 3)   # began before the compaction, completed after it began
    l6 = log_file(tmp_path, 6)
    done = {t(1): t(1), t(2): t(2), t(3): t(5), t(4): t(7), t(6): t(8)}
    groups = fsview.build_file_groups(tmp_path, done, read_time=None)
    assert layout(groups) == {("p", FG): [(b1, [l2]), (b4, [l3, l6])]}
    # before the compaction completed (t7) its base is invisible, so l3 stays on the old base
    groups = fsview.build_file_groups(tmp_path, done, read_time=t(6))
    assert layout(groups) == {("p", FG): [(b1, [l2, l3])]}


def test_uncommitted_files_are_invisible(tmp_path: Path) -> None:
    b1 = base_file(tmp_path, 1)
    log_file(tmp_path, 2)                 # inflight write
    log_file(tmp_path, 3, delete=True)    # failed write
    base_file(tmp_path, 4, fid=FG2)       # inflight new file group
    l5 = log_file(tmp_path, 5)
    done = {t(1): t(1), t(5): t(6)}
    groups = fsview.build_file_groups(tmp_path, done, read_time=None)
    assert layout(groups) == {("p", FG): [(b1, [l5])]}


def test_time_travel(tmp_path: Path) -> None:
    b1 = base_file(tmp_path, 1)
    l2 = log_file(tmp_path, 2)
    b3 = base_file(tmp_path, 3, fid=FG2)
    l4 = log_file(tmp_path, 4)
    done = {t(1): t(10), t(2): t(20), t(3): t(30), t(4): t(40)}
    assert fsview.build_file_groups(tmp_path, done, read_time=t(9)) == []
    assert layout(fsview.build_file_groups(tmp_path, done, read_time=t(10))) == {("p", FG): [(b1, [])]}
    assert layout(fsview.build_file_groups(tmp_path, done, read_time=t(20))) == {("p", FG): [(b1, [l2])]}
    assert layout(fsview.build_file_groups(tmp_path, done, read_time=t(25))) == {("p", FG): [(b1, [l2])]}
    at3 = layout(fsview.build_file_groups(tmp_path, done, read_time=t(30)))
    assert at3 == {("p", FG): [(b1, [l2])], ("p", FG2): [(b3, [])]}
    assert layout(fsview.build_file_groups(tmp_path, done, read_time=t(40)))[("p", FG)] == [(b1, [l2, l4])]
    assert layout(fsview.build_file_groups(tmp_path, done, read_time=None)) == layout(
        fsview.build_file_groups(tmp_path, done, read_time=t(40)))
    # a legacy 14-digit read time compares as if right-padded with zeros
    assert fsview.build_file_groups(tmp_path, done, read_time="20260101000000") == []
    assert len(fsview.build_file_groups(tmp_path, done, read_time="20260102000000")) == 2


def test_versions_and_cow_slices(tmp_path: Path) -> None:
    b1 = base_file(tmp_path, 1)
    b2 = base_file(tmp_path, 2)
    b3 = base_file(tmp_path, 3)
    done = {t(1): t(1), t(2): t(2), t(3): t(3)}
    groups = fsview.build_file_groups(tmp_path, done, read_time=None)
    assert layout(groups) == {("p", FG): [(b1, []), (b2, []), (b3, [])]}
    assert groups[0].latest.base_file is not None and groups[0].latest.base_file.path.name == b3
    assert layout(fsview.build_file_groups(tmp_path, done, read_time=t(2)))[("p", FG)][-1] == (b2, [])


def test_log_versions_of_one_instant_in_order(tmp_path: Path) -> None:
    b1 = base_file(tmp_path, 1)
    l2v2 = log_file(tmp_path, 2, version=2)
    l2v1 = log_file(tmp_path, 2, version=1)
    d2v1 = log_file(tmp_path, 2, version=1, delete=True)
    groups = fsview.build_file_groups(tmp_path, {t(1): t(1), t(2): t(2)}, read_time=None)
    assert layout(groups) == {("p", FG): [(b1, [l2v1, d2v1, l2v2])]}


def test_logs_without_a_base(tmp_path: Path) -> None:
    l2 = log_file(tmp_path, 2)
    l3 = log_file(tmp_path, 3)
    groups = fsview.build_file_groups(tmp_path, {t(2): t(2), t(3): t(3)}, read_time=None)
    assert layout(groups) == {("p", FG): [(None, [l2, l3])]}
    assert groups[0].latest.base_instant == t(2)


def test_partitions_replaced_groups_and_stray_files(tmp_path: Path) -> None:
    a = base_file(tmp_path, 1, partition="city=a")
    b = base_file(tmp_path, 1, fid=FG2, partition="city=b/day=2")
    root = base_file(tmp_path, 1, partition="")
    touch(tmp_path, ".hoodie_partition_metadata", "city=a")
    touch(tmp_path, "notes.txt", "city=a")
    touch(tmp_path / ".hoodie", naming.base_file_name(FG, TOK, t(1)), "")  # hidden folders are skipped
    touch(tmp_path, naming.base_file_name(FG, TOK, t(1)), ".hidden")
    done = {t(1): t(1)}
    groups = fsview.build_file_groups(tmp_path, done, read_time=None)
    assert layout(groups) == {("", FG): [(root, [])], ("city=a", FG): [(a, [])], ("city=b/day=2", FG2): [(b, [])]}
    assert fsview.list_partitions(tmp_path) == ["", "city=a", "city=b/day=2"]
    only = fsview.build_file_groups(tmp_path, done, read_time=None, partitions=["city=b/day=2"])
    assert [g.partition for g in only] == ["city=b/day=2"]
    replaced = fsview.build_file_groups(tmp_path, done, read_time=None, replaced={("city=a", FG)})
    assert {g.partition for g in replaced} == {"", "city=b/day=2"}
    assert groups[1].slices[0].files[0].relative == f"city=a/{a}"


def test_replaced_file_groups_from_metadata() -> None:
    from lsm_lab.timeline.instant import Instant, State

    done = Instant.make(t(5), "replacecommit", State.COMPLETED, t(6))
    pending = Instant.make(t(7), "replacecommit", State.INFLIGHT)
    other = Instant.make(t(8), "deltacommit", State.COMPLETED, t(9))
    meta = {t(5): {"partitionToReplaceFileIds": {"p": [FG, FG2]}}, t(7): {"partitionToReplaceFileIds": {"p": ["x"]}}}
    got = fsview.replaced_file_groups([done, pending, other], lambda i: meta.get(i.begin_time, {}))
    assert got == {("p", FG), ("p", FG2)}


def test_v6_v1_logs_follow_their_base_instant(tmp_path: Path) -> None:
    b1 = base_file(tmp_path, 1)
    b4 = base_file(tmp_path, 4)
    v1_old = touch(tmp_path, naming.v1_log_file_name(FG, t(1), 1, TOK), "p")
    v1_new = touch(tmp_path, naming.v1_log_file_name(FG, t(4), 1, TOK), "p")
    done = {t(1): t(1), t(4): t(4)}  # v1 logs' own instants are decided block by block
    groups = fsview.build_file_groups(tmp_path, done, read_time=None, v1_logs_by_base_instant=True)
    assert layout(groups) == {("p", FG): [(b1, [v1_old]), (b4, [v1_new])]}
    assert groups[0].latest.log_files[0].completion_time == ""


@pytest.mark.parametrize("with_base", [True, False])
def test_file_slice_html(tmp_path: Path, with_base: bool) -> None:
    if with_base:
        base_file(tmp_path, 1)
    log_file(tmp_path, 2)
    groups = fsview.build_file_groups(tmp_path, {t(1): t(1), t(2): t(2)}, read_time=None)
    html = groups[0].latest._repr_html_()
    assert "L0 logs (1)" in html and FG in html
