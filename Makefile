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
	$(BIN)/mypy bench

# Two pytest processes (pytest-xdist): most of the suite waits on real processes.
pytest: $(STAMP) prometheus
	$(BIN)/python -m pytest --numprocesses 2

prometheus:
	@scripts/ensure-prometheus

# gRPC's event-engine client off: an operator's tuning (docs/scaling.md); the benches
# that use it set it on both sides of their ratios.
EVENT_ENGINE_OFF := -event_engine_client,-event_engine_for_all_other_endpoints
BENCHES := exporter_fanout \
	"exporter_fanout --sizes 1000,3000 --grpc-experiments=$(EVENT_ENGINE_OFF)" \
	exporter_scale "blackbox --adhoc --grpc-experiments=$(EVENT_ENGINE_OFF)" \
	scrapers worker autoscaler_cycle discovery_scan

bench: $(STAMP) prometheus
	@out=$$(mktemp -d); i=0; \
	for bench in $(BENCHES); do \
	  i=$$((i + 1)); echo "python -m bench.$$bench" > $$out/$$i.cmd; \
	  echo "### python -m bench.$$bench"; \
	  $(BIN)/python -m bench.$$bench > $$out/$$i.txt || { cat $$out/$$i.txt; exit 1; }; \
	  cat $$out/$$i.txt; done; \
	echo "### every goal, from the runs above"; \
	for n in $$(seq 1 $$i); do \
	  if grep -q "goal" $$out/$$n.txt; then cat $$out/$$n.cmd; grep "goal" $$out/$$n.txt; fi; \
	done; rm -r $$out

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,wool]'
	touch $(STAMP)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
