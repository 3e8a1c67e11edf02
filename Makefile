# trncat: `make demo` runs the whole flow offline; `make test` runs the test suite. Both create .venv first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TORCH_VERSION := 2.13.0
# Where torch comes from. Empty: pip's configured index (on a usual Linux machine PyPI's CUDA build, several GB).
# PyTorch's CPU wheels: make TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu test
TORCH_INDEX_URL ?=

.PHONY: demo test lint venv clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# torch first, pinned, so the project's own `torch` requirement is already met (see TORCH_INDEX_URL).
	$(BIN)/pip install --quiet torch==$(TORCH_VERSION) $(if $(TORCH_INDEX_URL),--index-url $(TORCH_INDEX_URL))
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(BIN)/trncat demo --out demo-out

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/python -m pytest -q --durations=25

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

clean:
	rm -rf $(VENV) demo-out .pytest_cache .ruff_cache .mypy_cache
