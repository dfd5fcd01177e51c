PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
REGISTRY ?= registries/example.yml

BENCH_STAMP := $(VENV)/.bench-stamp

.PHONY: install run test lint format clean bench faults soak

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

# The fault suites (docs/reliability.md): kill -9 mid-plan and resume, the database missing
# at start, and a PostgreSQL restart mid-run, on SQLite and PostgreSQL; figures printed.
# The restart breaks anyone else's use of that server at that moment: run it alone.
FAULTS_POSTGRES_URL ?= postgresql+psycopg://postgres@127.0.0.1:5432/test
faults: $(STAMP)
	TOOLLOOP_FAULTS=1 TOOLLOOP_REQUIRE_POSTGRES=1 \
		TOOLLOOP_TEST_POSTGRES_URL=$${TOOLLOOP_TEST_POSTGRES_URL:-$(FAULTS_POSTGRES_URL)} \
		timeout 900 $(BIN)/python -m pytest tests/faults -s -p no:cacheprovider

# Soak (docs/reliability.md): half the measured throughput for TOOLLOOP_SOAK_SECONDS (600) per
# database, checking that memory, open descriptors and metric series stay flat; figures printed.
# PostgreSQL runs too when TOOLLOOP_TEST_POSTGRES_URL is set (then about 25 minutes in all).
soak: $(STAMP)
	TOOLLOOP_SOAK=1 timeout 3000 $(BIN)/python -m pytest tests/load/test_soak.py -s -p no:cacheprovider

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache toolloop.db toolloop.db-*
