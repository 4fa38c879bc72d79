# lsm_lab — two commands on a fresh machine:  make demo   and   make test
# Needs Python 3.11+ (python3 on PATH, or PY=/path/to/python3.11) and Java 17+ (for Spark).

PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
PYTEST_ARGS ?=
# make test spreads the tests over one worker more than the cores (pytest-xdist): many tests wait on a child
# process, a local server or a JVM, and the extra worker can fill that time (2 cores: 856 and 990 s with 3 workers,
# 922 and 986 s with 2: this machine's speed varied more; docs/PERFORMANCE.md stop 42); TEST_WORKERS=0: one process
TEST_WORKERS ?= $(shell echo $$(( $$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1) + 1 )))
# make test's temporary files (pytest's tmp_path, notebook tables, Spark's scratch) stay inside the repo's
# ignored .tmp/, emptied at the start of every run, so nothing is left behind in the system temp folder
TEST_TMP := $(CURDIR)/.tmp

.PHONY: demo demo-s3 test test-fast lint check-env install notebooks-strip bench bench-peers campaign clean clean-scratch help

help:
	@echo "make demo       create .venv if missing, install, run the main job (lsm-lab demo)"
	@echo "make demo-s3    the same job on a local S3 server (moto), with request counts"
	@echo "make test       same set-up, run every test (notebooks included)"
	@echo "make test-fast  unit tests only, no slow/Spark/notebook tests"
	@echo "make lint       ruff and mypy (part of make test)"
	@echo "make clean-scratch  remove .scratch/ (the chapters' tables and cached inputs); make clean also removes .venv"
	@echo "make bench      run the benchmarks (slow)"
	@echo "make campaign   the long reliability campaigns: every footer bit flipped, the stateful model of every"
	@echo "                operation at length, SIGKILLs during writes and services, two-process writers on S3/Azure, a Spark standalone cluster, the Spark bench (about 30 minutes)"
	@echo "make bench-peers  lsm_lab vs Apache Paimon (Rust) and hudi-rs; creates .venv-peers (pypaimon needs pyarrow<20)"

check-env:
	@$(PY) -c 'import sys; v=sys.version_info; sys.exit(0 if v >= (3, 11) else "lsm_lab needs Python 3.11 or newer; this is %d.%d (set PY=/path/to/python3.11)" % v[:2])'
	@command -v java >/dev/null 2>&1 || { echo "lsm_lab needs Java 17 or newer for Spark (PySpark 4): no 'java' on PATH. Install a JDK 17+ (e.g. apt install openjdk-17-jdk-headless) and retry."; exit 1; }
	@ver=$$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1); \
	 if [ -z "$$ver" ] || [ "$$ver" -lt 17 ]; then echo "lsm_lab needs Java 17 or newer for Spark (PySpark 4); found: $$(java -version 2>&1 | head -1)"; exit 1; fi

$(STAMP): pyproject.toml | check-env
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	@touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/lsm-lab demo

demo-s3: $(STAMP)
	$(BIN)/lsm-lab demo --storage s3

# mypy (~35 s of one core) runs beside the tests, its report printed after them; either failing fails the target
test: $(STAMP)
	$(BIN)/ruff check lsm_lab tests benchmarks tools data
	@rm -rf $(TEST_TMP) && mkdir -p $(TEST_TMP)
	@$(BIN)/mypy > $(TEST_TMP)/mypy.log 2>&1 & mypy=$$!; \
	 TMPDIR=$(TEST_TMP) SPARK_LOCAL_DIRS=$(TEST_TMP) LSM_LAB_SCRATCH=$(TEST_TMP)/scratch \
	  $(BIN)/python -m pytest -q -p no:cacheprovider --basetemp=$(TEST_TMP)/pytest -m "not campaign" \
	  -n $(TEST_WORKERS) --dist worksteal --durations=15 $(PYTEST_ARGS) --nbmake tests notebooks; tests=$$?; \
	 wait $$mypy; typed=$$?; echo "mypy:"; cat $(TEST_TMP)/mypy.log; \
	 [ $$tests -eq 0 ] && [ $$typed -eq 0 ] || exit 1
	@rm -rf $(TEST_TMP)

lint: $(STAMP)
	$(BIN)/ruff check lsm_lab tests benchmarks tools data
	$(BIN)/mypy

test-fast: $(STAMP)
	@rm -rf $(TEST_TMP) && mkdir -p $(TEST_TMP)
	TMPDIR=$(TEST_TMP) $(BIN)/python -m pytest -q -p no:cacheprovider --basetemp=$(TEST_TMP)/pytest \
	  -m "not slow and not spark" $(PYTEST_ARGS) tests
	@rm -rf $(TEST_TMP)

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_merge.py

campaign: $(STAMP)
	@rm -rf $(TEST_TMP) && mkdir -p $(TEST_TMP)
	TMPDIR=$(TEST_TMP) $(BIN)/python -m pytest -q -p no:cacheprovider --basetemp=$(TEST_TMP)/pytest -m campaign tests
	$(BIN)/python benchmarks/model_campaign.py --examples 100 --steps 25 --seed 1
	$(BIN)/python benchmarks/crash_test.py --kills 200 --seed 1
	@rm -rf $(TEST_TMP)

PEERS_VENV ?= .venv-peers
PEERS_STAMP := $(PEERS_VENV)/.installed-stamp
PEERS_ARGS ?=

$(PEERS_STAMP):
	@test -x $(PEERS_VENV)/bin/python || $(PY) -m venv $(PEERS_VENV)
	$(PEERS_VENV)/bin/python -m pip install -q --upgrade pip
	$(PEERS_VENV)/bin/python -m pip install -q pypaimon pypaimon-rust 'pyarrow<20'
	@touch $(PEERS_STAMP)

bench-peers: $(STAMP) $(PEERS_STAMP)
	$(BIN)/lsm-lab bench peers --peer-python $(PEERS_VENV)/bin/python $(PEERS_ARGS)

notebooks-strip: $(STAMP)
	$(BIN)/python -m nbformat.sign --help >/dev/null 2>&1 || true
	$(BIN)/python tools/strip_notebooks.py notebooks

clean-scratch:
	rm -rf .scratch

clean:
	rm -rf $(VENV) $(PEERS_VENV) .tools .pytest_cache .hypothesis build *.egg-info .scratch .tmp test-artifacts
