# `make demo` runs the main job, `make test` the test suite; both create .venv first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test bench bench-pairwise results clean

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
	$(BIN)/python -m bench.nash
	$(BIN)/python -m bench.spiel
	$(BIN)/python -m bench.distributed

# Pairwise benchmarks (the arena reference refits a logistic regression on a million battles: minutes).
bench-pairwise: $(STAMP)
	$(BIN)/python -m bench.pairwise
	$(BIN)/python -m bench.poe
	$(BIN)/python -m bench.clones

# The README's results: 5 seeds x 100 iterations x 4 raters on kuhn_3p and sheriff.
results: $(STAMP)
	for game in kuhn_3p sheriff; do \
		$(BIN)/metaeval compare --game $$game --raters uniform,nash,alpharank,deviation \
			--seeds 5 --iterations 100 --jobs 2 --out runs/results-$$game || exit 1; \
		mkdir -p docs/results/$$game; \
		cp runs/results-$$game/cce_gap.png runs/results-$$game/payoff.png \
			runs/results-$$game/final.csv runs/results-$$game/paired.csv docs/results/$$game/; \
	done

clean:
	rm -rf $(VENV) build *.egg-info
