# The README's two commands: `make train` (the main job) and `make test` (the test suite).
# Both create the virtual environment on first use; nothing else needs installing by hand.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: train test test-slow lint format venv clean gl

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[test,sim]"
	touch $(STAMP)

venv: $(STAMP)

# Rendered dm_control pixels (make_env(..., pixels=True), `--pixels`) on a machine without a
# display render through OSMesa: install Debian's libosmesa6 when it is missing and we may
# (root with apt-get, as on CI); otherwise say how. EGL is the fallback Ajax picks without it.
gl:
	@ldconfig -p | grep -q libOSMesa || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get install -y -qq libosmesa6 >/dev/null 2>&1 || \
	      { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq libosmesa6 >/dev/null 2>&1; } || \
	      echo "note: could not install libosmesa6; pixel dm_control will try EGL"; \
	  else echo "note: pixel dm_control needs OSMesa (sudo apt-get install libosmesa6) or EGL"; fi; }

# The main job: SAC on Pendulum-v1 sized to finish in about two minutes on 2 CPU cores
# (64-unit MLPs and batch 128; the 256 x 256 defaults cost ~30 ms per update on such a CPU).
train: $(STAMP) gl
	$(VENV)/bin/ajax train sac --env Pendulum-v1 --steps 12000 --hidden 64 --batch-size 128 \
		--learning-rate 1e-3 --buffer-size 12000 --eval-freq 2000 --out runs/main --overwrite

test: $(STAMP) gl
	$(PY) -m pytest -n 2 --dist loadfile -q --durations=25

# the slow learning tests run at XLA's default LLVM level, as users' runs do (tests/conftest.py)
test-slow: $(STAMP) gl
	AJAX_TEST_XLA_OPT= $(PY) -m pytest -q -m slow

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/ruff format --check src tests benchmarks

format: $(STAMP)
	$(VENV)/bin/ruff format src tests benchmarks
	$(VENV)/bin/ruff check --fix src tests benchmarks

clean:
	rm -rf $(VENV) .pytest_cache
