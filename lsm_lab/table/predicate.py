"""`KeyPredicate`: the part of a filter that is about the record key, in a form that prunes.

    [("uuid", "in", ["a", "c"]), ("fare", ">", 10)]     a read filter (conjunctive tuples)
        │ key_predicate(config, schema, filter)
        ▼
    KeyPredicate(keys=("a", "c"))                         what pruning can use; "fare" stays for later
        │ keys_between(file min, file max)   overlaps(row-group min, max)   mask(key chunk)
        ▼
    files, row groups and rows that can hold a wanted key

A predicate is a sorted set of keys, or a range `[lo, hi]` (either end open,
inclusive or not), or a set restricted to a range (folded into the set).  Keys
compare as Python strings, which is the UTF-8 byte order of lsm_lab's sorted
files and of Parquet's statistics for strings.

Only conditions that *must* hold for every returned row become a predicate
(conjuncts of the filter), so rows outside it would be filtered out after the
merge anyway: pruning on it can never change a result.  Conditions on the key
*fields* (not `_hoodie_record_key`) are used only on tables lsm_lab created,
whose record keys it generated from those fields itself (`records.record_keys`).

Simplified compared with Apache Hudi: Hudi's data skipping translates Spark
filter expressions against column statistics in the metadata table; lsm_lab
understands `(column, op, value)` tuples on the record key only.

Taught in: notebooks/08_point_lookups.ipynb
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lsm_lab.merge import records
from lsm_lab.merge.records import RECORD_KEY

#: What `read(filter=...)` takes: a pyarrow compute expression, or Hudi/pyarrow-style (column, op, value)
#: tuples — a list of them is a conjunction, a list of such lists a disjunction (`pq.filters_to_expression`).
FilterTuple: TypeAlias = tuple[str, str, Any]
FilterLike: TypeAlias = "pc.Expression | Sequence[FilterTuple] | Sequence[Sequence[FilterTuple]]"


@dataclass(frozen=True)
class KeyPredicate:
    """A condition on the record key: a set of keys, or a range, or both (folded into the set).

    `keys` is sorted and unique (None = any key in the range).  `lo`/`hi` bound
    the range (None = unbounded).  Keys compare as Python strings, which is the
    UTF-8 byte order of the files and of Parquet statistics.
    """

    keys: tuple[str, ...] | None = None
    lo: str | None = None
    lo_inclusive: bool = True
    hi: str | None = None
    hi_inclusive: bool = True

    @classmethod
    def of_keys(cls, keys: Iterable[str]) -> KeyPredicate:
        return cls(keys=tuple(sorted(set(keys))))

    @property
    def is_empty(self) -> bool:
        if self.keys is not None:
            return len(self.keys) == 0
        if self.lo is not None and self.hi is not None:
            return self.lo > self.hi or (self.lo == self.hi and not (self.lo_inclusive and self.hi_inclusive))
        return False

    def in_range(self, key: str) -> bool:
        if self.lo is not None and (key < self.lo or (key == self.lo and not self.lo_inclusive)):
            return False
        return not (self.hi is not None and (key > self.hi or (key == self.hi and not self.hi_inclusive)))

    def normalised(self) -> KeyPredicate:
        """Fold the range into the key set when there is one."""
        if self.keys is None:
            return self
        return KeyPredicate(keys=tuple(k for k in self.keys if self.in_range(k)))

    def keys_between(self, lo: str | None, hi: str | None) -> tuple[int, int]:
        """Index range [a, b) of `keys` inside [lo, hi] (None bounds are open)."""
        assert self.keys is not None
        a = 0 if lo is None else bisect.bisect_left(self.keys, lo)
        b = len(self.keys) if hi is None else bisect.bisect_right(self.keys, hi)
        return a, b

    def overlaps(self, lo: str | None, hi: str | None) -> bool:
        """Can a key in [lo, hi] satisfy the range part?"""
        if self.lo is not None and hi is not None and (hi < self.lo or (hi == self.lo and not self.lo_inclusive)):
            return False
        return not (self.hi is not None and lo is not None and (lo > self.hi or (lo == self.hi and not self.hi_inclusive)))

    def mask(self, keys: pa.Array) -> np.ndarray:
        """Rows of `keys` that satisfy the predicate (vectorised)."""
        n = len(keys)
        if self.keys is not None:
            m = pc.is_in(keys, value_set=pa.array(self.keys, pa.string()))
        else:
            m = pa.array(np.ones(n, dtype=bool))
            if self.lo is not None:
                m = pc.and_(m, (pc.greater_equal if self.lo_inclusive else pc.greater)(keys, self.lo))
            if self.hi is not None:
                m = pc.and_(m, (pc.less_equal if self.hi_inclusive else pc.less)(keys, self.hi))
        return np.asarray(m.fill_null(False), dtype=bool)


def key_predicate(config: Any, schema: pa.Schema, filter: FilterLike | None) -> KeyPredicate | None:
    """The record-key part of a conjunctive `(column, op, value)` filter, or None when it has none.

    Understood: `_hoodie_record_key` with `=`/`==`/`in`/`<`/`<=`/`>`/`>=`; and on tables
    lsm_lab created (whose keys it generated), the record key field(s) themselves:
    `=`/`in` on every key field (composite keys become `f1:v1,f2:v2`), and ranges on a
    single string key field.  Anything else (`!=`, `not in`, nulls, type mismatches)
    is ignored: it cannot prune, and the filter still applies after the merge.
    """
    if not (isinstance(filter, list) and filter and all(isinstance(t, tuple) and len(t) == 3 for t in filter)):
        return None
    own_keys = config.props.get("lsm_lab.created") == "true"
    key_fields = tuple(config.record_key)
    sets: list[set[str]] = []
    lo: tuple[str, bool] | None = None
    hi: tuple[str, bool] | None = None
    per_field: dict[str, list[Any]] = {}
    for col, op, value in filter:
        op = str(op).lower()
        is_key_col = col == RECORD_KEY
        single_string_field = (own_keys and len(key_fields) == 1 and col == key_fields[0]
                               and col in schema.names and pa.types.is_string(schema.field(col).type))
        if is_key_col or single_string_field:
            if op in ("=", "==") and isinstance(value, str):
                sets.append({value})
                continue
            if op == "in" and _all_str(value):
                sets.append(set(value))
                continue
            if op in ("<", "<=", ">", ">=") and isinstance(value, str):
                if op in ("<", "<="):
                    cand = (value, op == "<=")
                    if hi is None or cand[0] < hi[0] or (cand[0] == hi[0] and not cand[1]):
                        hi = cand
                else:
                    cand = (value, op == ">=")
                    if lo is None or cand[0] > lo[0] or (cand[0] == lo[0] and not cand[1]):
                        lo = cand
                continue
            continue
        if own_keys and col in key_fields and col in schema.names and op in ("=", "==", "in"):
            values = list(value) if op == "in" and isinstance(value, (list, tuple, set, frozenset)) else [value]
            if op != "in" and isinstance(value, (list, tuple, set, frozenset)):
                continue
            if any(v is None for v in values):
                continue
            try:
                typed = pa.array(values, type=schema.field(col).type)
            except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError, OverflowError):
                continue
            prev = per_field.get(col)
            vals = typed.to_pylist()
            per_field[col] = vals if prev is None else [v for v in prev if v in vals]
    if per_field and len(key_fields) > 1 and all(f in per_field for f in key_fields):
        combos = 1
        for f in key_fields:
            combos *= max(1, len(per_field[f]))
        if combos <= 100_000:
            sets.append(_composite_keys(key_fields, per_field, schema))
    elif per_field and len(key_fields) == 1 and key_fields[0] in per_field:
        f = key_fields[0]
        tbl = pa.table({f: pa.array(per_field[f], type=schema.field(f).type)})
        sets.append(set(records.record_keys(tbl, [f]).to_pylist()) if tbl.num_rows else set())
    if not sets and lo is None and hi is None:
        return None
    keys: tuple[str, ...] | None = None
    if sets:
        acc = set.intersection(*sets)
        keys = tuple(sorted(acc))
    pred = KeyPredicate(keys=keys, lo=lo[0] if lo else None, lo_inclusive=lo[1] if lo else True,
                        hi=hi[0] if hi else None, hi_inclusive=hi[1] if hi else True)
    return pred.normalised()


def _all_str(value: Any) -> bool:
    return isinstance(value, (list, tuple, set, frozenset)) and all(isinstance(v, str) for v in value)


def _composite_keys(fields_: Sequence[str], per_field: dict[str, list[Any]], schema: pa.Schema) -> set[str]:
    grids = np.meshgrid(*[np.arange(len(per_field[f])) for f in fields_], indexing="ij")
    cols = {}
    for f, g in zip(fields_, grids):
        values = pa.array(per_field[f], type=schema.field(f).type)
        cols[f] = values.take(pa.array(g.ravel()))
    tbl = pa.table(cols)
    if tbl.num_rows == 0:
        return set()
    return set(records.record_keys(tbl, list(fields_)).to_pylist())


__all__ = ["KeyPredicate", "key_predicate"]
