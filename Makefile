# realbench — `make demo` runs the main study on embedded defaults; `make test` is what CI runs.
# Both install what they need, idempotently: Debian packages, a virtualenv, the package with extras.

SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
# `make demo` needs only the package itself: not the test, cluster and training extras (torch and
# its CUDA wheels are most of a fresh install's minutes). `make setup` installs everything.
BASE_STAMP := $(VENV)/.base-stamp
PIP := $(PY) -m pip install -q --disable-pip-version-check
# uv resolves and installs the pinned set (constraints.txt) in seconds where pip took minutes (a base
# install 6 s from a cold uv cache against ~2 min, the full set 11 s against ~4 min, on 2 cores). It does
# not read pip's configuration, so pip's find-links (where a machine keeps local wheels, e.g. a CPU
# torch) are passed on. When uv cannot be installed or fails, pip installs the same pinned set.
UV_VERSION := 0.13.9
# a variable, not a literal in $(call …): its commas would split the call's arguments
ALL_EXTRAS := .[dev,ray,train,verl]
UV := $(VENV)/bin/uv
FIND_LINKS := $(foreach d,$(sort $(PIP_FIND_LINKS) $(shell $(PYTHON) -m pip config get global.find-links 2>/dev/null)),--find-links $(d))
install = [ -x $(PY) ] || $(PYTHON) -m venv $(VENV); \
	[ -x $(UV) ] || $(PIP) uv==$(UV_VERSION) || true; \
	if [ -x $(UV) ] && $(UV) pip install -q --python $(PY) $(FIND_LINKS) -c constraints.txt $(1); then :; \
	else $(PIP) -c constraints.txt $(1); fi
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
DEMO_OUT ?= out/demo
# pytest workers for `make test`: the suite mostly waits on Chromium, adb and servers, so two workers
# pay off even on two cores; more cores get more, up to four. Three on two cores was slower (the
# suite 23 min against 21 min with two, quiet 2-core host). PYTEST_WORKERS=0 runs in one process.
PYTEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); [ $$n -lt 2 ] && n=2; [ $$n -gt 4 ] && n=4; echo $$n)

.PHONY: setup system venv demo test lint typecheck pytest certify-all train-example checkpoints clean

setup: system venv

system:
	@missing=""; \
	command -v chromium >/dev/null || missing="$$missing chromium"; \
	command -v chromium-headless-shell >/dev/null || missing="$$missing chromium-headless-shell"; \
	command -v adb >/dev/null || missing="$$missing adb"; \
	[ -e /usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc ] || missing="$$missing fonts-noto-cjk"; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	fi

venv: $(STAMP)

# The venv's own pip (Python 3.11's) installs editable pyproject packages: upgrading it first only
# added a download and a reinstall to every fresh setup.
$(STAMP): pyproject.toml constraints.txt
	@$(call install,-e '$(ALL_EXTRAS)')
	@touch $(STAMP) $(BASE_STAMP)

# A venv that `make setup` completed since pyproject.toml last changed already has the package.
$(BASE_STAMP): pyproject.toml constraints.txt
	@[ $(STAMP) -nt pyproject.toml ] || { $(call install,-e .); }
	@touch $(BASE_STAMP)

demo: system $(BASE_STAMP)
	env -u PYTHONDONTWRITEBYTECODE $(VENV)/bin/realbench demo --out $(DEMO_OUT)

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports

typecheck: venv
	$(VENV)/bin/mypy

# uv installs no bytecode, and where PYTHONDONTWRITEBYTECODE is set none is ever written, so every
# process of the suite (each `python -m realbench`, Ray's node and worker processes, spawned rollout
# workers) compiled torch, Ray, pydantic and realbench from source again: `import torch` 6.2 against
# 2.7 CPU-s, and a Ray test's node timed out starting on a loaded host. The suite's processes write
# the bytecode once, and the later ones load it (__pycache__ is git-ignored).
pytest: setup
	env -u PYTHONDONTWRITEBYTECODE $(VENV)/bin/pytest -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder

test: setup lint typecheck pytest

# Every runnable task of both packs certified on virtual phones (about a quarter of an hour on
# 2 cores); `make test` certifies a stratified subset of them. Exits 1 when a task fails to certify.
certify-all: setup
	$(PY) benchmarks/certify_all.py

# A small element policy trained by RL on the toy clone, browser-free (a few minutes on 2 cores; needs
# the train extra): the untrained base, the trained checkpoint and a summary (docs/rl.md).
TRAIN_EXAMPLE ?= out/train-example
TRAIN_EXAMPLE_ARGS := --pack toy --tasks buy-item --envs 8 --batch-tasks 1 --seed 0
TRAIN_EXAMPLE_UPDATES := 20

train-example: venv
	$(VENV)/bin/realbench train $(TRAIN_EXAMPLE_ARGS) --updates 0 --out $(TRAIN_EXAMPLE)/base --no-progress
	$(VENV)/bin/realbench train $(TRAIN_EXAMPLE_ARGS) --updates $(TRAIN_EXAMPLE_UPDATES) --out $(TRAIN_EXAMPLE)/trained
	$(PY) -c 'import json, pathlib; c = json.loads(pathlib.Path("$(TRAIN_EXAMPLE)/trained/policy.json").read_text()); \
	pathlib.Path("$(TRAIN_EXAMPLE)/summary.json").write_text(json.dumps({k: c[k] for k in ("pack", "tasks", "updates", "seed")}, indent=2) + "\n")'
	@cat $(TRAIN_EXAMPLE)/summary.json

# Retrain every committed element-policy checkpoint from its card's command and check the weights
# byte for byte (about ten CPU-minutes per 192-update card; `make test` reruns the first updates).
checkpoints: venv
	env -u PYTHONDONTWRITEBYTECODE $(PY) benchmarks/checkpoints_rerun.py

clean:
	rm -rf $(VENV) out .pytest_cache .mypy_cache .ruff_cache
