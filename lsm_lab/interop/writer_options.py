"""The options an Apache Hudi writer needs to write into an lsm_lab table the way lsm_lab does.

Hudi splits a table's settings in two: *table properties* live in
`.hoodie/hoodie.properties` and every reader and writer finds them there;
*writer options* (`HoodieWriteConfig`, `HoodieIndexConfig`, the Spark data source
options) are given to each write and stored nowhere.  Where a key lives in a
bucket-index table is decided by writer options:

    hoodie.properties (read by everyone)        writer options (given on every Hudi write)
    ------------------------------------        -------------------------------------------
    hoodie.table.recordkey.fields=id            hoodie.datasource.write.recordkey.field=id
    hoodie.table.version=10                     hoodie.write.table.version=10
    hoodie.bucket.index.num.buckets=4  (lsm_lab)  hoodie.index.type=BUCKET
                                                hoodie.bucket.index.num.buckets=4

lsm_lab keeps the bucket settings in `hoodie.properties` too (docs/FORMAT.md §0:
a reader that guessed the count would look in the wrong bucket), but a Spark or
Flink Hudi writer does not read them there: it must be passed them, or it writes
with its default index and a key's second version lands in another file group.
`hudi_writer_options` derives the whole set from the table's properties, for
`df.write.format("hudi").options(**opts)` or a Hudi Streamer properties file.

Simplified compared with Apache Hudi: only the options that decide where and how
records are written (keys, partitioning, ordering, index, version, table type);
tuning options (parallelism, file sizes, services) are the writer's own choice.

Taught in: no chapter (README, "What the Hudi world reads of lsm_lab's tables"; `lsm-lab show hudi-options PATH`)
"""

from __future__ import annotations

from lsm_lab.errors import UnsupportedFeatureError
from lsm_lab.timeline.config import KEY_META_FIELDS_MODE, UPSTREAM_LSM_VERSION, TableConfig

_KEYGEN_CLASS = {"SIMPLE": "org.apache.hudi.keygen.SimpleKeyGenerator",
                 "COMPLEX": "org.apache.hudi.keygen.ComplexKeyGenerator",
                 "NON_PARTITION": "org.apache.hudi.keygen.NonpartitionedKeyGenerator"}


def hudi_writer_options(config: TableConfig) -> dict[str, str]:
    """The Hudi writer options (upstream names) that write into this table as lsm_lab does, in a stable order.

    A bucket-index table below version 10 is refused (`UnsupportedFeatureError`): it places keys by
    CRC-32 (the seed RFC), which no Hudi writer does; upgrade it to version 10 first (`lsm-lab upgrade`).
    """
    if config.bucket_index and config.version < UPSTREAM_LSM_VERSION:
        raise UnsupportedFeatureError(
            f"table version {config.version} places keys in buckets by CRC-32 (the RFC-103 draft); Hudi's bucket "
            "index hashes keys differently, so no Hudi writer options can write into it: upgrade it to version "
            f"{UPSTREAM_LSM_VERSION} first (lsm-lab upgrade PATH)")
    props = config.props
    out: dict[str, str] = {
        "hoodie.table.name": config.name,
        "hoodie.database.name": config.database,
        "hoodie.datasource.write.table.type": config.table_type,
        "hoodie.write.table.version": str(config.version),
        "hoodie.datasource.write.recordkey.field": ",".join(config.record_key),
        "hoodie.datasource.write.partitionpath.field": ",".join(config.partition_by),
        "hoodie.datasource.write.hive_style_partitioning": "true" if config.hive_style else "false",
        "hoodie.datasource.write.keygenerator.type": config.keygen_type,
        "hoodie.datasource.write.keygenerator.class": _KEYGEN_CLASS.get(config.keygen_type, ""),
        "hoodie.write.record.merge.mode": config.merge_mode,
        "hoodie.populate.meta.fields": "true" if config.populate_meta_fields else "false",
    }
    if config.ordering_field:
        out["hoodie.datasource.write.precombine.field"] = config.ordering_field  # (1.x: hoodie.table.ordering.fields)
    if KEY_META_FIELDS_MODE in props:
        out[KEY_META_FIELDS_MODE] = config.meta_fields_mode
    if config.bucket_index:
        out["hoodie.index.type"] = "BUCKET"
        out["hoodie.bucket.index.num.buckets"] = str(config.num_buckets)
        out["hoodie.index.bucket.engine"] = props.get("hoodie.index.bucket.engine", "SIMPLE")
        out["hoodie.bucket.index.hash.field"] = props.get("hoodie.bucket.index.hash.field",
                                                          ",".join(config.record_key))
    elif props.get("hoodie.index.type"):
        out["hoodie.index.type"] = props["hoodie.index.type"].upper()
    if config.cdc_enabled:
        out["hoodie.table.cdc.enabled"] = "true"
        out["hoodie.table.cdc.supplemental.logging.mode"] = config.cdc_mode
    return {k: v for k, v in out.items() if v != ""}


__all__ = ["hudi_writer_options"]
