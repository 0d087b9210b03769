# Two commands set everything up on a fresh machine:
#   make demo  -> creates .venv, installs ctxprec-ops with its core dependencies only (no Airflow,
#                 Dagster or embedded PostgreSQL), runs the main job on the embedded default
#   make test  -> creates .venv, installs the project with every extra, runs the test suite
# Each set of extras has its own stamp file, so `make demo` never pulls the test/orchestrator extras
# and `make test` after `make demo` adds them to the same environment.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
UV     := $(BIN)/uv
EXTRAS ?= test,postgres,mysql,snowflake,clickhouse,redshift,bigquery,databricks,airflow,openlineage,dagster,lint,tokens,traces,docs
DEMO_EXTRAS ?=
PYTEST_ARGS ?=
# the suite in parallel (pytest-xdist): one worker per core; tests that share a per-worker fixture
# stay on one worker (tests/fixtures/scheduling.py). PYTEST_WORKERS=0 runs it in one process.
PYTEST_WORKERS ?= auto

.PHONY: venv install demo test lint bench docs clean phoenix-venv bqemulator-venv

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check uv

# $(VENV)/.installed-<extras> (".installed-core" for none): one stamp per extras set
stamp = $(VENV)/.installed-$(or $(subst $(comma),-,$(1)),core)
comma := ,
spec = $(if $(1),".[$(1)]",".")

$(call stamp,$(EXTRAS)): $(BIN)/python pyproject.toml constraints.txt
	$(UV) pip install --quiet --compile-bytecode -p $(BIN)/python -c constraints.txt -e $(call spec,$(EXTRAS))
	$(if $(findstring snowflake,$(EXTRAS)),$(UV) pip install --quiet -p $(BIN)/python --no-deps -c constraints.txt snowflake-sqlalchemy)
	@touch $@

ifneq ($(DEMO_EXTRAS),$(EXTRAS))
$(call stamp,$(DEMO_EXTRAS)): $(BIN)/python pyproject.toml constraints.txt
	$(UV) pip install --quiet --compile-bytecode -p $(BIN)/python -c constraints.txt -e $(call spec,$(DEMO_EXTRAS))
	@touch $@
endif

venv install: $(call stamp,$(EXTRAS))

demo: $(call stamp,$(DEMO_EXTRAS))
	$(BIN)/ctxprec demo

# the 15 slowest tests are listed at the end. Bytecode is written even under
# PYTHONDONTWRITEBYTECODE: the suite starts many Python processes (CLI, Airflow, Dagster), each
# of which would otherwise compile every module it imports again.
# Arize Phoenix for the trace-platform tests (tests/fixtures/phoenix.py): its own environment, the
# server's dependencies are not the project's
PHOENIX_VENV ?= .venv-phoenix
PHOENIX_PACKAGES ?= arize-phoenix==20.26.1 arize-phoenix-otel==0.17.2 openinference-instrumentation==0.1.72

$(PHOENIX_VENV)/.installed: $(BIN)/python
	$(PYTHON) -m venv $(PHOENIX_VENV)
	$(UV) pip install --quiet -p $(PHOENIX_VENV)/bin/python $(PHOENIX_PACKAGES)
	@touch $@

phoenix-venv: $(PHOENIX_VENV)/.installed

# the BigQuery emulator of the BigQuery conformance backend (tests/fixtures/bqemulator.py): its own
# environment, as Phoenix's (its sqlglot and grpcio pins conflict with fakesnow's and Dagster's)
BQEMU_VENV ?= .venv-bqemulator
BQEMU_PACKAGES ?= bqemulator==1.4.0 numpy==2.4.6

$(BQEMU_VENV)/.installed: $(BIN)/python
	$(PYTHON) -m venv $(BQEMU_VENV)
	$(UV) pip install --quiet -p $(BQEMU_VENV)/bin/python $(BQEMU_PACKAGES)
	@touch $@

bqemulator-venv: $(BQEMU_VENV)/.installed

test: $(call stamp,$(EXTRAS)) $(PHOENIX_VENV)/.installed $(BQEMU_VENV)/.installed
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadgroup --durations=15 $(PYTEST_ARGS)

lint: $(call stamp,$(EXTRAS))
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache

bench: $(call stamp,$(EXTRAS))
	$(BIN)/python bench/bench_judge_throughput.py
	$(BIN)/python bench/bench_pipeline.py
	$(BIN)/python bench/bench_saturation.py

# the documentation site (mkdocs.yml) into site/; tests/test_docs_site.py builds it the same way
docs: $(call stamp,$(EXTRAS))
	$(BIN)/mkdocs build --strict

clean:
	rm -rf $(VENV) $(PHOENIX_VENV) $(BQEMU_VENV) .pytest_cache .hypothesis .airflow $(BUILD_DIRS)
	rm -f $(DEMO_FILES)

# what building the package (`pip wheel -w dist .`, an editable install) and the docs site leave
BUILD_DIRS = build dist site ctxprec_ops.egg-info

# every file `ctxprec demo` writes with its defaults (the warehouse and the reports next to
# ctxprec_report.html), and the default ctxprec.db; tests/test_make_install.py runs the demo and
# this target and checks that nothing is left
DEMO_FILES = ctxprec.db ctxprec.db-wal ctxprec.db-shm ctxprec.db-journal \
	ctxprec_demo.db ctxprec_demo.db-wal ctxprec_demo.db-shm ctxprec_demo.db-journal \
	ctxprec_report.html ctxprec_report_conversations.html ctxprec_report_labels.html \
	ctxprec_report_node_labels.csv
