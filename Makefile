# KAOS developer entry points. On a fresh machine `make run` and `make test` do all set-up:
# the virtual environment, PostgreSQL with pgvector, and the Kubernetes test binaries.
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# The workspace's distributions, one directory each with its own pyproject.toml (the root
# pyproject.toml lists them): installed editable, so every change is live in the venv.
MEMBERS := core cli devmodel images/memory images/agent images/operator
# The stamp changes when a dependency declaration or the pins change, so a pull that
# adds a dependency reinstalls on the next make.
STAMP := $(VENV)/.installed

PYTEST_ARGS ?=

.PHONY: help
help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

# pip 25.1 reads dependency groups (--group). A venv made when the workspace was one
# distribution named `kaos` has it removed first: its editable finder and commands would
# shadow the members'.
$(STAMP): pyproject.toml $(MEMBERS:%=%/pyproject.toml) constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade 'pip>=25.1' setuptools wheel
	if $(BIN)/python -m pip show -q kaos >/dev/null 2>&1; then $(BIN)/python -m pip uninstall -q -y kaos; fi
	$(BIN)/python -m pip install -q --constraint constraints.txt $(MEMBERS:%=-e ./%) --group dev
	touch $@

.PHONY: venv
venv: $(STAMP) ## create the virtual environment: every member editable, the dev tools

.PHONY: services
services: node-tools ## install and start the test services (PostgreSQL+pgvector, Kubernetes binaries, KEDA, Jaeger, Ory Hydra, Local KMS, Gateway API CRDs, Ollama with SmolLM2-135M and a registry)
	hack/postgres install
	hack/postgres start
	hack/k8s-build
	hack/k8s-build node
	hack/keda-build
	hack/netpol-build
	hack/jaeger-build
	hack/hydra-build
	hack/kms-build
	hack/ollama-build
	hack/gateway-api-crds >/dev/null

# Every shell script of the project; shellcheck comes from Debian (.ci/run installs it).
SHELL_SCRIPTS := .ci/run hack/postgres hack/k8s-build hack/netpol-build hack/jaeger-build hack/hydra-build hack/kms-build hack/keda-build hack/ollama-build hack/test-cluster hack/cluster hack/gen-crds hack/gen-docs hack/docs hack/gateway-api-crds \
	hack/bench/memory hack/bench/memory-replicas hack/bench/operator hack/bench/locomo hack/bench/realmodel hack/bench/agent $(wildcard hack/kind/*) \
	hack/images hack/dev-images/pgvector/docker-entrypoint.sh

# shellcheck (the lint), zsh (the CLI's zsh completion test) and chromium with its driver
# (the console's browser tests, tests/e2e/console) from Debian when missing (root, or
# sudo), so `make test` sets up a fresh machine.
.PHONY: tools
tools:
	@missing=; for tool in shellcheck zsh chromium chromedriver; do command -v $$tool >/dev/null || missing="$$missing $$tool"; done; \
	missing="$${missing/chromedriver/chromium-driver}"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then sudo=; else sudo=sudo; fi; \
	  $$sudo apt-get update -qq && $$sudo apt-get install -y -qq $$missing; fi

# The real node (hack/test-cluster up --real-node, tests/e2e/realnode) from Debian when
# missing: runc, the CNI plugins, iptables and conntrack for kube-proxy, ipset for its
# NetworkPolicy engine (hack/netpol-build), and a static busybox for the node's own test image.
.PHONY: node-tools
node-tools:
	@missing=; for pkg in runc containernetworking-plugins iptables conntrack iproute2 ipset busybox-static; do \
	  dpkg-query -W -f='$${Status}' $$pkg 2>/dev/null | grep -q 'ok installed' || missing="$$missing $$pkg"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then sudo=; else sudo=sudo; fi; \
	  $$sudo apt-get update -qq && $$sudo apt-get install -y -qq $$missing; fi

# The images without a container engine (hack/images; tests/e2e/images): buildah, and
# mmdebstrap for the Debian-made Python base, from Debian when missing. Cached by their
# inputs in ~/.cache/kaos/images, so a rerun with nothing changed is instant.
.PHONY: images
images: ## build the KAOS, LiteLLM and pgvector images with buildah (root; hack/images --list)
	@missing=; for pkg in buildah mmdebstrap runc; do \
	  dpkg-query -W -f='$${Status}' $$pkg 2>/dev/null | grep -q 'ok installed' || missing="$$missing $$pkg"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then sudo=; else sudo=sudo; fi; \
	  $$sudo apt-get update -qq && $$sudo apt-get install -y -qq $$missing; fi
	@if [ "$$(id -u)" = 0 ]; then hack/images; else echo "images: skipped, hack/images needs root (buildah runs rootful)"; fi

# The real node needs root; hack/cluster builds what is missing (the binaries, the images)
# on first use, then deploys the chart and the samples and waits until each is Ready.
.PHONY: cluster
cluster: $(STAMP) node-tools ## a local cluster where the samples run for real: a real node, the chart, every sample Ready (root)
	hack/cluster up

.PHONY: cluster-down
cluster-down: ## stop the `make cluster` cluster and leave the machine as it was found
	hack/cluster down

.PHONY: lint
lint: $(STAMP) tools ## ruff, mypy, the import contracts (.importlinter) and shellcheck
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports --no-logo
	shellcheck $(SHELL_SCRIPTS)

.PHONY: test
test: $(STAMP) services images lint docs ## everything CI runs: lint, types, the docs site, all tests (the slowest named at the end, to keep CI time in check)
	eval "$$(hack/postgres env)"; \
	eval "$$(hack/k8s-build --print-env | sed 's/^/export /')"; export PATH="$$KAOS_K8S_BIN:$$PATH"; \
	$(BIN)/python -m pytest -p no:cacheprovider --durations=30 $(PYTEST_ARGS)

# MkDocs runs from its own virtualenv in ~/.cache/kaos/docs (hack/docs makes it, pinned by
# hack/docs-requirements.txt); the project's venv generates the CLI reference page.
.PHONY: docs
docs: $(STAMP) ## the documentation site from docs/ into build/site, strict: a broken link fails it
	hack/docs

.PHONY: unit
unit: $(STAMP) ## the fast tests only: in-process, no subprocess, PostgreSQL or Kubernetes
	$(BIN)/python -m pytest -p no:cacheprovider tests/unit $(PYTEST_ARGS)

# RUN_ARGS=--real-model runs it on SmolLM2-135M served by Ollama, built and cached first
# by hack/ollama-build (instant once built).
.PHONY: run
run: $(STAMP) ## the main job: the local stack on embedded defaults with a scripted conversation
	@if [[ " $(RUN_ARGS) " == *" --real-model "* ]]; then hack/ollama-build >&2; fi
	$(BIN)/python hack/run_local.py $(RUN_ARGS)

.PHONY: constraints
constraints: $(STAMP) ## re-pin every transitive version from the current environment
	{ echo "# Every transitive version of the resolved install (pip freeze of the members and the dev group)."; \
	  echo "# Regenerate with: make constraints"; \
	  $(BIN)/python -m pip freeze --exclude-editable | grep -v '^kaos'; } > constraints.txt

.PHONY: clean
clean: ## remove the virtual environment and caches in the checkout
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
