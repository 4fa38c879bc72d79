"""Optional dependencies: the slim core, and one clear error when a feature needs an extra.

`pip install lsm_lab` gives the core — create, write, read, lookups, the
services and the `lsm-lab` command, on local disk and object stores, and the
real Hudi tables. The rest comes with extras (pyproject.toml):

    extra       gives                                            needed by
    spark       pyspark                                          lsm_lab.spark, `lsm-lab spark ...`
    viz         matplotlib, ipywidgets                           lsm_lab.viz, `lsm-lab demo --figures`
    interop     hudi (hudi-rs)                                   hudi-rs comparisons, `lsm-lab interop ...`
    s3          moto[server], boto3                              a local S3 server (`lsm-lab demo --storage s3`)
    notebooks   all of the above, ipykernel, duckdb              every chapter
    test, dev   notebooks + pytest, hypothesis, nbmake, ...      `make test`

A feature whose extra is missing raises `MissingDependencyError` (an
`UnsupportedFeatureError` and an `ImportError`) naming the package and the
`pip install 'lsm_lab[extra]'` line, instead of a bare `ModuleNotFoundError`
from deep inside.

Simplified compared with Apache Hudi: Hudi ships bundles per engine (hudi-spark-bundle,
hudi-utilities-bundle, ...); lsm_lab is one Python package with extras.

Taught in: no chapter (README, "Install")
"""

from __future__ import annotations

import importlib.util

from lsm_lab.errors import MissingDependencyError

EXTRAS: dict[str, tuple[str, ...]] = {
    "spark": ("pyspark",),
    "viz": ("matplotlib", "ipywidgets"),
    "interop": ("hudi",),
    "s3": ("moto", "boto3"),
}


def missing(extra: str) -> list[str]:
    """The packages of `extra` that cannot be imported here."""
    return [name for name in EXTRAS[extra] if importlib.util.find_spec(name) is None]


def require(extra: str, feature: str) -> None:
    """Raise `MissingDependencyError` when a package of `extra` is missing (`feature` names what needs it)."""
    absent = missing(extra)
    if absent:
        raise MissingDependencyError(f"{feature} needs {', '.join(absent)}: pip install 'lsm_lab[{extra}]'")


__all__ = ["EXTRAS", "missing", "require"]
