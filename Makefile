# The two commands of the README: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint pytest prometheus bench clean

# One virtualenv for both commands: the demo needs the wool extra (it runs real
# wool pools), the tests need it and the test extra; installing both at once
# keeps one stamp, so `make test` after `make demo` installs nothing more.
demo: $(STAMP)
	$(BIN)/wool-idle demo

test: lint pytest

lint: $(STAMP)
	$(BIN)/ruff check wool_idle tests bench deploy
	$(BIN)/ruff format --check wool_idle tests bench deploy
	$(BIN)/mypy
	$(BIN)/mypy deploy

pytest: $(STAMP) prometheus
	$(BIN)/python -m pytest

prometheus:
	@scripts/ensure-prometheus

bench: $(STAMP) prometheus
	@out=$$(mktemp -d); \
	for name in exporter_fanout exporter_scale blackbox scrapers worker autoscaler_cycle; do \
	  echo "### python -m bench.$$name"; \
	  $(BIN)/python -m bench.$$name > $$out/$$name.txt || { cat $$out/$$name.txt; exit 1; }; \
	  cat $$out/$$name.txt; done; \
	echo "### every goal, from the runs above"; grep -h "goal" $$out/*.txt; rm -r $$out

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,wool]'
	touch $(STAMP)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
