# One command to set up and run, one to set up and test. The virtual environment is made on first use.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Use a local copy of mnist.npz where the project's CI keeps one; otherwise the steps download it.
MNIST_SOURCE ?= $(wildcard ../shared/data/mnist.npz)
export MNIST_SOURCE

.PHONY: setup run pipeline page test lint format clean bench

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

run: pipeline page  ## train with the defaults on this machine, then serve the page

pipeline: setup
	$(BIN)/python workflows/submit.py --local

page: setup
	$(BIN)/streamlit run ui/app.py

bench: setup  ## every contender on full MNIST against the targets, printed met or not (about 35 minutes)
	$(BIN)/python -m bench.run $(BENCH_FLAGS)

test: setup  ## lint, then the whole test suite
	$(BIN)/ruff check .
	$(BIN)/python -m pytest

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: setup
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

clean:
	rm -rf .runs .pytest_cache .ruff_cache
