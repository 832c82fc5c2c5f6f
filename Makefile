# The README's two commands: `make train` (the main job) and `make test` (the test suite).
# Both create the virtual environment on first use; nothing else needs installing by hand.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: train test test-slow lint format venv clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[test,sim]"
	touch $(STAMP)

venv: $(STAMP)

train: $(STAMP)
	$(VENV)/bin/ajax train sac --env Pendulum-v1 --steps 12000 --out runs/main --overwrite

test: $(STAMP)
	$(PY) -m pytest -n 2 --dist loadfile -q

test-slow: $(STAMP)
	$(PY) -m pytest -q -m slow

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/ruff format --check src tests benchmarks

format: $(STAMP)
	$(VENV)/bin/ruff format src tests benchmarks
	$(VENV)/bin/ruff check --fix src tests benchmarks

clean:
	rm -rf $(VENV) .pytest_cache
