# Two commands do all set-up on a fresh machine: `make demo` and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: setup demo test test-all lint format type bench report-example clean

setup: $(STAMP)

TORCH := torch==2.13.0
TORCH_CPU_INDEX := https://download.pytorch.org/whl/cpu

# torch first, the exact pinned release. Without an NVIDIA GPU, its CPU build from PyTorch's CPU
# wheel index (~200 MB instead of several GB of CUDA libraries); if that index cannot be reached
# (a mirror-only network) it falls back at once to the default registry. With a GPU, the default
# build (CUDA). Override with `make setup TORCH_CPU_INDEX=` to always use the default registry.
$(STAMP): pyproject.toml constraints.txt
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	@if [ -n "$(TORCH_CPU_INDEX)" ] && ! (nvidia-smi -L >/dev/null 2>&1); then \
	  echo "no NVIDIA GPU: installing torch's CPU build from $(TORCH_CPU_INDEX)"; \
	  $(PY) -m pip install -q --timeout 15 --retries 1 --index-url $(TORCH_CPU_INDEX) $(TORCH) \
	  || { echo "CPU index unreachable: torch from the default registry"; $(PY) -m pip install -q $(TORCH); }; \
	else \
	  $(PY) -m pip install -q $(TORCH); \
	fi
	$(PY) -m pip install -q -c constraints.txt -e '.[dev]'
	touch $(STAMP)

demo: setup
	$(VENV)/bin/rlsched demo --scenario paper --rate 60 --seeds 3
	$(VENV)/bin/rlsched demo --scenario interference-saturated --seeds 2 \
		--schedulers mct+speedup,mct+iawp,mct+iawp-pass,ldwp+iawp
	$(VENV)/bin/rlsched demo --live

# Two passes: the tests that need no clock run two at a time (pytest-xdist, one per core); those
# marked `serial` (real servers, clusters and timing: tests/conftest.py) then run alone.
test: setup lint type
	$(PY) -m pytest -q -n 2 -m "not slow and not serial"
	$(PY) -m pytest -q -m "not slow and serial"

test-all: setup lint type
	RLSCHED_FULL_PROPERTIES=1 $(PY) -m pytest -q -n 2 -m "not serial"
	RLSCHED_FULL_PROPERTIES=1 $(PY) -m pytest -q -m serial

type: setup
	$(VENV)/bin/mypy

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: setup
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

bench: setup
	$(PY) -m experiments.benchmarks.bench_sim

# The example report linked from the README (about a minute on 2 cores).
report-example: setup
	rm -rf docs/report-example
	$(VENV)/bin/rlsched evaluate --scenarios transfer-4,interference-saturated#3000 \
		--schedulers random+speedup,mct+speedup,mct+mlsm,ldwp+iawp,oracle+speedup --seeds 3 \
		--out docs/report-example
	rm -rf docs/report-example/run-details  # per-run details serve --resume only: not shipped

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis .mypy_cache rlsched.egg-info
