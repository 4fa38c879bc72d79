"""Benchmark: point lookups on the same data as an `lsm_tree` table and a `default` table.

Both tables get the same trips (`TripsGenerator`), partitioned by city, event-time
ordered on `ts`, MERGE_ON_READ:

    bulk_insert N rows                       → one base file per file group
    `logs` rounds of upsert (updates + new)   → one data log per touched group per round
    one delete round                          → one delete log per touched group

so every file group has a base and several logs.  The `lsm_tree` table keeps
every file sorted by key in buckets (filegroup/index.py's hash of the key mod B), in row groups of 1 MiB;
the `default` table writes groups of at most 1M records found by key lookup
(new keys of an upsert go to new groups), 64k-row row groups, no sorted flag.
lsm_lab's writer de-duplicates every batch by sorting it, so its `default`
files happen to be in key order anyway and row-group statistics prune them
well; Apache Hudi's default layout writes rows in arrival order.  The third
table, `default_unsorted`, is the `default` table with the rows of every file
shuffled (same files, names, footers and row-group sizes): the unsorted layout
the comparison is about.

Then random point lookups, one key per call, of keys that are present, deleted,
and absent (never written), through one prepared `KeyLookup` per table (the
timeline and folder listed once, as a serving process would), each with its own
`LookupStats`:

    layout             mode              what the reader may use
    lsm_tree           lookup            bucket, key index (range + bloom per file), then the footers of the
                                         files it cannot rule out: range + bloom, row-group stats, binary search
    lsm_tree           no_index          the same without the key index: every candidate file's footer
    lsm_tree           no_binary_search  lookup, but scan the key chunk instead of bisecting
    default(_unsorted) lookup            key index, footer range + bloom, row-group stats (no sorted flag)
    default(_unsorted) no_index          the same without the key index
    default(_unsorted) no_bloom          row-group stats only: what a Parquet reader with a key filter does
    both               index_load        lookup, with the key index's sidecars read and decoded again inside
                                         each timed lookup (cold only)

`cache=warm`: footers (and their blooms) of the immutable files are cached
after a warm-up pass; `cache=cold`: the footer cache is cleared before every
lookup (the OS page cache stays warm either way: this measures CPU and bytes
fetched, not disk latency).  What "cold" includes, precisely: every timed
lookup reads the footers it needs from the files again; what a prepared
`KeyLookup` holds per snapshot — the file slices (timeline and folder listing)
and, in the `lookup` and `no_*` modes, the key index's sidecars — is loaded once
before timing, as a serving process would; the `index_load` mode also clears
the process's sidecar cache and loads the index inside each timed lookup, its
sidecar bytes counted in `bytes_read`, so that no figure hides the index's cost.  `seconds`, `bytes_read` (footer bytes read plus
compressed column chunks read, as counted by the reader) and `files_opened`
(files whose data pages were read) are medians per lookup.  The lookup results
of both tables are checked to agree on the user columns.

`--cumulative` instead measures RFC-06's question on bloom filters in memory:
per-file filters against one cumulative filter per file slice (rebuilt on every
commit, or carried forward by OR-ing each log's keys into the previous one),
and per-file key ranges against a cumulative range (`cumulative_tradeoff`).

Simplified compared with a real benchmark harness: one process, one machine;
the tables are built once per `--dir` and reused when the parameters match.

Taught in: notebooks/08_point_lookups.ipynb
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

import lsm_lab
from lsm_lab.errors import LsmLabError
from lsm_lab.filegroup import fsview
from lsm_lab.format import keyindex, parquet_footer, parquet_read, parquet_write, positions
from lsm_lab.format import log_v2 as v2
from lsm_lab.format.bloom import BloomFilter, key_hashes
from lsm_lab.lab.datagen import TripsGenerator
from lsm_lab.table.lookup import LookupStats, clear_footer_cache, open_lookup
from lsm_lab.timeline import metadata

LAYOUTS = ("lsm_tree", "default", "default_unsorted")
WRITTEN = ("lsm_tree", "default")
MARKER = "lookup_bench.json"
USER_COLUMNS = ["uuid", "ts", "rider", "driver", "fare", "begin_lat", "begin_lon", "end_lat", "end_lon", "city"]


@dataclass(frozen=True)
class BenchParams:
    rows: int = 1_000_000
    logs: int = 4
    update_fraction: float = 0.01  # of `rows`, per upsert round
    insert_fraction: float = 0.002  # new keys per upsert round, of `rows`
    delete_fraction: float = 0.002
    buckets: int = 4
    seed: int = 42


# --------------------------------------------------------------------------- building the tables
def build_tables(root: Path, params: BenchParams, *, log: Any = print) -> dict[str, Any]:
    """Create (or reuse) both tables under `root`; returns the marker: params and key samples."""
    marker = root / MARKER
    if marker.exists():
        saved = json.loads(marker.read_text())
        if saved.get("params") == asdict(params):
            log(f"reusing the tables in {root}")
            if not (root / "default_unsorted").exists():
                shuffled_copy(root / "default", root / "default_unsorted", seed=params.seed)
            return cast("dict[str, Any]", saved)
        raise SystemExit(f"{root} holds benchmark tables built with other parameters; use another --dir")
    root.mkdir(parents=True, exist_ok=True)
    gen = TripsGenerator(params.seed)
    batches: list[tuple[str, pa.Table]] = [("bulk_insert", gen.inserts(params.rows))]
    for _ in range(params.logs):
        upd = gen.updates(max(1, int(params.rows * params.update_fraction)))
        new = gen.inserts(max(0, int(params.rows * params.insert_fraction)))
        batches.append(("upsert", pa.concat_tables([upd, new])))
    deletes = gen.deletes(max(1, int(params.rows * params.delete_fraction)))
    batches.append(("delete", deletes))
    deleted = set(deletes.column("uuid").to_pylist())
    rng = np.random.default_rng(params.seed + 1)
    all_keys = gen.keys
    present = [k for k in all_keys.take(pa.array(rng.integers(0, len(all_keys), 4000))).to_pylist()
               if k not in deleted]
    absent = TripsGenerator(params.seed + 1_000_003).inserts(2000).column("uuid").to_pylist()
    timings: dict[str, float] = {}
    for layout in WRITTEN:
        path = root / layout
        if path.exists():
            shutil.rmtree(path)
        table = lsm_lab.create_table(path, name=f"trips_{layout}", record_key="uuid", partition_by="city",
                                     ordering_field="ts", layout=layout, num_buckets=params.buckets)
        t0 = time.perf_counter()
        for op, batch in batches:
            t1 = time.perf_counter()
            getattr(table, op)(batch)
            log(f"  {layout}: {op} {batch.num_rows:,} rows in {time.perf_counter() - t1:.1f} s")
        timings[layout] = time.perf_counter() - t0
    t0 = time.perf_counter()
    shuffled_copy(root / "default", root / "default_unsorted", seed=params.seed)
    timings["default_unsorted"] = time.perf_counter() - t0
    log(f"  default_unsorted: shuffled copy in {timings['default_unsorted']:.1f} s")
    saved = {"params": asdict(params), "present": present[:2000], "deleted": sorted(deleted)[:500],
             "absent": absent, "build_seconds": timings}
    marker.write_text(json.dumps(saved))
    return saved


def _without_positions(kv: dict[str, str]) -> dict[str, str]:
    """A log footer without record positions: they count rows of the base file, which the shuffle reorders."""
    dropped = (positions.RECORD_POSITIONS, positions.BASE_FILE_INSTANT)
    out = {k: v for k, v in kv.items() if k not in {v2.KEY_METADATA_PREFIX + d for d in dropped}}
    if v2.KEY_METADATA in out:
        header = {k: v for k, v in json.loads(out[v2.KEY_METADATA]).items() if k not in dropped}
        out[v2.KEY_METADATA] = json.dumps(header)
    return out


def shuffled_copy(src: str | os.PathLike[str], dst: str | os.PathLike[str], *, seed: int = 0) -> None:
    """Copy a table, rewriting every data file with its rows in random order.

    Footers are kept except what the new order makes false: the sortedness and
    key-range facts, the bloom (rebuilt by the writer) and the logs' record
    positions (the base rows they point at have moved; the reader then merges by key).
    """
    src, dst = Path(src), Path(dst)
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst)
    rng = np.random.default_rng(seed)
    for _, path, name in fsview.list_data_files(dst):
        md, footer = parquet_footer.read_footer(path)
        data = parquet_read.read_parquet(path)
        kv = {k: v for k, v in footer.items()
              if k not in (parquet_footer.KEY_MIN, parquet_footer.KEY_MAX, parquet_footer.KEY_SORTED, parquet_footer.KEY_BLOOM)}
        kv = _without_positions(kv)
        rows = data.take(pa.array(rng.permutation(data.num_rows))).replace_schema_metadata(None)
        stat = path.stat()
        tmp = path.with_name(f".{path.name}.shuffled")
        key = v2.delete_key_column(rows.schema) if name.is_delete else parquet_footer.RECORD_KEY
        groups = md.row_group(0).num_rows if md.num_row_groups else parquet_write.DEFAULT_ROW_GROUP_ROWS
        parquet_write.write_parquet(tmp, rows, metadata=kv, key_column=key, row_group_size=groups)
        tmp.replace(path)
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    _recommit_sizes(dst)
    # the copy's key index: same keys per file (same ranges and blooms), new sizes; rebuilt from the new footers
    keyindex.index_files(dst, [(p, path) for p, path, _ in fsview.list_data_files(dst)])


def _recommit_sizes(root: Path) -> None:
    """Record the rewritten files' sizes in the copy's commit metadata (readers check a file's size against
    its commit: `layout.fsview` rule 7), keeping each instant file's encoding (JSON or Avro)."""
    sizes = {(p, path.name): path.stat().st_size for p, path, _ in fsview.list_data_files(root)}
    for f in sorted((root / ".hoodie" / "timeline").glob("*")):
        if not f.is_file() or "." not in f.name or f.name.endswith((".requested", ".inflight")):
            continue
        data = f.read_bytes()
        try:
            content = metadata.decode_instant_content(data, path=str(f))
        except LsmLabError:
            continue
        changed = False
        for partition, stats in (content.get("partitionToWriteStats") or {}).items():
            for stat in stats or []:
                rel = str(stat.get("path") or "")
                size = sizes.get((partition, rel.rsplit("/", 1)[-1]))
                if size is not None and stat.get("fileSizeInBytes") != size:
                    stat["fileSizeInBytes"] = size
                    changed = True
        if changed:
            avro = metadata.encode_avro_commit_metadata(content) if not data.lstrip().startswith(b"{") else None
            f.write_bytes(avro if avro is not None else metadata.encode_json(content))


# --------------------------------------------------------------------------- measuring
def _median(rows: list[dict[str, Any]], name: str) -> float:
    return float(statistics.median(r[name] for r in rows)) if rows else float("nan")


CONTENDERS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("lsm_tree", "lookup", {}),
    ("lsm_tree", "index_load", {}),
    ("lsm_tree", "no_index", {"use_index": False}),
    ("lsm_tree", "no_binary_search", {"use_binary_search": False}),
    ("default", "lookup", {}),
    ("default", "no_bloom", {"use_bloom": False}),
    ("default_unsorted", "lookup", {}),
    ("default_unsorted", "index_load", {}),
    ("default_unsorted", "no_index", {"use_index": False}),
    ("default_unsorted", "no_bloom", {"use_bloom": False}),
)
COLD_MODES = ("lookup", "index_load", "no_index")  # cold: footers dominate; measured for the full lookups only
WARM_ONLY_NOT = ("index_load",)  # a warm index_load is the lookup mode


def run_lookups(root: Path, saved: dict[str, Any], *, lookups: int, log: Any = print) -> list[dict[str, Any]]:
    """Time random lookups on every table; one JSON-able record per (layout, mode, cache, keys).

    Contenders are interleaved key by key (key 1 on every contender, then key 2,
    ...), so that a busy machine slows them alike and their ratios stay fair.
    """
    rng = np.random.default_rng(7)
    samples = {
        "present": [saved["present"][i] for i in rng.permutation(len(saved["present"]))[:lookups]],
        "deleted": [saved["deleted"][i] for i in rng.permutation(len(saved["deleted"]))[:max(1, lookups // 4)]],
        "absent": [saved["absent"][i] for i in rng.permutation(len(saved["absent"]))[:lookups]],
    }
    rows = saved["params"]["rows"]
    tables = {layout: lsm_lab.open_table(root / layout) for layout in LAYOUTS if (root / layout).exists()}
    readers = {layout: open_lookup(t) for layout, t in tables.items()}
    shape = {layout: (len(kl.slices), sum(len(fs.files) for fs in kl.slices)) for layout, kl in readers.items()}
    for layout, (slices, files) in shape.items():
        log(f"{layout}: {slices} file slices, {files} files")
    contenders = [c for c in CONTENDERS if c[0] in readers]
    measured: dict[tuple[str, str, str, str], list[dict[str, Any]]] = {}
    answers: dict[str, dict[str, list[Any]]] = {}
    clear_footer_cache()
    for layout, _, options in contenders:  # warm-up: footers, blooms, page cache
        for key in samples["present"][:3] + samples["absent"][:3]:
            readers[layout].lookup([key], **options)
    for cache in ("warm", "cold"):
        for kind, keys in samples.items():
            if cache == "cold" and kind == "deleted":
                continue
            for key in keys:
                for layout, mode, options in contenders:
                    if (cache == "cold" and mode not in COLD_MODES) or (cache == "warm" and mode in WARM_ONLY_NOT):
                        continue
                    if cache == "cold":
                        clear_footer_cache()
                    if mode == "index_load":
                        keyindex.clear_index_cache()
                    st = LookupStats()
                    t0 = time.perf_counter()
                    if mode == "index_load":  # the key index's sidecars read and decoded inside the timing
                        readers[layout].load_index(st)
                    res = readers[layout].lookup([key], stats=st, **options)
                    dt = time.perf_counter() - t0
                    measured.setdefault((layout, mode, cache, kind), []).append({"seconds": dt, **st.as_dict(),
                                                                                "found": res.num_rows})
                    if mode == "lookup" and cache == "warm":
                        answers.setdefault(layout, {}).setdefault(kind, []).append(res)
    records: list[dict[str, Any]] = []
    for (layout, mode, cache, kind), ms in measured.items():
        rec = {"layout": layout, "mode": mode, "cache": cache, "keys": kind, "lookups": len(ms), "rows": rows,
               "file_slices": shape[layout][0], "files": shape[layout][1],
               "seconds": _median(ms, "seconds"), "bytes_read": _median(ms, "bytes_read"),
               "files_opened": _median(ms, "files_opened"), "row_groups_read": _median(ms, "row_groups_read"),
               "footers_read": _median(ms, "footers_read"), "files_pruned_bloom": _median(ms, "files_pruned_bloom"),
               "footers_skipped": _median(ms, "footers_skipped"),
               "seconds_mean": statistics.fmean(m["seconds"] for m in ms),
               "bytes_read_mean": statistics.fmean(m["bytes_read"] for m in ms),
               "found": sum(m["found"] for m in ms)}
        records.append(rec)
    records.sort(key=lambda r: (LAYOUTS.index(r["layout"]), r["mode"] != "lookup", r["mode"], r["cache"] != "warm",
                                list(samples).index(r["keys"])))
    for rec in records:
        log(_line(rec))
    # end to end: Table.lookup lists the timeline and the folder on every call
    for layout, table in tables.items():
        t_end = []
        for key in samples["present"][:20]:
            t0 = time.perf_counter()
            table.lookup(key)
            t_end.append(time.perf_counter() - t0)
        rec = {"layout": layout, "mode": "table_lookup", "cache": "warm", "keys": "present",
               "lookups": len(t_end), "rows": rows, "seconds": float(statistics.median(t_end))}
        records.append(rec)
        log(_line(rec))
    _check_agreement(answers)
    ratios = _ratios(records)
    for rec in ratios:
        log(_line(rec))
    return records + ratios


def _check_agreement(answers: dict[str, dict[str, list[Any]]]) -> None:
    """All tables hold the same data: their lookups must agree on the user columns."""
    if "lsm_tree" not in answers:
        return
    for other in [layout for layout in answers if layout != "lsm_tree"]:
        for kind in answers["lsm_tree"]:
            for a, b in zip(answers["lsm_tree"][kind], answers[other][kind]):
                cols = [c for c in USER_COLUMNS if c in a.column_names]
                if not a.select(cols).equals(b.select(cols)):
                    raise AssertionError(f"lsm_tree and {other} lookups disagree on {kind} keys:\n{a}\n{b}")
    for kind in answers["lsm_tree"]:
        for a in answers["lsm_tree"][kind]:
            if kind != "present" and a.num_rows:
                raise AssertionError(f"a {kind} key was found: {a}")
            if kind == "present" and a.num_rows != 1:
                raise AssertionError(f"a present key returned {a.num_rows} rows")


def _ratios(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    def find(layout: str, mode: str, cache: str, kind: str) -> dict[str, Any] | None:
        for r in records:
            if (r["layout"], r["mode"], r["cache"], r["keys"]) == (layout, mode, cache, kind):
                return r
        return None

    out = []
    for cache in ("warm", "cold"):
        for kind in ("present", "absent"):
            pairs = ([("lookup", o, m) for o in LAYOUTS[1:] for m in ("lookup", "no_bloom")]
                     + [(m, "default_unsorted", m) for m in ("index_load", "no_index")])
            for lsm_mode, other, base_mode in pairs:
                lsm = find("lsm_tree", lsm_mode, cache, kind)
                base = find(other, base_mode, cache, kind)
                if lsm is None or base is None:
                    continue
                label = f"lsm_tree/{other}({base_mode})" if lsm_mode == "lookup" else f"{lsm_mode}: lsm_tree/{other}"
                out.append({"layout": "ratio", "mode": label, "cache": cache,
                            "keys": kind, "rows": lsm["rows"],
                            "seconds": lsm["seconds"] / base["seconds"] if base["seconds"] else math.nan,
                            "bytes_read": lsm["bytes_read"] / base["bytes_read"] if base["bytes_read"] else math.nan,
                            "files_opened": (lsm["files_opened"] / base["files_opened"]
                                             if base["files_opened"] else math.nan)})
    return out


def _line(r: dict[str, Any]) -> str:
    if r["layout"] == "ratio":
        return (f"  ratio {r['mode']:<42} {r['cache']:<5} {r['keys']:<8} time x{r['seconds']:.4f}  "
                f"bytes x{r['bytes_read']:.4f}")
    if r["mode"] == "table_lookup":
        return f"  {r['layout']:<16} {r['mode']:<17} {'':<5} {r['keys']:<8} {r['seconds'] * 1e3:9.2f} ms"
    return (f"  {r['layout']:<16} {r['mode']:<17} {r['cache']:<5} {r['keys']:<8} {r['seconds'] * 1e3:9.2f} ms "
            f"{r['bytes_read'] / 1e6:9.3f} MB  files opened {r['files_opened']:.0f}  "
            f"row groups {r['row_groups_read']:.0f}  footers {r['footers_read']:.0f}"
            f" (skipped {r.get('footers_skipped', 0):.0f})")


# --------------------------------------------------------------------------- RFC-06: cumulative filters
def cumulative_tradeoff(*, base_keys: int = 1_000_000, log_keys: int = 20_000, logs: Sequence[int] = (1, 2, 4, 8, 16, 32),
                        new_fraction: float = 0.5, queries: int = 20_000, fpp: float = 0.01,
                        seed: int = 3) -> list[dict[str, Any]]:
    """Per-file bloom filters and ranges against cumulative ones per file slice, measured in memory.

    One file slice: a base of `base_keys` keys, then logs of `log_keys` keys each
    (`new_fraction` of them new keys, the rest updates of existing ones).  For
    each number of logs L, with absent and present query keys:

    per_file         one filter per file, sized for it: a lookup probes 1+L filters
                     and reads the files that answer "maybe"
    cumulative       one filter per slice rebuilt at each commit for all its keys:
                     one probe, but a "maybe" does not say which file, so all 1+L
                     are read; each commit hashes every key of the slice again
    carried          the previous commit's cumulative filter with the new log's
                     keys OR-ed in (no rebuild), sized once for the base: its
                     false-positive rate climbs with every new key

    and key ranges: per-file [min, max] against the slice's union, for random keys
    (uuids: every range spans the key space) and for keys that grow with time.
    """
    gen = TripsGenerator(seed)
    base = gen.inserts(base_keys).column("uuid").combine_chunks()
    absent = TripsGenerator(seed + 99).inserts(queries).column("uuid").combine_chunks()
    absent_h = key_hashes(absent)
    rng = np.random.default_rng(seed)
    records: list[dict[str, Any]] = []
    max_l = max(logs)
    log_arrays: list[pa.Array] = []
    known = base
    for _ in range(max_l):
        n_new = int(log_keys * new_fraction)
        upd = known.take(pa.array(rng.integers(0, len(known), log_keys - n_new)))
        new = gen.inserts(n_new).column("uuid").combine_chunks()
        log_arrays.append(pa.concat_arrays([upd, new]))
        known = pa.concat_arrays([known, new])
    files = [base, *log_arrays]
    per_file = [BloomFilter.build(f, fpp) for f in files]
    base_m, base_k = per_file[0].num_bits, per_file[0].num_probes
    carried = per_file[0]
    carried_by_l: dict[int, BloomFilter] = {}
    for i, arr in enumerate(log_arrays, start=1):
        carried = carried.union(BloomFilter.build(arr, fpp, num_bits=base_m, num_probes=base_k))
        carried_by_l[i] = carried
    # time-ordered keys for the range part: the base holds 0..B-1, log i holds updates plus keys above
    for L in logs:
        slice_files = files[: L + 1]
        distinct = pa.concat_arrays([base, *list(log_arrays[:L])]).unique()
        present = distinct.take(pa.array(rng.integers(0, len(distinct), queries)))
        present_h = key_hashes(present)
        members = [np.asarray(pc.is_in(present, value_set=f), dtype=bool) for f in slice_files]
        # per-file: files read = files whose filter says maybe
        pf_absent = sum(f.contains_hashes(*absent_h) for f in per_file[: L + 1])
        pf_present = sum(f.contains_hashes(*present_h) for f in per_file[: L + 1])
        truly = sum(members)
        t0 = time.perf_counter()
        cumulative = BloomFilter.build(distinct, fpp)
        rebuild_s = time.perf_counter() - t0
        cum_absent = cumulative.contains_hashes(*absent_h)
        car = carried_by_l[L]
        car_absent = car.contains_hashes(*absent_h)
        records.append({
            "logs": L, "files": L + 1, "distinct_keys": len(distinct),
            "per_file_probes": L + 1,
            "per_file_reads_absent": float(np.mean(pf_absent)),
            "per_file_reads_present": float(np.mean(pf_present)),
            "files_holding_present_key": float(np.mean(truly)),
            "per_file_filter_bytes": sum(len(f.bits) for f in per_file[: L + 1]),
            "per_file_keys_hashed_per_commit": log_keys,
            "cumulative_fpp": float(np.mean(cum_absent)),
            "cumulative_reads_absent": float(np.mean(cum_absent)) * (L + 1),
            "cumulative_reads_present": float(L + 1),
            "cumulative_filter_bytes": len(cumulative.bits),
            "cumulative_keys_hashed_per_commit": len(distinct),
            "cumulative_rebuild_seconds": rebuild_s,
            "carried_fpp": float(np.mean(car_absent)),
            "carried_reads_absent": float(np.mean(car_absent)) * (L + 1),
            "carried_filter_bytes": len(car.bits),
        })
    records.extend(_range_tradeoff(base_keys, log_keys, logs, new_fraction, queries, seed))
    return records


def _range_tradeoff(base_keys: int, log_keys: int, logs: Sequence[int], new_fraction: float, queries: int,
                    seed: int) -> list[dict[str, Any]]:
    """Fraction of files a key range check skips, per file versus one cumulative range per slice."""
    rng = np.random.default_rng(seed)
    out = []
    for kind in ("random", "time_ordered"):
        # keys as integers; random: uniform in [0, 2^40); time ordered: new keys above every older key
        if kind == "random":
            base = rng.integers(0, 1 << 40, base_keys)
        else:
            base = np.arange(base_keys)
        files = [base]
        top = int(base.max()) + 1
        for _ in range(max(logs)):
            n_new = int(log_keys * new_fraction)
            known = np.concatenate(files)
            upd = known[rng.integers(0, len(known), log_keys - n_new)]
            recent = known[-max(1, len(known) // 50):]  # updates to recent keys (for time-ordered data)
            if kind == "time_ordered":
                upd = recent[rng.integers(0, len(recent), log_keys - n_new)]
                new = np.arange(top, top + n_new)
                top += n_new
            else:
                new = rng.integers(0, 1 << 40, n_new)
            files.append(np.concatenate([upd, new]))
        for L in logs:
            sl = files[: L + 1]
            allk = np.concatenate(sl)
            probe = rng.integers(int(allk.min()), int(allk.max()) + 1, queries)  # lookups inside the slice's span
            ranges = [(int(f.min()), int(f.max())) for f in sl]
            per_file_skip = float(np.mean([np.mean((probe < lo) | (probe > hi)) for lo, hi in ranges]))
            lo, hi = int(allk.min()), int(allk.max())
            out.append({"range_keys": kind, "logs": L,
                        "per_file_fraction_of_files_skipped": per_file_skip,
                        "cumulative_fraction_of_files_skipped": float(np.mean((probe < lo) | (probe > hi)))})
    return out


# --------------------------------------------------------------------------- command line
def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rows", type=int, default=1_000_000, help="trips in each table (default 1000000)")
    p.add_argument("--lookups", type=int, default=100, help="lookups per key kind (default 100)")
    p.add_argument("--logs", type=int, default=4, help="upsert rounds, i.e. data logs per group (default 4)")
    p.add_argument("--buckets", type=int, default=4, help="buckets per partition of the lsm_tree table (default 4)")
    p.add_argument("--dir", help="folder for the two tables (kept and reused; default: a temporary folder)")
    p.add_argument("--json", metavar="OUT", help="write the records as JSON to OUT")
    p.add_argument("--cumulative", action="store_true",
                   help="measure RFC-06's cumulative bloom/range trade-off instead (in memory)")


def run(args: argparse.Namespace) -> int:
    if args.cumulative:
        records = cumulative_tradeoff()
        for r in records:
            print(json.dumps(r))
    else:
        params = BenchParams(rows=args.rows, logs=args.logs, buckets=args.buckets)
        tmp = None
        root = Path(args.dir) if args.dir else Path(tmp := tempfile.mkdtemp(prefix="lsm_lab_lookup_"))
        try:
            saved = build_tables(root, params)
            print(f"lookups: {args.lookups} per kind, {args.rows:,} rows, {args.logs} logs")
            records = run_lookups(root, saved, lookups=args.lookups)
        finally:
            if tmp:
                shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        Path(args.json).write_text(json.dumps(records, indent=1))
        print(f"{len(records)} records written to {args.json}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench_lookup", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
