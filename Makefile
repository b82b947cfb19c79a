# The two commands a new user runs (see README.md): `make up` and `make test`.
PY ?= python3
# Extra arguments for `rudder up`, e.g. `make up UP_ARGS="--port 8001"`.
UP_ARGS ?=
VENV := .venv
BIN := $(VENV)/bin

# `make up` installs the runtime dependencies and the `dist` extra (torch's Gloo, CPU build,
# for kvstore='dist_sync'); `make test`, `lint` and `bench` add the dev extras (pytest,
# ruff, mypy, moto, selenium, ...) on top.
$(BIN)/.installed: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dist]'
	touch $@

$(BIN)/.installed-dev: $(BIN)/.installed
	$(BIN)/pip install -q -e '.[dist,dev]'
	touch $@

.PHONY: install install-dev dashboard-deps up example test lint bench
install: $(BIN)/.installed dashboard-deps
install-dev: $(BIN)/.installed-dev dashboard-deps

# The dashboard's chart library (uPlot), pinned in package-lock.json and served by the api
# from node_modules/ (never from a CDN). `npm ci` installs exactly the locked version.
dashboard-deps: node_modules/.package-lock.json
node_modules/.package-lock.json: package.json package-lock.json
	npm ci --ignore-scripts --no-audit --no-fund

up: install
	$(BIN)/rudder up $(UP_ARGS)

example: install
	$(BIN)/python -m engine.examples.digits

test: install-dev
	scripts/test-services
	bench/setup    # MXNet 1.9.1 + PyTorch 2.13 in bench/.anchors: the differential-test oracles
	$(BIN)/ruff check .
	$(BIN)/mypy
	RUDDER_REQUIRE_ORACLE=1 $(BIN)/pytest

lint: install-dev
	$(BIN)/ruff check .
	$(BIN)/mypy

bench: install-dev
	bench/setup
	for b in bench/engine_*.py; do $(BIN)/python $$b || exit 1; done
