# The two commands of the README: `make demo` and `make test`. CI runs `.ci/run`, which calls `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-test

.PHONY: test demo lint venv clean browser

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(STAMP): $(BIN)/python setup.py pyproject.toml
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

venv: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check luigi test examples bench bin
	$(BIN)/mypy

# Headless Chromium for the visualiser's browser tests (installed with apt-get where missing and root).
browser:
	scripts/ensure-browser.sh

test: lint browser
	$(BIN)/pytest -n auto -q

demo: $(STAMP)
	$(BIN)/python -m examples.demo

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
