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
EXTRAS ?= test,postgres,airflow,dagster,lint,tokens,traces
DEMO_EXTRAS ?=
PYTEST_ARGS ?=

.PHONY: venv install demo test lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check uv

# $(VENV)/.installed-<extras> (".installed-core" for none): one stamp per extras set
stamp = $(VENV)/.installed-$(or $(subst $(comma),-,$(1)),core)
comma := ,
spec = $(if $(1),".[$(1)]",".")

$(call stamp,$(EXTRAS)): $(BIN)/python pyproject.toml constraints.txt
	$(UV) pip install --quiet -p $(BIN)/python -c constraints.txt -e $(call spec,$(EXTRAS))
	@touch $@

ifneq ($(DEMO_EXTRAS),$(EXTRAS))
$(call stamp,$(DEMO_EXTRAS)): $(BIN)/python pyproject.toml constraints.txt
	$(UV) pip install --quiet -p $(BIN)/python -c constraints.txt -e $(call spec,$(DEMO_EXTRAS))
	@touch $@
endif

venv install: $(call stamp,$(EXTRAS))

demo: $(call stamp,$(DEMO_EXTRAS))
	$(BIN)/ctxprec demo

test: $(call stamp,$(EXTRAS))
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: $(call stamp,$(EXTRAS))
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache

bench: $(call stamp,$(EXTRAS))
	$(BIN)/python bench/bench_judge_throughput.py
	$(BIN)/python bench/bench_pipeline.py
	$(BIN)/python bench/bench_saturation.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
	rm -f ctxprec.db ctxprec.db-wal ctxprec.db-shm ctxprec.db-journal \
	      ctxprec_demo.db ctxprec_demo.db-wal ctxprec_demo.db-shm ctxprec_demo.db-journal \
	      ctxprec_report.html ctxprec_report_conversations.html
