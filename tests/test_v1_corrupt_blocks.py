"""A corrupt v1 block skipped by a lenient read is reported: a warning naming file and offset, and a count.

Issue 28, finding 11: Hudi's `HoodieLogFileReader` skips a block that fails its frame checks
(a torn write), and so does lsm_lab by default; the skip must not be silent.  A block of a real
Hudi log (data/hudi-tables) is damaged inside a copy of its table.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest

import lsm_lab
from lsm_lab.errors import CorruptFileError
from lsm_lab.format import log_v1 as v1
from lsm_lab.interop.hudi_tables import unpack_tables

STEM = "qs_mor_avro_v8_trips_8i3u1d"


@pytest.fixture(scope="module")
def real_table(shared_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return unpack_tables(shared_dir / "hudi-tables", tmp_path_factory.mktemp("v1corrupt"), names=[STEM])[STEM]


def _damage_a_data_block(table: Path) -> tuple[Path, int]:
    """Flip a bit of the trailer (total block length) of the first data block of a v1 log that the
    snapshot reads (older logs are compacted away); (log, offset)."""
    for log in sorted(p for p in table.rglob("*.log.*") if ".hoodie" not in p.parts):
        data = [b for b in v1.read_log_file(log, decode=False) if b.is_data]
        if not data:
            continue
        original = log.read_bytes()
        raw = bytearray(original)
        raw[data[0].offset + data[0].length - 1] ^= 0x01  # the last byte of the block's trailer
        log.write_bytes(bytes(raw))
        t = lsm_lab.open_table(table)
        t.read()
        if t.last_read_stats is not None and t.last_read_stats.corrupt_blocks_skipped:
            return log, data[0].offset
        log.write_bytes(original)
    raise AssertionError("the snapshot reads no v1 data block")


def test_undamaged_read_counts_nothing(real_table: Path, caplog: pytest.LogCaptureFixture) -> None:
    t = lsm_lab.open_table(real_table)
    assert t.last_read_stats is None
    with caplog.at_level(logging.WARNING, logger="lsm_lab"):
        t.read()
    assert t.last_read_stats is not None and t.last_read_stats.corrupt_blocks_skipped == 0
    assert not [r for r in caplog.records if "corrupt" in r.getMessage()]


def test_skipped_corrupt_block_is_warned_and_counted(real_table: Path, tmp_path: Path,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    copy = tmp_path / "t"
    shutil.copytree(real_table, copy)
    expected = lsm_lab.open_table(copy).read().num_rows
    log, offset = _damage_a_data_block(copy)
    t = lsm_lab.open_table(copy)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="lsm_lab"):
        t.read()
    stats = t.last_read_stats
    assert stats is not None and stats.corrupt_blocks_skipped == 1, stats
    assert stats.corrupt_blocks[0][:2] == (str(log), offset)
    warned = [r for r in caplog.records if r.levelno == logging.WARNING and r.name.startswith("lsm_lab")]
    assert len(warned) == 1, [r.getMessage() for r in warned]
    assert log.name in warned[0].getMessage() and f"byte {offset}" in warned[0].getMessage()
    # the next read counts afresh; a strict read raises instead of skipping
    t.read()
    assert t.last_read_stats is not stats and t.last_read_stats is not None and t.last_read_stats.corrupt_blocks_skipped == 1
    with pytest.raises(CorruptFileError, match=f"corrupt block at byte {offset}"):
        t.read(strict=True)
    # a lookup reads slices with v1 logs in full: it counts (and warns) the same way
    t.lookup(t.read(columns=["_hoodie_record_key"])["_hoodie_record_key"].to_pylist()[:3])
    assert t.last_read_stats is not None and t.last_read_stats.corrupt_blocks_skipped <= 1
    assert expected > 0
