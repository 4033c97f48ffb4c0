# The two commands of the README: `make demo` and `make test`. CI runs `.ci/run`, which calls `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-test

.PHONY: test demo lint venv clean

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

test: lint
	$(BIN)/pytest -n auto -q

demo: $(STAMP)
	$(BIN)/python -m examples.demo

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
