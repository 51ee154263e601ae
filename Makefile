# One command to set up and run, one to set up and test. The virtual environment is made on first use:
# running needs only the runtime (the steps, TensorFlow, the page, Hera); `make test` adds the test tools.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
RUN_STAMP := $(VENV)/.installed-run
DEV_STAMP := $(VENV)/.installed-dev
# The page's port: make run PORT=8600, make page PORT=8600
PORT ?= 8501
# Use a local copy of mnist.npz where the project's CI keeps one; otherwise the steps download it. The
# tests read the same file; without one they fetch their reference files from pinned URLs
# (tests/reference/files.toml; REFERENCE_MIRROR=http://host:port to fetch the same paths elsewhere).
MNIST_SOURCE ?= $(abspath $(wildcard ../shared/data/mnist.npz))
export MNIST_SOURCE

.PHONY: help setup setup-run run pipeline page test test-fast browser test-containers images lint format \
	manifests clean bench mutation cluster-up cluster-down test-cluster
.DEFAULT_GOAL := help

# What `make lint` checks, and `make test` and `make test-fast` before their tests: ruff's rules, ruff's
# formatting and mypy's types (of workflows/, steps/ and ui/: [tool.mypy] in pyproject.toml).
define LINT
$(BIN)/ruff check .
$(BIN)/ruff format --check .
$(BIN)/mypy
endef

# Each target whose line ends in `## what it does`, with what it does.
help:  ## this list (also `make` alone)
	@echo "make TARGET, one of:"
	@awk -F ':[^#]*## ' '/^[A-Za-z][A-Za-z0-9_-]*:[^=]*## / {printf "  %-16s %s\n", $$1, $$2}' \
		$(firstword $(MAKEFILE_LIST))

setup: $(DEV_STAMP)  ## the runtime and the test tools (pytest, ruff, Playwright, mutmut, ...)

setup-run: $(RUN_STAMP)  ## what running needs: the pipeline, submit.py and the page

# uv installs the locked versions (uv.lock, made from pyproject.toml by `uv lock`; --locked refuses a lock that
# no longer matches it), in parallel: the runtime alone for running, the test tools added for testing. uv itself,
# at the version pyproject.toml requires, sits in its own folder inside the venv, outside what it syncs.
UV_VERSION := $(shell sed -n 's/^required-version = "==\(.*\)"$$/\1/p' pyproject.toml)
UV := $(VENV)/uv/bin/uv
# A venv made when the project required the full `tensorflow` holds both builds in one folder: reinstall
# tensorflow-cpu's files after uv removes the full one.
SITE = $(VENV)/lib/python*/site-packages
OLD_TENSORFLOW = $(and $(wildcard $(SITE)/tensorflow-*.dist-info),$(wildcard $(SITE)/tensorflow_cpu-*.dist-info))
SYNC = UV_PROJECT_ENVIRONMENT=$(VENV) UV_PYTHON_DOWNLOADS=never UV_LINK_MODE=copy $(UV) sync --locked --quiet \
	$(if $(OLD_TENSORFLOW),--reinstall-package tensorflow-cpu)

$(UV): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade --target $(VENV)/uv "uv==$(UV_VERSION)"
	@touch $(UV)

# The run stamp keeps the test tools when `make setup` installed them.
$(RUN_STAMP): $(UV) uv.lock
	$(SYNC) --extra run $(if $(wildcard $(DEV_STAMP)),--extra dev)
	@touch $(RUN_STAMP)

$(DEV_STAMP): $(RUN_STAMP)
	$(SYNC) --extra dev
	@touch $(DEV_STAMP)

run: pipeline page  ## train with the defaults on this machine, then serve the page (PORT=8501)

pipeline: setup-run  ## train with the defaults on this machine, without serving the page
	$(BIN)/python workflows/submit.py --local

page: setup-run  ## serve the page on the published model, without training (PORT=8501)
	$(BIN)/python -m ui.serve --server.port $(PORT)

bench: setup  ## every contender on full MNIST against the targets, printed met or not (about 20 minutes)
	$(BIN)/python -m bench.run $(BENCH_FLAGS)

test: setup browser  ## lint, then the whole test suite (but the container and cluster tests)
	$(LINT)
	$(BIN)/python -m pytest

test-fast: setup  ## lint, then the tests that train nothing and start no server or browser (under 2 minutes)
	$(LINT)
	$(BIN)/python -m pytest -m 'not slow and not containers and not cluster'

# The browser tests drive Debian's Chromium where it is installed, else Playwright's own build.
browser: setup  ## Playwright's Chromium, unless Debian's is installed (apt-get install chromium)
	@test -x /usr/bin/chromium || $(BIN)/python -m playwright install chromium \
		|| echo "no Chromium: the browser tests will fail; apt-get install chromium, or retry online"

# The images and the container tests need podman or docker (infra/docker/install-podman.sh sets podman up).
# ENGINE=podman|docker to choose; BASE_IMAGE=... for another base (default: the official python image, or
# the stand-in base where no registry is reachable).
images:  ## build the steps (no TensorFlow), train and page images
	infra/docker/build-images.sh

# Mutation testing of the modules that hold the project's rules ([tool.mutmut] in pyproject.toml), at low priority;
# mutmut keeps its copy and results in mutants/ and reruns only what changed. `mutmut show NAME` shows a survivor.
mutation: setup  ## mutate the rule-holding modules and list the mutants their tests miss (minutes)
	nice -n 15 $(BIN)/mutmut run
	$(BIN)/mutmut results

test-containers: setup  ## build the images (reusing the layer cache), then the container tests (minutes)
	$(BIN)/python -m pytest -m containers

# The local cluster (infra/local-cluster/, docs/local-cluster.md): Kubernetes, etcd and Argo built from their Go
# modules (cached outside the repository), containerd, runc and the CNI plugins from Debian, run as root.
cluster-up:  ## start a real single-node Kubernetes with Argo on this machine (source .cluster/env to use it)
	infra/local-cluster/up.sh

cluster-down:  ## stop the local cluster, by the PIDs cluster-up recorded, and remove .cluster/
	infra/local-cluster/down.sh

# KEEP=1 leaves the cluster up afterwards. The cluster tests fail, never skip, when no cluster answers.
test-cluster: setup  ## cluster-up, the cluster tests (pytest -m cluster), then cluster-down
	infra/local-cluster/up.sh
	status=0; $(BIN)/python -m pytest -m cluster $(PYTEST_FLAGS) || status=$$?; \
	if [ "$(KEEP)" != 1 ]; then infra/local-cluster/down.sh; fi; exit $$status

lint: setup  ## ruff's rules and formatting, and mypy's types
	$(LINT)

format: setup  ## fix what ruff can, and format the code
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

# The Workflow and WorkflowTemplate committed beside the pipeline's code, rendered with the default settings
# and --artifacts gs://BUCKET (tests/test_manifests.py fails when they differ from what the code renders).
manifests: setup-run  ## write workflows/pipeline/workflow.yaml and workflow-template.yaml again from the code
	$(BIN)/python -m workflows.pipeline.manifests

clean:  ## remove the local runs and the tools' caches (not the venv)
	rm -rf .runs .pytest_cache .ruff_cache .mypy_cache mutants
