# The two commands: `make demo` and `make test`. Both set up .venv on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: demo test lint typecheck imports unit bench soak clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	@bash scripts/demo.sh

test: lint typecheck imports unit

lint: $(STAMP)
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .

typecheck: $(STAMP)
	$(BIN)/mypy

imports: $(STAMP)
	$(BIN)/lint-imports

unit: $(STAMP)
	$(BIN)/pytest

bench: $(STAMP)
	$(BIN)/python -m bench.run

# The chaos soak: 24 virtual hours, ~2,000 pods, seeded faults; writes docs/reliability.md.
soak: $(STAMP)
	PYTHONPATH=. $(BIN)/python scripts/soak.py --seed $${SEED:-1} --hours $${HOURS:-24}

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
