# Two commands set everything up on a fresh machine:
#   make demo  -> creates .venv, installs ctxprec-ops, runs the main job on the embedded default
#   make test  -> creates .venv, installs the project with every extra, runs the test suite
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
UV     := $(BIN)/uv
EXTRAS ?= test,postgres,airflow,dagster,lint
PYTEST_ARGS ?=

.PHONY: venv install demo test lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check uv

$(VENV)/.installed: $(BIN)/python pyproject.toml constraints.txt
	$(UV) pip install --quiet -p $(BIN)/python -c constraints.txt -e ".[$(EXTRAS)]"
	@touch $@

venv install: $(VENV)/.installed

demo: $(VENV)/.installed
	$(BIN)/ctxprec demo

test: $(VENV)/.installed
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

bench: $(VENV)/.installed
	$(BIN)/python bench/bench_judge_throughput.py
	$(BIN)/python bench/bench_pipeline.py

clean:
	rm -rf $(VENV) .pytest_cache ctxprec.db ctxprec_demo.db ctxprec_report.html ctxprec_report_conversations.html
