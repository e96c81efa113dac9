# The two commands a new developer needs are `make demo` and `make test`;
# both create .venv and install every package (editable) on first use.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PACKAGES := anarchon-core conformance anarchon-sqlite anarchon-redis anarchon-postgres anarchon-rabbitmq anarchon-nats
STAMP := $(VENV)/.installed

.PHONY: dev demo test lint chaos chaos-short bench model clean

dev: $(STAMP)

$(STAMP): requirements-dev.txt $(foreach p,$(PACKAGES),packages/$(p)/pyproject.toml)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt $(foreach p,$(PACKAGES),-e packages/$(p))
	touch $@

demo: dev
	$(BIN)/python examples/demo.py

test: dev
	bash scripts/test-matrix.sh

chaos: dev
	$(BIN)/python -m chaos

chaos-short: dev
	$(BIN)/python -m pytest tests/chaos -m slow

bench: dev
	$(BIN)/python -m benchmarks

lint: dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# spin's exhaustive check of the lease protocol model (model/README.md); needs `spin` and a C compiler.
model:
	bash model/check.sh

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
