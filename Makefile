# `make demo` runs the main job, `make test` the test suite; both create .venv first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test cluster-test bench stress results clean

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

# Tests that start Ray processes of their own: a two-node local cluster (`ray start --head`
# plus a second node, stopped by process id), SIGTERM and SIGKILL of drivers with embedded Ray.
cluster-test: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[test,client]'
	$(BIN)/python -m pytest -q -p no:xdist -m cluster -s

bench: $(STAMP)
	$(BIN)/python -m bench.ratings
	$(BIN)/python -m bench.nash
	$(BIN)/python -m bench.spiel
	$(BIN)/python -m bench.distributed

# Every rater on the stress corpus (generated into runs/ on first use; about an hour on 2 cores).
stress: $(STAMP)
	$(BIN)/python -m bench.stress --corpus runs/stress_corpus.npz

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
