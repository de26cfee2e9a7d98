# `make demo` runs the main job, `make test` the test suite; both create .venv first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/metaeval compare --game kuhn_3p --raters uniform,nash,alpharank,deviation \
		--seeds 2 --iterations 10 --workers 2 --out runs/demo

test: $(STAMP)
	$(BIN)/python -m pytest -q -n 2

bench: $(STAMP)
	$(BIN)/python -m bench.ratings
	$(BIN)/python -m bench.spiel
	$(BIN)/python -m bench.distributed

clean:
	rm -rf $(VENV) build *.egg-info
