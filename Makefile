# The README's commands. Everything runs from the pinned .venv that `make setup` creates.
SHELL := /bin/bash
VENV := .venv
BIN := $(VENV)/bin
export PATH := $(CURDIR)/$(BIN):$(PATH)
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
# Extra ansible-playbook arguments, e.g. make run ARGS="-e gpus=1,2,4"
ARGS ?=
PYTEST_ARGS ?=

.PHONY: setup run test test-python lint doc-check molecule bench clean

setup:
	@scripts/bootstrap.sh

run: setup
	ansible-playbook run-benchmark.yml $(ARGS)

# Everything CI proves: pytest (unit + integration), ansible-lint (production profile,
# offline), ruff (lint and format check), every module rendered by ansible-doc, every role's
# molecule scenario.
test: setup
	scripts/test.sh $(PYTEST_ARGS)

test-python: setup
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: setup
	scripts/lint.sh
	scripts/ruff.sh

doc-check: setup
	$(BIN)/python -m pytest tests/modules/test_ansible_doc.py

molecule: setup
	scripts/molecule.sh

# The benchmark suite (P1-P4 of issue #9): ratios against baselines measured in the same run.
# BENCH="p1 p4" runs only those.
BENCH ?=
bench: setup
	scripts/bench.sh $(BENCH)

clean:
	rm -rf $(VENV) .pytest_cache results/report
