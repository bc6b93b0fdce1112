# The two quickstart commands: `make demo` and `make test`. Each creates .venv and
# installs slotwise into it first (only Python >= 3.11 with pip and venv is needed):
# the demo installs the core alone, the tests every extra they exercise.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip install -c constraints.txt
# pip's output (setuptools' notes on the build included) goes to $(VENV)/pip.log, printed
# only when an install fails: `make demo` shows the demo's own output.
LOGGED := > $(VENV)/pip.log 2>&1 || { cat $(VENV)/pip.log; exit 1; }
SLOTWISE := ../../$(BIN)/slotwise

.PHONY: demo test test-llm quick lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install --upgrade pip $(LOGGED)

$(VENV)/.core: pyproject.toml constraints.txt | $(BIN)/python
	@echo "installing slotwise into $(VENV) (pip's output: $(VENV)/pip.log)"
	@$(PIP) -e . $(LOGGED)
	@touch $@

$(VENV)/.test: pyproject.toml constraints.txt | $(BIN)/python
	@echo "installing slotwise and its test extras into $(VENV) (pip's output: $(VENV)/pip.log)"
	@$(PIP) -e '.[test]' $(LOGGED)
	@touch $(VENV)/.core $@

# The llm extra (transformers, PyTorch) for `make test-llm`: PyTorch's CPU build from
# PyTorch's own index (on PyPI, torch is the CUDA build: several GB of nvidia packages).
# A machine with the wheel at hand (pip's find-links) and no route to that index:
# `make test-llm TORCH_INDEX=`.
TORCH_INDEX ?= --extra-index-url https://download.pytorch.org/whl/cpu

$(VENV)/.llm: pyproject.toml constraints.txt $(VENV)/.test
	@echo "installing the llm extra (PyTorch's CPU build) into $(VENV) (pip's output: $(VENV)/pip.log)"
	@$(PIP) $(TORCH_INDEX) -e '.[test,llm]' $(LOGGED)
	@touch $@

# The demo: both systems' summary tables (classic metrics, RA-nWG, PROC, %PROC, Harm and
# the retrieval-vs-selection diagnosis), then each scored at K = 1, 3, 5, 10 into
# out/*.json (keeping the outputs), a paired comparison, and an HTML report with Metric@K
# curves in which a click on a sample shows each system's slots.
COMPARED := retrieval-recall-at-k@5,retrieval-ndcg-at-k@10,ra-nwg-at-k@5,proc-at-k@5,pct-proc-at-k@5,harm-at-k@5

demo: $(VENV)/.core
	cd examples/quickstart && $(SLOTWISE) run quickstart --outputs outputs/bm25.json
	cd examples/quickstart && $(SLOTWISE) run quickstart --outputs outputs/hybrid-rerank.json
	cd examples/quickstart && $(SLOTWISE) run quickstart --outputs outputs/bm25.json --k 1,3,5,10 --format json --output ../../out/bm25.json --keep-outputs
	cd examples/quickstart && $(SLOTWISE) run quickstart --outputs outputs/hybrid-rerank.json --k 1,3,5,10 --format json --output ../../out/hybrid-rerank.json --keep-outputs
	$(BIN)/slotwise compare out/bm25.json out/hybrid-rerank.json --metrics $(COMPARED)
	$(BIN)/slotwise report out/bm25.json out/hybrid-rerank.json --metrics $(COMPARED) --output out/report.html

# Every test, on a worker per core (pytest-xdist), each test file on one worker (so its
# module fixtures, such as a fresh install or a Ray cluster, are made once); `make quick`
# leaves out the tests marked slow.
TESTS := $(BIN)/python -m pytest -n auto --dist loadfile

test: $(VENV)/.test
	$(TESTS)
	$(BIN)/ruff check engine metrics_plugins tests
	$(BIN)/mypy
	$(BIN)/lint-imports

# The tests of the transformers annotator (a tiny Llama built locally), which `make test`
# skips for want of PyTorch.
LLM_TESTS := tests/test_annotate_transformers.py tests/test_annotate_claims.py tests/test_annotate_holes.py

test-llm: $(VENV)/.llm
	$(BIN)/python -m pytest $(LLM_TESTS)

quick: $(VENV)/.test
	$(TESTS) -m "not slow"

lint: $(VENV)/.test
	$(BIN)/ruff check engine metrics_plugins tests
	$(BIN)/ruff format --check engine metrics_plugins tests
	$(BIN)/mypy
	$(BIN)/lint-imports

bench: $(VENV)/.test
	$(BIN)/python -m pip install --quiet -e '.[bench]'
	$(BIN)/python benchmarks/run.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
