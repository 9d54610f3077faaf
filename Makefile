# The two commands: `make demo` and `make test`. Both set up .venv on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: demo test lint typecheck imports unit browser bench soak clean

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

unit: $(STAMP) browser
	$(BIN)/pytest

# headless Chromium from Debian for the report's browser test (skips apt when it is installed)
browser:
	@bash scripts/install_chromium.sh

bench: $(STAMP)
	$(BIN)/python -m bench.run

# The chaos soak: 24 virtual hours, ~2,000 pods, seeded faults; writes docs/reliability.md.
soak: $(STAMP)
	PYTHONPATH=. $(BIN)/python scripts/soak.py --seed $${SEED:-1} --hours $${HOURS:-24}

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
