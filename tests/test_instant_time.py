"""InstantTime (lsm_lab/timeline/instanttime.py): what users pass as a time becomes one validated value."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import lsm_lab
from lsm_lab import InstantTime
from lsm_lab.errors import InputError, TimelineError

moments = st.datetimes(min_value=dt.datetime(1971, 1, 1), max_value=dt.datetime(2999, 12, 31),
                       timezones=st.just(dt.UTC))


@given(moments, moments)
def test_instant_times_order_like_their_moments(a: dt.datetime, b: dt.datetime) -> None:
    ta, tb = InstantTime(a), InstantTime(b)
    a_ms, b_ms = a.replace(microsecond=a.microsecond // 1000 * 1000), b.replace(microsecond=b.microsecond // 1000 * 1000)
    assert (ta < tb) == (a_ms < b_ms) and (ta == tb) == (a_ms == b_ms)
    assert ta.to_datetime() == a_ms and InstantTime(str(ta)) == ta and InstantTime(ta) is ta
    assert len(ta) == 17 and isinstance(ta, str)


def test_what_an_instant_time_accepts() -> None:
    assert InstantTime("20261122001500") == "20261122001500000"  # legacy 14 digits are padded
    assert InstantTime(20261122001500123) == "20261122001500123"
    assert InstantTime("0").is_beginning and InstantTime("000") == "0" * 17
    for bad in ("2026", "2026131200150012x", "20261322001500123", 1.5, None, True, [1]):
        with pytest.raises(TimelineError):
            InstantTime(bad)  # type: ignore[arg-type]  # the mistakes under test


def test_every_time_argument_takes_a_string_a_datetime_and_an_instant(tmp_path: Path) -> None:
    t = lsm_lab.create_table(tmp_path / "t", name="t", record_key="id")
    t.upsert([{"id": "a", "v": 1}])
    first = t.completed_writes()[-1]
    t.upsert([{"id": "a", "v": 2}, {"id": "b", "v": 3}])
    as_str = str(first.completion_time)
    as_dt = InstantTime(as_str).to_datetime()
    for when in (as_str, as_dt, first, InstantTime(as_str)):
        assert t.read(as_of=when).to_pylist()[0]["v"] == 1, when
        assert t.lookup(["a"], as_of=when).column("v").to_pylist() == [1]
        assert t.read_incremental(when).num_rows == 2
    with pytest.raises(InputError, match="has not completed"):
        InstantTime(lsm_lab.Instant.make("20261122001500123", "deltacommit", lsm_lab.State.REQUESTED))
