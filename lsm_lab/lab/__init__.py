"""The lab bench: what the demo, the notebooks and the benchmarks use around a table.

    datagen.py    the trips generator (seeded, repeatable upserts and deletes)
    demo.py       the job behind `lsm-lab demo` (and `make demo`)
    nbutil.py     small helpers the notebooks share
    s3local.py    a local S3 server (moto) for the demo and chapter 12

An application layer: it may import the library (api.py) and spark/; nothing in
the library imports it.

This package imports nothing on purpose: import the submodule you need.

Taught in: notebooks/00_why_lsm.ipynb
"""
