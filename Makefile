# ipu-repro: `make reproduce` runs every study into outputs/; `make test` runs the tests.
# Both create the virtual environment (.venv) on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PROFILE ?= quick
HARDWARE ?= auto
FORCE ?= 0
SEARCH ?= 1
ONLY ?=
SCHEDULER ?=
PLAN ?= 0
WARM ?= auto
PYTEST_ARGS ?= -n auto --dist worksteal
LAB_IP ?= 127.0.0.1
LAB_PORT ?= 8888
# GPU builds (requirements-gpu.txt, else requirements-cpu.txt): auto = when `nvidia-smi -L` lists a GPU;
# 1 = always; 0 = never. A driver older than the GPU builds need, or GPU=1 where no driver lists a GPU,
# stops the install with the choices before pip runs. The stamp holds the build installed: GPU=1 or
# GPU=0 on an environment of the other build installs again (auto keeps what is there).
GPU ?= auto
INSTALL_KIND = $(shell $(PYTHON) kit/hardware/gpu_install.py $(GPU))
INSTALLED_KIND = $(shell cat $(STAMP) 2>/dev/null)
OTHER_BUILD = $(if $(filter-out auto,$(GPU)),$(if $(filter $(INSTALL_KIND),$(INSTALLED_KIND)),,other-build))
PIP_LOG := $(VENV)/pip-install.log

PEERS_ARGS ?=
# `make bench SMOKE=1`: each benchmark once at its smallest (benchmarks/run_all.py --smoke); its
# figures mean nothing, it shows every benchmark still runs.
SMOKE ?= 0

# `make reproduce`'s fixed choices (and `make bench`'s SMOKE), refused before anything is installed
# (kit checks them again; tests/project/test_makefile.py keeps these lists equal to kit's).
# $(call one_of,VAR,choices)
one_of = $(if $(and $(filter 1,$(words $($(1)))),$(filter $(2),$($(1)))),,$(error invalid $(1)='$($(1))': one of $(2)))
ifneq ($(filter reproduce,$(MAKECMDGOALS)),)
$(call one_of,PROFILE,quick full)
$(call one_of,FORCE,0 1)
$(call one_of,SEARCH,0 1)
$(call one_of,PLAN,0 1)
$(call one_of,WARM,auto on off)
endif
ifneq ($(filter bench,$(MAKECMDGOALS)),)
$(call one_of,SMOKE,0 1)
endif

.PHONY: install reproduce rerun test bench bench-peers lab lint site rebuild-state clean-outputs mutate other-build

install: $(STAMP)

other-build: ;

$(STAMP): requirements.txt $(if $(filter gpu cpu,$(INSTALL_KIND)),requirements-$(INSTALL_KIND).txt) constraints.txt pyproject.toml .importlinter $(OTHER_BUILD)
	$(if $(filter gpu cpu,$(INSTALL_KIND)),,$(error GPU=$(GPU) is not one of auto, 1, 0))
	$(PYTHON) kit/hardware/gpu_install.py check $(GPU)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q torch==2.13.0 -c constraints.txt
	$(BIN)/python -m pip install -q -r requirements.txt -r requirements-$(INSTALL_KIND).txt -c constraints.txt >$(PIP_LOG) 2>&1 || { $(PYTHON) kit/hardware/gpu_install.py pip-failed $(INSTALL_KIND) $(PIP_LOG); exit 1; }
	$(BIN)/python kit/hardware/gpu_install.py onnxruntime $(INSTALL_KIND)
	$(BIN)/python -m pip install -q --no-deps --no-build-isolation -e .
	$(BIN)/python -m ipykernel install --sys-prefix --name ipu-repro --display-name "ipu-repro (.venv)" >/dev/null
	echo $(INSTALL_KIND) > $(STAMP)

# Each command that runs kit is `exec`ed: a signal to make (a supervisor stopping one pid) reaches
# kit, which stops its notebooks and records them; under `sh -c` kit ran on as an orphan.
# Fails when any notebook is not ok (kit's status: 1 not ok, 2 usage error; make itself exits 2).
# SCHEDULER=tcp://host:8786 runs the jobs on a Dask cluster (docs/cluster.md).
reproduce: $(STAMP)
	exec $(BIN)/kit reproduce --profile "$(PROFILE)" --hardware "$(HARDWARE)" --force "$(FORCE)" --search "$(SEARCH)" $(if $(ONLY),--only "$(ONLY)") $(if $(SCHEDULER),--scheduler "$(SCHEDULER)") --plan "$(PLAN)" --warm-kernel "$(WARM)"

# Re-run one result's job with its recorded parameters after checking commit, packages and hardware
# (RESULT=outputs/runs/<run_id>/<job>.json; ALLOW_DRIFT=1 re-runs despite differences), then compare.
rerun: $(STAMP)
	$(if $(RESULT),,$(error RESULT=outputs/runs/<run_id>/<job>.json is required))
	exec $(BIN)/kit rerun "$(RESULT)" $(if $(filter 1,$(ALLOW_DRIFT)),--allow-drift)

# Before the tests: the floors of kit/ (.importlinter, docs/architecture.md), ruff, and mypy on kit/
# (strict on the typed records; [tool.mypy] in pyproject.toml).
test: $(STAMP)
	$(BIN)/lint-imports
	$(BIN)/ruff check kit tests benchmarks
	$(BIN)/mypy
	exec $(BIN)/python -m pytest $(PYTEST_ARGS)

# Mutation testing of the code that computes figures (tests/mutate.py; not part of `make test`):
# the kill rate per module and every surviving mutant. MUTATE_ARGS="--max-children 2" on a shared machine.
MUTATE_ARGS ?=
mutate: $(STAMP)
	exec $(BIN)/python -m tests.mutate $(MUTATE_ARGS)

bench: $(STAMP)
	exec $(BIN)/python -m benchmarks.run_all $(if $(filter 1,$(SMOKE)),--smoke)

# The kit's chosen configuration per published row against plain ONNX Runtime fp32 and OpenVINO
# (benchmarks/peers.py); e.g. PEERS_ARGS="--rows resnet50-torch-fp32:FP16 --rounds 6 --seconds 5".
# On a GPU host (onnxruntime-gpu installed) the CPU peers' pins are not installed: the CPU build of
# onnxruntime would overwrite the GPU one; the GPU peers are plain PyTorch / ORT TensorRT / TensorRT.
bench-peers: $(STAMP)
	@if $(BIN)/python -c "import importlib.metadata as m; m.version('onnxruntime-gpu')" 2>/dev/null; then \
		echo "bench-peers: onnxruntime-gpu here, benchmarks/requirements-peers.txt left out"; \
	else $(BIN)/python -m pip install -q -r benchmarks/requirements-peers.txt -c constraints.txt; fi
	exec $(BIN)/python -m benchmarks.peers $(PEERS_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check kit tests benchmarks

site: $(STAMP)
	exec $(BIN)/kit site

rebuild-state: $(STAMP)
	exec $(BIN)/kit rebuild-state

lab: $(STAMP)  # --allow-root as root, --no-browser without a display: see kit/cli/lab.py
	exec $(BIN)/python -m kit.cli.lab --ip $(LAB_IP) --port $(LAB_PORT)

# refused while a batch holds outputs/ (its lock file stays); without the venv no batch can run
clean-outputs:
	@if [ -x $(BIN)/kit ]; then exec $(BIN)/kit clean-outputs; \
	else find outputs -mindepth 1 ! -name .gitkeep -exec rm -rf {} +; fi
