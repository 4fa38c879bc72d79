"""Deterministic trips data, shaped like Apache Hudi's quickstart, at any size.

    uuid          string   record key (a random-looking UUID from the seeded generator)
    ts            int64    event time in epoch milliseconds (the ordering field)
    rider         string   "rider-A" … "rider-Z"
    driver        string   "driver-K" … "driver-T"
    fare          double   dollars
    begin_lat/lon, end_lat/lon  double
    city          string   partition: san_francisco, sao_paulo, chennai

`TripsGenerator(seed)` hands out batches in a fixed order, so the same seed and
the same calls give the same bytes everywhere:

    gen.inserts(n)            n new trips
    gen.updates(n)            n updates of existing trips (some keys twice in the batch,
                              `late_fraction` of them with an *older* ts, to show event-time ordering)
    gen.deletes(n)            n existing trips to delete (key, city, ts)

Everything is generated with NumPy and Arrow kernels (8M rows in a few seconds).

Taught in: notebooks/00_why_lsm.ipynb (and the data of every chapter)
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

CITIES = ("san_francisco", "sao_paulo", "chennai")
_CITY_BOXES = {  # (lat, lon) centres
    "san_francisco": (37.77, -122.42),
    "sao_paulo": (-23.55, -46.63),
    "chennai": (13.08, 80.27),
}
EPOCH_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z

SCHEMA = pa.schema([
    ("uuid", pa.string()), ("ts", pa.int64()), ("rider", pa.string()), ("driver", pa.string()),
    ("fare", pa.float64()), ("begin_lat", pa.float64()), ("begin_lon", pa.float64()),
    ("end_lat", pa.float64()), ("end_lon", pa.float64()), ("city", pa.string()),
])


def _uuids(rng: np.random.Generator, n: int) -> pa.Array:
    raw = rng.integers(0, 256, size=(n, 16), dtype=np.uint8)
    raw[:, 6] = (raw[:, 6] & 0x0F) | 0x40  # version 4
    raw[:, 8] = (raw[:, 8] & 0x3F) | 0x80  # variant
    hexed = np.frombuffer(raw.tobytes().hex().encode("ascii"), dtype="S32")
    text = pc.cast(pa.array(hexed, pa.binary(32)), pa.string())
    cuts = [(0, 8), (8, 12), (12, 16), (16, 20), (20, 32)]
    parts = [pc.utf8_slice_codeunits(text, a, b) for a, b in cuts]
    return pc.binary_join_element_wise(*parts, "-")


class TripsGenerator:
    """Seeded generator of insert, update and delete batches of trips."""

    def __init__(self, seed: int = 42, *, late_fraction: float = 0.0) -> None:
        self.rng = np.random.default_rng(seed)
        self.late_fraction = late_fraction
        self.keys = pa.array([], pa.string())
        self.cities = pa.array([], pa.string())
        self.clock = EPOCH_MS

    def _rows(self, keys: pa.Array, cities: pa.Array, ts: np.ndarray) -> pa.Table:
        n = len(keys)
        rng = self.rng
        centre = np.array([_CITY_BOXES[c] for c in CITIES])
        city_idx = pc.index_in(cities, value_set=pa.array(CITIES)).to_numpy(zero_copy_only=False) if n else np.zeros(0, int)
        lat0 = centre[city_idx, 0] if n else np.zeros(0)
        lon0 = centre[city_idx, 1] if n else np.zeros(0)
        riders = pc.binary_join_element_wise("rider-", pa.array(np.array(list("ABCDEFGHIJKLMNOPQRSTUVWXYZ"))[
            rng.integers(0, 26, n)]), "")
        drivers = pc.binary_join_element_wise("driver-", pa.array(np.array(list("KLMNOPQRST"))[
            rng.integers(0, 10, n)]), "")
        return pa.table({
            "uuid": keys, "ts": pa.array(ts, pa.int64()), "rider": riders, "driver": drivers,
            "fare": pa.array(np.round(rng.uniform(5.0, 120.0, n), 2)),
            "begin_lat": pa.array(lat0 + rng.normal(0, 0.05, n)), "begin_lon": pa.array(lon0 + rng.normal(0, 0.05, n)),
            "end_lat": pa.array(lat0 + rng.normal(0, 0.05, n)), "end_lon": pa.array(lon0 + rng.normal(0, 0.05, n)),
            "city": cities,
        }, schema=SCHEMA)

    def _tick(self, n: int) -> np.ndarray:
        ts = self.clock + np.sort(self.rng.integers(0, 60_000, n)).astype(np.int64)
        self.clock += 60_000
        return ts

    def inserts(self, n: int) -> pa.Table:
        """`n` new trips (new keys)."""
        keys = _uuids(self.rng, n)
        cities = pa.array(np.array(CITIES, dtype=object)[self.rng.integers(0, len(CITIES), n)], pa.string())
        self.keys = pa.concat_arrays([self.keys, keys])
        self.cities = pa.concat_arrays([self.cities, cities])
        return self._rows(keys, cities, self._tick(n))

    def _pick(self, n: int) -> np.ndarray:
        """`n` distinct trips (with repeats only when `n` exceeds the trips inserted), so that a batch repeats
        exactly the keys its caller asks for."""
        total = len(self.keys)
        if total == 0:
            raise ValueError("no trips inserted yet")
        if n <= total:
            return self.rng.choice(total, size=n, replace=False)
        return self.rng.integers(0, total, n)

    def updates(self, n: int, *, repeat_fraction: float = 0.05) -> pa.Table:
        """`n` updates of existing trips; `repeat_fraction` of them repeat a key of the same batch."""
        idx = self._pick(n)
        repeats = int(n * repeat_fraction)
        if repeats and n > 1:
            idx[-repeats:] = idx[self.rng.integers(0, n - repeats, repeats)]
        ts = self._tick(n)
        if self.late_fraction:
            late = self.rng.random(n) < self.late_fraction
            ts = np.where(late, EPOCH_MS - 1_000 - self.rng.integers(0, 1_000_000, n), ts)
        take = pa.array(idx)
        return self._rows(self.keys.take(take), self.cities.take(take), ts)

    def deletes(self, n: int) -> pa.Table:
        """`n` existing trips to delete: uuid, city and the delete's event time."""
        idx = np.unique(self._pick(n))
        take = pa.array(idx)
        return pa.table({"uuid": self.keys.take(take), "city": self.cities.take(take),
                         "ts": pa.array(self._tick(len(idx)), pa.int64())})


def trips(n: int, seed: int = 42) -> pa.Table:
    """`n` inserted trips (shortcut)."""
    return TripsGenerator(seed).inserts(n)
