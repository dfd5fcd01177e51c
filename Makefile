PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
REGISTRY ?= registries/example.yml

BENCH_STAMP := $(VENV)/.bench-stamp

.PHONY: install run test lint format clean bench

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/toolloop serve --registry $(REGISTRY)

test: $(STAMP)
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

format: $(STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

$(BENCH_STAMP): $(STAMP) pyproject.toml
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	touch $(BENCH_STAMP)

# Every benchmark, side by side with its floors and peers (docs/benchmarks.md).
# BENCH_QUICK=1 for a short run; BENCH_ONLY=overhead,receipts,... for some.
# Needs Redis and PostgreSQL on 127.0.0.1 for the Celery and PostgreSQL figures
# (skipped, and said so, when absent); installs wrk if missing.
bench: $(BENCH_STAMP)
	@command -v wrk >/dev/null || (apt-get update -qq && apt-get install -y -qq wrk) \
		|| echo "wrk unavailable: the HTTP figures will be skipped"
	timeout 1200 $(BIN)/python -m bench

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache toolloop.db toolloop.db-*
