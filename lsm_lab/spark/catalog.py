"""SQL `CREATE TABLE t (col type, ...) USING lsm_lab ...`: a catalog hook on the driver creates the table.

PySpark (4.3) never runs a Python data source when a table is created *with a column list*: the JVM's
`V2SessionCatalog.createTable` keeps the columns and calls `inferSchema` only for a table without them,
and every later `INSERT`/`SELECT` hands the writer and reader the catalog's columns and no option at all
(`PythonDataSourceV2.getTable` drops the table's properties).  So nothing on the executors can learn the
path.  The one place that sees the table being created is the driver: `register(spark)` adds a listener
to the session's external catalog (a py4j callback into this process), and the listener does what
Hudi's `CREATE TABLE` does (`CreateHoodieTableCommand`: create or validate the table at its location):

    CREATE TABLE trips (id STRING, city STRING, fare DOUBLE, ts BIGINT) USING lsm_lab
      OPTIONS (path '/data/trips', primaryKey 'id', preCombineField 'ts') PARTITIONED BY (city)
        │ JVM: ExternalCatalogWithListener.createTable ─► CreateTableEvent(db, trips)
        ▼ py4j callback, driver Python: CatalogHook.onEvent
    options = OPTIONS + TBLPROPERTIES (+ LOCATION, or the managed table's folder)
    no table at the path   ─► create_table(path, record_key, partition_by, ordering_field, table_type,
                               hoodie.table.create.schema = the columns)
    a table at the path    ─► its columns must be the declared ones, in Spark's types (else: an error)
    catalog schema         ─► the same columns, the first one carrying the path (datasource.py,
                               LOCATION_METADATA) or the error, which every INSERT/SELECT then raises

Option names: Hudi's SQL names (`HoodieOptionConfig`: `primaryKey`, `preCombineField`, `type` = cow | mor)
or lsm_lab's (`record_key`, `ordering_field`, `table_type`, `partition_by`, `layout`); `PARTITIONED BY`
gives the partition columns.  The catalog entry keeps the declared column order and lists no partition
column (the Python table reports none to Spark anyway; lsm_lab's `hoodie.properties` holds them), so
`CREATE TABLE ... PARTITIONED BY (...) AS SELECT` and positional `INSERT INTO t VALUES (...)` take the
columns as declared.  (A catalog whose `alterTable` keeps the schema — Hive's — gets the schema through
`alterTableSchema`, which wants the partition columns last, as for every Spark data source table.)

Simplified compared with Apache Hudi: Hudi's SQL runs in its own JVM catalog (`HoodieCatalog`) and fails
the `CREATE TABLE` statement itself; a catalog listener cannot fail the statement (Spark's `ListenerBus`
logs a listener's exception), so a refused table stays in the catalog, its error is logged on the driver
and raised, typed, by its first `INSERT`/`SELECT` — `DROP TABLE` it and create it again.  The hook needs
classic PySpark (py4j); under Spark Connect a table with a column list stays refused as before.  No
`CREATE TABLE ... AS SELECT`: its writer gets the query's schema, not the catalog's, so no path (the hook
has created the table by then; `INSERT INTO` it after a plain `CREATE TABLE`).  Hudi's
SQL defaults `type` to cow; lsm_lab keeps its own default (MERGE_ON_READ) when `type` is not given.

Taught in: no chapter (README, "Reading an lsm_lab table from other engines")
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pyspark.sql.types import StructField, StructType

from lsm_lab.api import create_table, open_table
from lsm_lab.avro_schema import arrow_to_avro_schema, avro_schema_json, hudi_record_names
from lsm_lab.errors import InputError, LsmLabError, SchemaError, TableNotFoundError
from lsm_lab.merge.records import META_COLUMNS
from lsm_lab.spark.jobs import arrow_schema_for, spark_schema

log = logging.getLogger("lsm_lab.spark")

#: the provider name a catalog table of lsm_lab carries (`USING lsm_lab`)
PROVIDER = "lsm_lab"
#: Hudi's SQL option names (apache/hudi `HoodieOptionConfig`) → lsm_lab's `create_table` arguments
HUDI_SQL_OPTIONS = {"primarykey": "record_key", "precombinefield": "ordering_field", "type": "table_type"}
#: Hudi's SQL values of `type`
HUDI_TABLE_TYPES = {"cow": "COPY_ON_WRITE", "mor": "MERGE_ON_READ"}
#: the `create_table` arguments a CREATE TABLE may give as options
CREATE_OPTIONS = ("record_key", "partition_by", "ordering_field", "table_type", "layout", "name")
#: where the error of a refused table travels in its catalog schema (next to the path)
ERROR_KEY = "error"
#: field metadata in which a catalog table's schema carries its location (PySpark hands its reader no option)
LOCATION_METADATA = "lsm_lab.location"


def lsm_options(options: Mapping[str, str]) -> dict[str, str]:
    """`options` (any case) with Hudi's SQL names turned into lsm_lab's: primaryKey → record_key,
    preCombineField → ordering_field, type (cow | mor) → table_type.  An option given both ways must agree."""
    out = {str(k).lower(): str(v) for k, v in options.items()}
    for hudi, ours in HUDI_SQL_OPTIONS.items():
        if hudi not in out:
            continue
        value = out.pop(hudi)
        if ours == "table_type":
            value = HUDI_TABLE_TYPES.get(value.lower(), value)
        if ours in out and out[ours].replace(" ", "") != value.replace(" ", ""):
            raise InputError(f"options {hudi} ({value!r}) and {ours} ({out[ours]!r}) disagree")
        out[ours] = value
    return out


@dataclass(frozen=True)
class SqlTable:
    """What a `CREATE TABLE` with a column list asks for, read from the catalog entry."""

    name: str
    path: str
    columns: Any  # the declared Spark StructType (no meta column)
    options: dict[str, str]  # lsm_lab names, lower case; no `storage.*`
    partition_by: tuple[str, ...] = ()
    storage_options: dict[str, str] | None = field(default=None)

    @classmethod
    def of(cls, name: str, columns: Any, options: Mapping[str, str], partition_by: Sequence[str] = ()) -> SqlTable:
        opts = lsm_options(options)
        path = opts.get("path") or opts.get("location") or ""
        if not path:
            raise InputError(f"CREATE TABLE {name} USING lsm_lab: no path (give LOCATION '...' or OPTIONS (path "
                             "'...'))")
        if path.startswith("file:") and not path.startswith("file://"):
            path = path[len("file:"):]  # Spark's `file:/x` of a local folder
        storage = {k[len("storage."):]: v for k, v in opts.items() if k.startswith("storage.")} or None
        keep = {k: v for k, v in opts.items() if not k.startswith("storage.")
                and k not in ("owner", "provider", "location", "path")}
        cols = StructType([f for f in columns.fields if f.name not in META_COLUMNS])
        parts = tuple(partition_by)
        if "partition_by" in keep and parts and keep["partition_by"].replace(" ", "") != ",".join(parts):
            raise InputError(f"CREATE TABLE {name}: PARTITIONED BY ({', '.join(parts)}) and option partition_by "
                             f"({keep['partition_by']!r}) disagree")
        if not parts and keep.get("partition_by"):
            parts = tuple(p.strip() for p in keep["partition_by"].split(",") if p.strip())
        return cls(name, path, cols, keep, parts, storage)

    def create_args(self) -> dict[str, Any]:
        """`create_table`'s keyword arguments (the record key is required, as for every lsm_lab table)."""
        if not self.options.get("record_key"):
            raise InputError(f"CREATE TABLE {self.name} USING lsm_lab needs a record key: OPTIONS or TBLPROPERTIES "
                             "(primaryKey 'id') — lsm_lab has no key-less tables", path=self.path)
        names = set(self.columns.names)
        kw: dict[str, Any] = {k: self.options[k] for k in CREATE_OPTIONS if k in self.options and k != "partition_by"}
        kw.setdefault("name", self.name)
        keys = [k.strip() for k in kw["record_key"].split(",") if k.strip()]
        kw["record_key"] = keys if len(keys) > 1 else keys[0]
        for what, cols in (("record key", keys), ("partition column", list(self.partition_by)),
                           ("ordering field", [kw["ordering_field"]] if kw.get("ordering_field") else [])):
            missing = [c for c in cols if c not in names]
            if missing:
                raise SchemaError(f"CREATE TABLE {self.name}: {what} {', '.join(map(repr, missing))} is not among the "
                                  f"columns ({', '.join(self.columns.names)})", path=self.path)
        if self.partition_by:
            kw["partition_by"] = list(self.partition_by)
        arrow = arrow_schema_for(self.columns)
        record, namespace = hudi_record_names(str(kw["name"]))
        kw["properties"] = {"hoodie.table.create.schema": avro_schema_json(
            arrow_to_avro_schema(arrow, name=record, namespace=namespace))}
        return kw


def ensure_table(spec: SqlTable) -> None:
    """Create the table `spec` asks for, or check that the one at its path has its columns (`SchemaError`)."""
    try:
        table = open_table(spec.path, spec.storage_options)
    except TableNotFoundError:
        create_table(spec.path, storage_options=spec.storage_options, **spec.create_args())
        return
    have = table.schema
    if have is None:  # a table with no write and no create schema yet: its first write sets the columns
        return
    theirs = {f.name: f.dataType for f in spark_schema(have).fields}
    ours = {f.name: f.dataType for f in spec.columns.fields}
    diffs = [f"{n}: declared {ours[n].simpleString()}, the table has {theirs[n].simpleString()}"
             for n in ours if n in theirs and ours[n] != theirs[n]]
    diffs += [f"{n}: declared, not in the table" for n in ours if n not in theirs]
    diffs += [f"{n}: in the table, not declared" for n in theirs if n not in ours]
    keys = table.config.record_key
    want = spec.options.get("record_key")
    if want and [k.strip() for k in want.split(",")] != list(keys):
        diffs.append(f"record key: declared {want}, the table has {','.join(keys)}")
    if diffs:
        raise SchemaError(f"CREATE TABLE {spec.name}: the lsm_lab table at this path has other columns than the "
                          f"statement declares ({'; '.join(diffs)}); declare its columns, leave the column list out "
                          "(CREATE TABLE ... USING lsm_lab LOCATION '...' reads them from the table), or use a new "
                          "path", path=spec.path)


def catalog_schema(spec: SqlTable, error: LsmLabError | None = None) -> Any:
    """The declared columns, the first carrying the path and options (or the error) for the reader and writer."""
    opts: dict[str, str] = {**spec.options, "path": spec.path}
    if spec.partition_by:
        opts["partition_by"] = ",".join(spec.partition_by)
    if error is not None:
        opts[ERROR_KEY] = str(error)
        opts[ERROR_KEY + "_class"] = "SchemaError" if isinstance(error, SchemaError) else "InputError"
    return with_location(spec.columns, opts)


def raise_refused(options: Mapping[str, str]) -> None:
    """Raise the error of a `CREATE TABLE` the hook refused, when `options` (a catalog schema's) carry one."""
    if options.get(ERROR_KEY):  # (the message names the path)
        kind = SchemaError if options.get(ERROR_KEY + "_class") == "SchemaError" else InputError
        raise kind(options[ERROR_KEY])


# --------------------------------------------------------------------------- the path in the catalog's schema
def with_location(schema: Any, options: Mapping[str, str]) -> Any:
    """`schema` whose first field's metadata carries the table's path and its read/write options (not its
    `storage.*` ones, which may hold credentials): what a catalog table's reader and writer read back."""
    keep = {str(k).lower(): str(v) for k, v in options.items()
            if str(k).lower() not in ("owner", "provider", "location") and not str(k).lower().startswith("storage.")}
    keep["path"] = str(options.get("path") or options.get("location") or keep.get("path", ""))
    fields = list(schema.fields)
    first = fields[0]
    fields[0] = StructField(first.name, first.dataType, first.nullable,
                            {**(first.metadata or {}), LOCATION_METADATA: json.dumps(keep, sort_keys=True)})
    return StructType(fields)


def location_of(schema: Any) -> dict[str, str]:
    """The options `with_location` put in a catalog table's schema ({} when it has none)."""
    for f in getattr(schema, "fields", None) or []:
        raw = (f.metadata or {}).get(LOCATION_METADATA)
        if raw:
            try:
                found = json.loads(raw)
            except ValueError:
                raise InputError(f"the schema of this catalog table carries a damaged {LOCATION_METADATA}: "
                                 f"{str(raw)[:200]!r}") from None
            if isinstance(found, dict):
                return {str(k).lower(): str(v) for k, v in found.items()}
    return {}


# --------------------------------------------------------------------------- the py4j listener
class CatalogHook:
    """`ExternalCatalogEventListener` implemented in the driver's Python (py4j calls `onEvent`)."""

    def __init__(self, gateway: Any, catalog: Any) -> None:
        self.gateway = gateway
        self.catalog = catalog

    def onEvent(self, event: Any) -> None:  # (the Java interface's name)
        try:
            if event.getClass().getSimpleName() == "CreateTableEvent":
                self.attach(str(event.database()), str(event.name()))
        except Exception:  # a listener must not throw into Spark's catalog (Spark would only log it)
            log.exception("lsm_lab: the CREATE TABLE hook failed")

    def attach(self, db: str, name: str) -> None:
        jvm = self.gateway.jvm
        table = self.catalog.getTable(db, name)
        provider = table.provider()
        if not provider.isDefined() or str(provider.get()).lower() != PROVIDER:
            return
        columns = StructType.fromJson(json.loads(table.schema().json()))
        if not columns.fields or location_of(columns):
            return  # no column list: the source's schema() put the location there already
        convert = jvm.scala.jdk.javaapi.CollectionConverters
        options: dict[str, str] = {}
        for scala_map in (table.storage().properties(), table.properties()):
            options.update({str(k): str(v) for k, v in dict(convert.asJava(scala_map)).items()})
        location = table.storage().locationUri()
        if location.isDefined() and not options.get("path"):
            options["path"] = str(location.get().toString())
        partition_by = [str(c) for c in convert.asJava(table.partitionColumnNames())]
        error: LsmLabError | None = None
        try:
            spec = SqlTable.of(name, columns, options, partition_by)
        except LsmLabError as exc:
            spec = SqlTable(name, options.get("path") or "", columns, {}, tuple(partition_by))
            error = exc
        else:
            try:
                ensure_table(spec)
            except LsmLabError as exc:
                error = exc
        if error is not None:
            log.error("lsm_lab: CREATE TABLE %s.%s refused: %s", db, name, error)
        schema = catalog_schema(spec, error)
        as_json = jvm.org.apache.spark.sql.types.DataType.fromJson
        # the declared order, and no partition column for Spark (the Python table reports none anyway;
        # lsm_lab's hoodie.properties has them): CTAS and positional INSERTs keep the columns where declared
        self.catalog.alterTable(_copy(table, schema=as_json(schema.json()),
                                      partitionColumnNames=table.partitionColumnNames().take(0)))
        if location_of(StructType.fromJson(json.loads(self.catalog.getTable(db, name).schema().json()))):
            return
        # a catalog whose alterTable keeps the schema (Hive's): the schema alone, partition columns last
        last = StructType([f for f in schema.fields if f.name not in partition_by]
                          + [f for p in partition_by for f in schema.fields if f.name == p])
        self.catalog.alterTableSchema(db, name, as_json(last.json()))

    class Java:
        implements: ClassVar[list[str]] = ["org.apache.spark.sql.catalyst.catalog.ExternalCatalogEventListener"]


def _copy(product: Any, **changes: Any) -> Any:
    """A Scala case class instance (through py4j) with some fields changed: `copy` with every other field."""
    args = []
    for i in range(product.productArity()):
        name = str(product.productElementName(i))
        args.append(changes.pop(name) if name in changes else product.productElement(i))
    if changes:
        raise InputError(f"{product.getClass().getName()} has no field {', '.join(changes)} (another Spark version?)")
    return product.copy(*args)


_HOOKED: dict[int, CatalogHook] = {}


def install(spark: Any) -> bool:
    """Add the hook to `spark`'s external catalog, once per catalog; False where it cannot be (Spark Connect)."""
    jss = getattr(spark, "_jsparkSession", None)
    sc = getattr(spark, "_sc", None)
    if jss is None or sc is None:
        return False
    from py4j.protocol import Py4JError  # type: ignore[import-untyped]
    from pyspark.java_gateway import ensure_callback_server_started

    gateway = sc._gateway
    try:
        catalog = jss.sharedState().externalCatalog()
        key = int(gateway.jvm.System.identityHashCode(catalog))
        if key in _HOOKED:
            return True
        ensure_callback_server_started(gateway)  # type: ignore[no-untyped-call]
        hook = CatalogHook(gateway, catalog)
        catalog.addListener(hook)
    except (Py4JError, OSError) as exc:  # the data source still works; a column list stays refused
        log.warning("lsm_lab: no CREATE TABLE hook on this session's catalog (%s): CREATE TABLE t (columns) "
                    "USING lsm_lab will be refused", exc)
        return False
    _HOOKED[key] = hook
    return True


__all__ = ["LOCATION_METADATA", "CatalogHook", "SqlTable", "ensure_table", "install", "location_of", "lsm_options",
           "raise_refused", "with_location"]
