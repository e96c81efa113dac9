# The two commands a new developer needs are `make demo` and `make test`;
# both create .venv and install every package (editable) on first use.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PACKAGES := anarchon-core anarchon conformance anarchon-sqlite anarchon-redis anarchon-postgres anarchon-rabbitmq anarchon-nats anarchon-prometheus anarchon-opentelemetry anarchon-web
STAMP := $(VENV)/.installed

.PHONY: dev demo demo-web test lint docs docs-build chaos chaos-short chaos-failover bench model clean

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

lint: dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

# spin's exhaustive checks of the lease protocol model (model/README.md; about 3 min on 2 loaded cores); needs `spin` and gcc.
model:
	bash model/check.sh

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache site
