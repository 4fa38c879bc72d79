#!/usr/bin/env python
"""What the metadata table's record index costs a writer at scale: one insert of N keys, with and without it.

    python benchmarks/bench_mdt_index.py --keys 1000000 --partitions 4 --repeat 2

Three version-9 COW tables (default layout) get the same bulk insert of `--keys` rows: one without a
metadata table (the baseline), one keeping upstream's default MDT partitions (`files`, `column_stats`,
`partition_stats`), one keeping those and `record_index`.  Reported, each as a ratio to the baseline
measured in the same run: the insert's wall time; then, for the record-index table, the time of the
MDT deltacommit's record-index part alone (`_record_index_cells` + sharding + HFile bytes: the keys
read back from the written files with Arrow, `mapRecordKeyToFileGroupIndex` in NumPy, one Avro value
per file group, the per-cell HFile encoding) and a full `metadata_table().record_keys()` read.
Report `uptime` next to the times: the machine is shared.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pyarrow as pa

import lsm_lab
from lsm_lab.services import mdt_write


def _batch(n: int, partitions: int) -> pa.Table:
    import numpy as np
    ids = np.arange(n)
    return pa.table({"id": pa.array([f"k{i:09d}" for i in range(n)]),
                     "p": pa.array([f"p{i}" for i in (ids % partitions)]),
                     "ts": pa.array(np.ones(n, dtype=np.int64)), "v": pa.array(ids.astype(np.float64))})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=2, help="rounds; each figure is the best of them")
    args = ap.parse_args()
    batch = _batch(args.keys, args.partitions)
    root = Path(tempfile.mkdtemp(prefix="bench_mdt_index_"))
    try:
        times: dict[str, float] = {}
        configs: tuple[tuple[str, dict[str, str]], ...] = (("no MDT", {}), ("MDT defaults", {"hoodie.metadata.enable": "true"}),
                   ("MDT + record index", {"hoodie.metadata.enable": "true",
                                           "hoodie.metadata.record.index.enable": "true"}))
        for round_ in range(args.repeat):  # the configurations alternate, so load hits them alike; best of the rounds
            for name, props in configs:
                path = root / f"{name.replace(' ', '_')}_{round_}"
                t = lsm_lab.create_table(path, name="b", record_key="id", ordering_field="ts", partition_by="p",
                                         layout="default", table_version=9, table_type="COPY_ON_WRITE",
                                         properties=props)
                t.insert(batch.slice(0, 10))  # the MDT is initialised by a first small write
                start = time.perf_counter()
                t.insert(batch.slice(10))
                times[name] = min(times.get(name, float("inf")), time.perf_counter() - start)
        base = times["no MDT"]
        for name, s in times.items():
            print(f"insert of {args.keys - 10:,} keys  {name:20s} {s:8.2f} s  ratio {s / base:5.2f}")
        path = root / "MDT_+_record_index_0"
        t = lsm_lab.open_table(path)
        last = [i for i in t.instants() if i.is_completed and i.action == "commit"][-1]
        meta = t.instant_metadata(last)
        config = t.config
        start = time.perf_counter()
        cells, _gone = mdt_write._record_index_cells(path, config, last, meta)
        spec = mdt_write._spec(path, config, "record_index")
        per: dict[str, dict[str, bytes]] = {}
        mdt_write._shard(spec, config, cells, per)
        size = sum(len(mdt_write._hfile(c, base=False)[0]) for c in per.values())
        ri = time.perf_counter() - start
        print(f"record-index cells of that insert: {len(cells):,} keys in {ri:.2f} s "
              f"({ri / base:.2f} of the baseline insert), {size / 1e6:.1f} MB of HFile, {len(per)} file groups")
        start = time.perf_counter()
        n = len(lsm_lab.open_table(path).metadata_table().record_keys())  # type: ignore[union-attr]
        print(f"record_keys(): {n:,} keys read back in {time.perf_counter() - start:.2f} s")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
