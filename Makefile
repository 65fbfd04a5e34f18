# The two commands of the README. Both create .venv on first use (CPU torch 2.13.0).
VENV ?= .venv
PY   := $(VENV)/bin/python
CORES ?= all

.PHONY: setup demo mini test clean-demo

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[cpu,dev]"
	touch $@

setup: $(VENV)/.installed

## make demo: the CPU demo DAG (synthetic task, tiny model) -> results/demo/
demo: setup
	$(VENV)/bin/snakemake --cores $(CORES) all

## make mini: the mini reproduction (config/mini.yaml, about 40 min on 2 cores) -> results/mini/
mini: setup
	$(VENV)/bin/snakemake all --cores $(CORES) --replace-workflow-config --configfile config/mini.yaml

## make test: the test suite (includes a small end-to-end DAG run)
test: setup
	$(PY) -m pytest

clean-demo:
	rm -rf results/demo
