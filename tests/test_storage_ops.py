"""The one-call operations of the storage seam take a local `Path` or a `StoragePath` alike.

Each test runs against the local file system and a real S3 server (moto on 127.0.0.1):
callers above storage/ never branch on the kind of path, so both must behave the same.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from localpath import local

from lsm_lab.errors import ConflictError, UnsafePathError
from lsm_lab.storage import (
    StoragePath,
    TablePath,
    as_path,
    atomic,
    file_stamp,
    is_local,
    list_stamped,
    open_read,
    path_of,
    paths,
    temp_leftovers,
    walk_sized,
)


@pytest.fixture(params=["local", "s3"])
def root(request: pytest.FixtureRequest, tmp_path: Path) -> TablePath:
    if request.param == "local":
        (tmp_path / "table" / ".hoodie").mkdir(parents=True)
        return as_path(tmp_path / "table")
    server = request.getfixturevalue("s3_server")
    return as_path(f"s3://{server.new_bucket()}/warehouse/table", server.options())


def _requests(path: TablePath) -> dict[str, int] | None:
    return path.storage.counts.snapshot() if isinstance(path, StoragePath) else None


def test_atomic_create_and_replace_on_either_kind(root: TablePath) -> None:
    target = root / ".hoodie" / "timeline" / "x.commit"
    atomic.create_file(target, b"one", mkdir=True)
    assert target.read_bytes() == b"one"

    def taken(p: Any) -> ConflictError:
        return ConflictError("taken", path=p)

    with pytest.raises(ConflictError, match="taken"):  # the caller's typed error, the file left alone
        atomic.create_file(target, b"two", on_exists=taken)
    assert target.read_bytes() == b"one"
    atomic.replace_file(target, b"three", fsync=False)
    assert target.read_bytes() == b"three"
    if is_local(root):  # no temp file left behind
        assert sorted(os.listdir(local(target.parent))) == ["x.commit"]


def test_reads_listings_and_stamps(root: TablePath) -> None:
    atomic.replace_file(root / "city=a" / "f1.parquet", b"0123456789", mkdir=True)
    atomic.replace_file(root / "city=a" / "sub" / "f2.parquet", b"abc", mkdir=True)
    atomic.replace_file(root / ".hoodie" / "hidden.parquet", b"h", mkdir=True)
    atomic.replace_file(root / "top.parquet", b"t")
    with open_read(root / "city=a" / "f1.parquet") as fh:
        assert fh.read(4) == b"0123" and fh.read() == b"456789"
    with pytest.raises(FileNotFoundError), open_read(root / "missing"):
        pass
    walked = sorted(walk_sized(root))
    sizes: list[int | None] = [3, 10, 1] if not is_local(root) else [None, None, None]
    assert walked == sorted(zip(["city=a/sub", "city=a", ""], ["f2.parquet", "f1.parquet", "top.parquet"], sizes,
                                strict=True))
    stamped = list_stamped(root / "city=a")
    assert list(stamped) == ["f1.parquet"] and stamped["f1.parquet"][0] == 10
    assert list_stamped(root / "nowhere") == {}
    size, stamp = file_stamp(root / "city=a" / "f1.parquet")
    assert size == 10
    before = _requests(root)
    assert file_stamp(root / "city=a" / "f1.parquet", 10)[0] == 10
    if before is not None:  # a size from a listing spares the HEAD
        assert isinstance(root, StoragePath) and root.storage.counts.since(before)["HEAD"] == 0
    else:
        assert stamp == os.stat(local(root / "city=a" / "f1.parquet")).st_mtime_ns
    with pytest.raises(FileNotFoundError):
        file_stamp(root / "missing")
    assert path_of(root) == root
    assert temp_leftovers(root / "city=a", "f1.parquet") == []


def test_temp_leftovers_are_local_only(tmp_path: Path) -> None:
    folder = tmp_path / "t" / "p"
    folder.mkdir(parents=True)
    (folder / ".f.parquet.abc123.tmp").write_bytes(b"")
    (folder / ".g.parquet.abc123.tmp").write_bytes(b"")
    assert temp_leftovers(folder, "f.parquet") == [folder / ".f.parquet.abc123.tmp"]
    assert path_of(str(folder)) == folder


def test_remove_tree_and_check_folder(root: TablePath, tmp_path: Path) -> None:
    folder = root / ".hoodie" / ".temp" / "20260101000000000"
    paths.make_folders(folder / "p")
    paths.touch(folder / "p" / "f.marker.CREATE")
    paths.touch(folder / "g.marker.CREATE")
    paths.check_folder(folder / "p" / "f.marker.CREATE")
    paths.remove_tree(root, folder, parent=".temp")
    assert sorted(walk_sized(folder)) == [] and not (folder / "g.marker.CREATE").exists()
    if is_local(root):  # a link out of the table is refused by check_folder and never followed by remove_tree
        assert isinstance(root, Path)
        outside = tmp_path / "outside"
        (outside / "x").mkdir(parents=True)
        (outside / "x" / "keep").write_bytes(b"k")
        (root / "linked").symlink_to(outside / "x")
        with pytest.raises(UnsafePathError):
            paths.check_folder(root / "linked" / "keep")
        link = root / ".hoodie" / ".temp" / "20260101000000001"
        link.symlink_to(outside / "x")
        paths.remove_tree(root, link, parent=".temp")
        assert (outside / "x" / "keep").read_bytes() == b"k"
