# The two quickstart commands: `make demo` and `make test`. Each creates .venv and
# installs slotwise into it first (only Python >= 3.11 with pip and venv is needed).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test lint bench clean

$(BIN)/.installed: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[test]'
	touch $@

demo: $(BIN)/.installed
	cd examples/quickstart && ../../$(BIN)/slotwise run quickstart --outputs outputs/bm25.json
	cd examples/quickstart && ../../$(BIN)/slotwise run quickstart --outputs outputs/hybrid-rerank.json
	cd examples/quickstart && ../../$(BIN)/slotwise run quickstart --outputs outputs/bm25.json --format json --output ../../out/bm25.json
	cd examples/quickstart && ../../$(BIN)/slotwise run quickstart --outputs outputs/hybrid-rerank.json --format json --output ../../out/hybrid-rerank.json
	$(BIN)/slotwise compare out/bm25.json out/hybrid-rerank.json
	$(BIN)/slotwise report out/bm25.json out/hybrid-rerank.json --by stratum --output out/report.html

test: $(BIN)/.installed
	$(BIN)/python -m pytest
	$(BIN)/ruff check engine metrics_plugins tests
	$(BIN)/mypy

lint: $(BIN)/.installed
	$(BIN)/ruff check engine metrics_plugins tests
	$(BIN)/ruff format --check engine metrics_plugins tests
	$(BIN)/mypy

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
