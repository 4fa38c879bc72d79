"""Data file names: base, v2 logs (RFC-103 and upstream), v1 logs; what is not a data file."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lsm_lab.format import naming

FID = "00000002-5c1d-5b2a-9c3e-1a2b3c4d5e6f-0"
TOK = "0-12-35"
T = "20261122001500123"


def test_base_file() -> None:
    name = naming.base_file_name(FID, TOK, T)
    assert name == f"{FID}_{TOK}_{T}.parquet"
    f = naming.parse(name)
    assert f is not None
    assert (f.file_id, f.write_token, f.instant, f.kind, f.ext, f.log_format) == (FID, TOK, T, "base", "parquet", 0)
    assert f.is_base and not f.is_log and not f.is_delete


@pytest.mark.parametrize("ext", ["orc", "hfile", "lance"])
def test_other_base_formats_are_recognised(ext: str) -> None:
    f = naming.parse(f"{FID}_{TOK}_{T}.{ext}")
    assert f is not None and f.is_base and f.ext == ext


@pytest.mark.parametrize(
    ("suffix", "content"),
    [(".parquet", "data"), (".delete.parquet", "delete"), (".log.parquet", "data"),
     (".deletes.parquet", "delete"), (".cdc.parquet", "cdc")],
)
def test_v2_logs(suffix: str, content: str) -> None:
    f = naming.parse(f"{FID}_{TOK}_{T}_3{suffix}")
    assert f is not None
    assert (f.file_id, f.write_token, f.instant, f.version, f.kind, f.log_format, f.content) == (
        FID, TOK, T, 3, "log", 2, content)
    assert f.is_delete == (content == "delete")


def test_v2_writer_names_round_trip() -> None:
    data = naming.log_file_name(FID, TOK, T, 7)
    delete = naming.log_file_name(FID, TOK, T, 7, delete=True)
    assert data == f"{FID}_{TOK}_{T}_7.parquet" and delete == f"{FID}_{TOK}_{T}_7.delete.parquet"
    parsed, parsed_delete = naming.parse(data), naming.parse(delete)
    assert parsed is not None and parsed_delete is not None
    assert parsed.content == "data" and parsed_delete.is_delete


def test_v1_logs() -> None:
    name = naming.v1_log_file_name(FID, T, 2, "1-0-1")
    assert name == f".{FID}_{T}.log.2_1-0-1"
    f = naming.parse(name)
    assert f is not None
    assert (f.file_id, f.instant, f.version, f.write_token, f.log_format, f.kind) == (FID, T, 2, "1-0-1", 1, "log")
    legacy = naming.parse(f".{FID}_20240418173551.log.1")  # old names: no token, 14-digit time
    assert legacy is not None and legacy.instant == "20240418173551" and legacy.write_token == ""
    cdc = naming.parse(f".{FID}_{T}.log.1_0-1-0.cdc")
    assert cdc is not None and cdc.content == "cdc"


def test_real_hudi_names() -> None:
    base = naming.parse("97de74b1-2a8e-4bb7-874c-0a74e1f42a77-0_1-98-142_20240418172802262.parquet")
    assert base is not None
    assert base.file_id == "97de74b1-2a8e-4bb7-874c-0a74e1f42a77-0" and base.write_token == "1-98-142"
    v1 = naming.parse(".6db57019-98ee-480e-8eb1-fb3de48e1c24-0_20250331030642808.log.1_0-52-72")
    assert v1 is not None
    assert v1.file_id == "6db57019-98ee-480e-8eb1-fb3de48e1c24-0" and v1.version == 1


def test_write_token() -> None:
    assert naming.write_token() == "0-0-0"
    assert naming.write_token(3, 12, 1) == "3-12-1"


@pytest.mark.parametrize("name", [
    ".hoodie_partition_metadata", ".hoodie_partition_metadata.parquet", "hoodie.properties",
    f".{FID}_{TOK}_{T}.parquet.0123456789ab.tmp",  # parquet_write temp file
    f"{FID}_{TOK}_{T}.parquet.crc", f".{FID}_{TOK}_{T}.parquet.crc", f"{FID}_{T}.parquet",  # no token
    f"{FID}_{TOK}_2026.parquet", f"{FID}_{TOK}_{T}.csv", "part-00000.parquet", ".DS_Store",
    f"{FID}_{TOK}_{T}_1.delete.parquet.tmp",
])
def test_not_data_files(name: str) -> None:
    assert naming.parse(name) is None


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    file_id=st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_-]{0,40}", fullmatch=True),
    task=st.integers(0, 9999), stage=st.integers(0, 9999), attempt=st.integers(0, 99),
    instant=st.from_regex(r"\d{17}", fullmatch=True), version=st.integers(1, 10_000), delete=st.booleans(),
)
def test_names_round_trip(file_id: str, task: int, stage: int, attempt: int, instant: str, version: int,
                          delete: bool) -> None:
    token = naming.write_token(task, stage, attempt)
    base = naming.parse(naming.base_file_name(file_id, token, instant))
    assert base is not None
    assert (base.file_id, base.write_token, base.instant, base.kind) == (file_id, token, instant, "base")
    log = naming.parse(naming.log_file_name(file_id, token, instant, version, delete=delete))
    assert log is not None
    assert (log.file_id, log.write_token, log.instant, log.version, log.is_delete, log.log_format) == (
        file_id, token, instant, version, delete, 2)
    v1 = naming.parse(naming.v1_log_file_name(file_id, instant, version, token))
    assert v1 is not None
    assert (v1.file_id, v1.instant, v1.version, v1.write_token, v1.log_format) == (
        file_id, instant, version, token, 1)


_NOT_DATA = {".hoodie_partition_metadata", ".DS_Store", "hoodie.properties"}


def _real_names() -> list[tuple[str, str]]:
    """(where, name) of every file of the real Hudi tables and log files in data/, outside timelines."""
    import zipfile
    from pathlib import Path

    data = Path(__file__).resolve().parents[1] / "data"
    out = [(str(p), p.name) for p in (data / "hudi-log-files").rglob("*") if p.is_file()]
    for z in sorted((data / "hudi-tables").glob("*.zip")):
        with zipfile.ZipFile(z) as archive:
            for member in archive.namelist():
                parts = member.split("/")
                folders = parts[:-1]
                hoodie = max((i for i, p in enumerate(folders) if p == ".hoodie"), default=None)
                in_timeline = hoodie is not None and folders[hoodie + 1 : hoodie + 2] != ["metadata"]
                if member.endswith("/") or "__MACOSX" in parts or in_timeline:
                    continue  # (the metadata table's data files under .hoodie/metadata/ are kept)
                out.append((f"{z.name}:{member}", parts[-1]))
    return out


def test_every_real_file_name_parses_with_the_one_grammar() -> None:
    names = _real_names()
    data_names = [(w, n) for w, n in names if n not in _NOT_DATA]
    v1 = [naming.parse(n) for _, n in data_names if ".log." in n]
    assert len(data_names) >= 150 and len(v1) >= 75  # the real files are there
    for where, name in data_names:
        parsed = naming.parse(name)
        assert parsed is not None, where
        assert parsed.name == name
        if ".log." in name:
            assert parsed.is_log and parsed.log_format == 1, where
            assert naming.v1_log_file_name(parsed.file_id, parsed.instant, parsed.version,
                                           parsed.write_token) == name, where
        else:
            assert parsed.is_base and parsed.ext == name.rsplit(".", 1)[1] in ("parquet", "hfile"), where
    assert all(naming.parse(n) is None for _, n in names if n in _NOT_DATA)
