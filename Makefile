# The two commands a new developer needs are `make demo` and `make test`;
# both create .venv and install every package (editable) on first use.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Every distribution under packages/ (a backend's folder brings its own; see packages/*/backend.toml).
PACKAGES := $(patsubst packages/%/pyproject.toml,%,$(wildcard packages/*/pyproject.toml))
STAMP := $(VENV)/.installed

.PHONY: dev demo demo-web test test-docker services-docker services-docker-down template-check generate lint docs docs-build chaos chaos-short chaos-failover bench model clean

dev: $(STAMP)

$(STAMP): requirements-dev.txt $(foreach p,$(PACKAGES),packages/$(p)/pyproject.toml)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt $(foreach p,$(PACKAGES),-e packages/$(p))
	touch $@

demo: dev
	$(BIN)/python examples/demo.py

# The demo fleet, left running, with the dashboard of it; prints its address.
demo-web: dev
	$(BIN)/python examples/demo_web.py

test: dev
	bash scripts/test-matrix.sh

# The docs site (mkdocs.yml, docs/): serve it with live reload, or build it
# strictly (every warning fails: broken links, missing includes) into site/.
docs: dev
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve

docs-build: dev
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

chaos: dev
	$(BIN)/python -m chaos

chaos-short: dev
	$(BIN)/python -m pytest tests/chaos -m slow

chaos-failover: dev
	$(BIN)/python -m chaos.failover

bench: dev
	$(BIN)/python -m benchmarks

# Every backend's tests against servers pytest starts in Docker (pytest-docker,
# docker-compose.yml; CONTRIBUTING "With Docker"): the backend steps only, and
# of them the tests that use the server (ANARCHON_DOCKER_ALL=1 keeps all).
# `ANARCHON_BROKERS=docker make test` is the whole suite with the brokers in
# containers, each test once (what CI runs).
# Recursive (=): read from the manifests only when test-docker runs, not on every make call.
DOCKER_STEPS = $(shell python3 scripts/backends.py services | cut -f1 | paste -sd, -)
test-docker: dev
	ANARCHON_BROKERS=docker ANARCHON_DOCKER_ALL=$${ANARCHON_DOCKER_ALL:-0} \
	  ANARCHON_STEPS=$${ANARCHON_STEPS:-$(DOCKER_STEPS)} bash scripts/test-matrix.sh

# The same servers left running for you: eval "$$(make -s services-docker)" exports their URLs.
services-docker: dev
	$(BIN)/python -m scripts.docker_services up

services-docker-down: dev
	$(BIN)/python -m scripts.docker_services down

# The backend template (examples/backend-template) out of the tree, against anarchon-core and
# anarchon-conformance only, as a third party installs it.
template-check:
	bash scripts/template-check.sh

# Rewrite what is made from the backends' manifests (packages/*/backend.toml); lint fails when stale.
generate:
	python3 scripts/backends.py generate

lint: dev
	python3 scripts/backends.py check
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

# spin's exhaustive checks of the lease protocol model (model/README.md; about 3 min on 2 loaded cores); needs `spin` and gcc.
model:
	bash model/check.sh

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache site
