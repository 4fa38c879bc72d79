"""Schema evolution on write, by Hudi's rules: which batch schemas a table accepts, and the casts on read.

A write hands in a batch whose schema may differ from the table's.  Column by
column (by name, nested struct fields too):

    table column      batch column        table schema after the write
    ────────────────  ──────────────────  ─────────────────────────────────────────────
    (none)            x: T                x: T added at the end (nullable)
    x: T (nullable)   (none)              x: T, the batch's rows get null
    x: T (required)   (none)              SchemaError ("a required column cannot be left out")
    x: int            x: long             x: long  (a promotion: older files are cast on read)
    x: long           x: int              x: long  (the batch is cast up, the table keeps its type)
    x: long           x: int, key column  x: long  (a key/partition/ordering column never changes type)
    x: int, key       x: long             SchemaError (keys, partition paths and ordering values would change)
    x: long           x: string ... etc.  see PROMOTIONS; anything else is a SchemaError naming the rule

    PROMOTIONS (old → new):  int → long, float, double, string
                             long → float, double, string
                             float → double, string
                             double → string
                             string ↔ bytes
    (int = Arrow int8/int16/int32 and uint8/uint16, all Avro `int`; long = int64 and uint32.)

Promotions apply inside structs, list elements and map values; a struct may gain
fields at its end.  On read every file (base file, native log, v1 Avro log
block) is cast to the schema the read uses (`cast_to`), so a slice whose files
were written under different schemas merges in one schema.  A widening that
loses precision (a long beyond 2^53 read as double) rounds as Java does, rather
than failing.

Simplified compared with Apache Hudi: upstream decides the writer schema in
`HoodieSchemaUtils.deduceWriterSchema` (hudi-spark-common), with the table's
wider type kept for a narrower batch column (`AvroSchemaEvolutionUtils
.reconcileSchemaRequirements`) and nulls for a left-out column only when
`hoodie.write.set.null.for.missing.columns=true`; lsm_lab always fills nulls.
Upstream's schema-on-read DDL (`SchemaChangeUtils.isTypeUpdateAllow`) also allows
decimals, date ↔ string and string → decimal; lsm_lab does not.  A number cast to
text uses Arrow's formatting (1.0 → "1", 1e20 → "1e+20"), not Java's ("1.0", "1.0E20").

Taught in: no chapter (a write-path rule set; docs/FORMAT.md "Schema evolution" explains it)
"""

from __future__ import annotations

from collections.abc import Collection

import pyarrow as pa
import pyarrow.compute as pc

from lsm_lab.errors import SchemaError

RULE = ("Hudi's schema evolution on write allows new nullable columns at the end, leaving out nullable columns, "
        "and the promotions int → long/float/double/string, long → float/double/string, float → double/string, "
        "double → string, string ↔ bytes")

# the promotion classes, by Avro's primitive types
_INT = "int"
_LONG = "long"
_FLOAT = "float"
_DOUBLE = "double"
_STRING = "string"
_BYTES = "bytes"

#: old class → the classes it may be promoted to
PROMOTIONS: dict[str, frozenset[str]] = {
    _INT: frozenset({_LONG, _FLOAT, _DOUBLE, _STRING}),
    _LONG: frozenset({_FLOAT, _DOUBLE, _STRING}),
    _FLOAT: frozenset({_DOUBLE, _STRING}),
    _DOUBLE: frozenset({_STRING}),
    _STRING: frozenset({_BYTES}),
    _BYTES: frozenset({_STRING}),
}
_INT_RANK = {pa.int8(): 0, pa.uint8(): 0, pa.int16(): 1, pa.uint16(): 1, pa.int32(): 2}


def type_class(t: pa.DataType) -> str | None:
    """The Avro primitive a type is stored as, for the promotion rules (None: not promotable)."""
    if t in _INT_RANK:
        return _INT
    if t in (pa.int64(), pa.uint32()):
        return _LONG
    if t == pa.float32():
        return _FLOAT
    if t == pa.float64():
        return _DOUBLE
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return _STRING
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return _BYTES
    return None


def _widens(old: pa.DataType, new: pa.DataType) -> bool:
    """`old` values fit `new` by one of the promotions (or a wider Arrow int of the same Avro `int`)."""
    a, b = type_class(old), type_class(new)
    if a is None or b is None:
        return False
    if a == b == _INT:
        return _INT_RANK[old] <= _INT_RANK[new] and not (pa.types.is_unsigned_integer(new)
                                                         and pa.types.is_signed_integer(old))
    return b in PROMOTIONS.get(a, frozenset())


def _struct_fields(t: pa.StructType) -> list[pa.Field]:
    return [t.field(i) for i in range(t.num_fields)]


def _list_like(t: pa.DataType) -> bool:
    return bool(pa.types.is_list(t) or pa.types.is_large_list(t))


def evolve_type(old: pa.DataType, new: pa.DataType, path: str, *, fixed: bool = False) -> pa.DataType:
    """The column's type after a batch of type `new` is written to a column of type `old` (SchemaError if
    no rule allows it).  `fixed`: a key, partition or ordering column, whose type never changes."""
    if old == new or pa.types.is_null(new):
        return old
    if pa.types.is_null(old):  # a column that held only nulls so far has no type yet: the first values give it one
        return new
    if pa.types.is_struct(old) and pa.types.is_struct(new):
        return _evolve_struct(old, new, path)
    if _list_like(old) and _list_like(new) and pa.types.is_large_list(old) == pa.types.is_large_list(new):
        item = evolve_type(old.value_type, new.value_type, f"{path}.element")
        return pa.large_list(old.value_field.with_type(item)) if pa.types.is_large_list(old) \
            else pa.list_(old.value_field.with_type(item))
    if pa.types.is_map(old) and pa.types.is_map(new):
        if old.key_type != new.key_type:
            raise SchemaError(f"column '{path}': the map's key type changes from {old.key_type} to {new.key_type}; "
                              f"map keys cannot change type ({RULE})")
        item = evolve_type(old.item_type, new.item_type, f"{path}.value")
        return pa.map_(old.key_field, old.item_field.with_type(item))
    if _widens(new, old):  # a narrower batch column: cast up, the table keeps its type
        return old
    if _widens(old, new):
        if fixed:
            raise SchemaError(f"column '{path}' changes type from {old} to {new}: it is a record key, partition or "
                              "ordering column, whose type cannot change (its values name records, folders or "
                              "versions); Hudi does not evolve them either")
        return new
    raise SchemaError(f"column '{path}' changes type from {old} to {new}; {RULE}")


def _evolve_struct(old: pa.StructType, new: pa.StructType, path: str) -> pa.StructType:
    incoming = {f.name: f for f in _struct_fields(new)}
    out = []
    for f in _struct_fields(old):
        if f.name in incoming:
            out.append(f.with_type(evolve_type(f.type, incoming[f.name].type, f"{path}.{f.name}")))
        elif not f.nullable:
            raise SchemaError(f"field '{path}.{f.name}' is required (not nullable) and the data leaves it out; "
                              "only a nullable field can be left out (it is written as null)")
        else:
            out.append(f)
    known = {f.name for f in out}
    out += [f.with_nullable(True) for f in _struct_fields(new) if f.name not in known]
    return pa.struct(out)


def evolve_schema(current: pa.Schema | None, incoming: pa.Schema, *, partial: bool = False,
                  fixed: Collection[str] = ()) -> pa.Schema:
    """The table schema after accepting a batch of schema `incoming` (SchemaError naming the column and the
    rule otherwise).  New columns go at the end, nullable; a left-out nullable column is kept (the batch's
    rows get null).  `partial=True` (deletes): the batch may carry only some columns and adds none.
    `fixed`: the key, partition and ordering columns, whose type may not change."""
    if current is None:
        return pa.schema([pa.field(f.name, f.type, True) for f in incoming])
    fields = list(current)
    by_name = {f.name: f for f in incoming}
    for i, f in enumerate(fields):
        if f.name in by_name:
            fields[i] = f.with_type(evolve_type(f.type, by_name[f.name].type, f.name, fixed=f.name in fixed))
        elif not partial and not f.nullable:
            raise SchemaError(f"the data leaves out column '{f.name}', which is required (not nullable) in the "
                              "table schema; only a nullable column can be left out (it is written as null)")
    if not partial:
        fields += [pa.field(f.name, f.type, True) for f in incoming if f.name not in current.names]
    return pa.schema(fields, metadata=current.metadata)


def is_promotion(old: pa.DataType, new: pa.DataType) -> bool:
    """Whether reading a column stored as `old` as `new` is an evolution step (a promotion, added struct
    fields, ...) rather than a narrowing; such a cast may round (long → double) instead of failing."""
    try:
        return bool(evolve_type(old, new, "") == new and old != new)
    except SchemaError:
        return False


def cast_to(col: pa.ChunkedArray | pa.Array, to: pa.DataType) -> pa.ChunkedArray | pa.Array:
    """`col` read as `to`: Arrow's safe cast, or for a promotion that loses precision (a long beyond 2^53
    as a double) the rounding cast Hudi's Java readers make.  Raises Arrow's error when neither applies
    (a narrowing whose values do not fit: the caller names the file)."""
    try:
        return pc.cast(col, to)
    except pa.ArrowInvalid:
        if is_promotion(col.type, to):
            return pc.cast(col, to, safe=False)
        raise


__all__ = ["PROMOTIONS", "RULE", "cast_to", "evolve_schema", "evolve_type", "is_promotion", "type_class"]
