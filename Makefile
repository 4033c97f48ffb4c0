# The two commands of the README: `make demo` and `make test`. CI runs `.ci/run`, which calls `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-test
DEMO_STAMP := $(VENV)/.installed

.PHONY: test demo lint venv clean browser services gridengine

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# The demo needs the package alone; the tests need the test extra (the contrib clients, pytest, linters).
$(DEMO_STAMP): $(BIN)/python setup.py pyproject.toml
	$(BIN)/pip install --quiet -e .
	touch $(DEMO_STAMP)

$(STAMP): $(BIN)/python setup.py pyproject.toml
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP) $(DEMO_STAMP)

venv: $(STAMP)

# mypy over the whole package, then --strict over the engine's four packages (their imports unchecked).
lint: $(STAMP)
	$(BIN)/ruff check luigi test examples bench bin
	$(BIN)/mypy
	$(BIN)/mypy --strict --follow-imports=silent luigi/scheduler luigi/worker luigi/rpc luigi/server luigi/schedules

# Headless Chromium for the visualiser's browser tests (installed with apt-get where missing and root).
browser:
	scripts/ensure-browser.sh

# The programs the contrib tests start as private servers (Redis, MariaDB, sshd), installed where missing.
services:
	scripts/ensure-test-services.sh

# A one-node Grid Engine cell on this host for the luigi.contrib.sge tests (installed and started as root).
gridengine:
	scripts/ensure-gridengine.sh

test: lint browser services gridengine
	$(BIN)/pytest -n auto -q

demo: $(DEMO_STAMP)
	$(BIN)/python -m examples.demo

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
