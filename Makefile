# `make demo` shows what metaeval is for, `make test` runs the test suite; both create .venv first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Two installs, each marked by a stamp: the package alone (what the demo and every command
# need) and, on top of it, the test, documentation and RLlib extras (the suite builds the site).
INSTALLED := $(VENV)/.installed
TESTED := $(VENV)/.installed-test

.PHONY: demo test docs cluster-test bench bench-pairwise stress results pbt-results study study-small clean

$(INSTALLED): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e .
	touch $@

# The rllib extra (RLlib and torch 2.13.0, a CPU build) is there so that the RLlib integration's
# tests run: it adds 858 MiB to the environment (torch 754 MiB, sympy 80 MiB) and 27-80 s to this
# install with pip's cache warm (33-86 s measured against 6 s for this install with nothing to add,
# on 2 shared cores), and its tests about 35 s to the suite.
$(TESTED): $(INSTALLED)
	$(BIN)/python -m pip install --quiet -e '.[test,docs,rllib]'
	touch $@

# JPSRO on three-player Kuhn poker until its CCE gap is 0, then its final population rated
# three ways; results and figures in runs/demo (about a minute on 2 cores).
demo: $(INSTALLED)
	$(BIN)/python -m metaeval.loops.demo --out runs/demo

test: $(TESTED)
	$(BIN)/python -m pytest -q -n 2

# The documentation site: built with --strict (a broken reference or a missing page fails),
# then served on http://127.0.0.1:8000 until Ctrl-C.
docs: $(TESTED)
	$(BIN)/python -m mkdocs build --strict
	$(BIN)/python -m mkdocs serve --strict --dev-addr 127.0.0.1:8000

# Tests that start Ray processes of their own: a two-node local cluster (`ray start --head`
# plus a second node, stopped by process id), SIGTERM and SIGKILL of drivers with embedded Ray.
cluster-test: $(INSTALLED)
	$(BIN)/python -m pip install --quiet -e '.[test,client]'
	$(BIN)/python -m pytest -q -p no:xdist -m cluster -s

bench: $(INSTALLED)
	$(BIN)/python -m pip install --quiet -e '.[test,bench]'
	$(BIN)/python -m bench.ratings
	$(BIN)/python -m bench.nash
	$(BIN)/python -m bench.spiel
	$(BIN)/python -m bench.distributed
	$(BIN)/python -m bench.sampled
	$(BIN)/python -m bench.psro
	$(BIN)/python -m bench.learners
	$(BIN)/python -m bench.replacements

# Every rater on the stress corpus (generated into runs/ on first use; about an hour on 2 cores).
stress: $(TESTED)
	$(BIN)/python -m bench.stress --corpus runs/stress_corpus.npz

# Pairwise benchmarks (the arena reference refits a logistic regression on a million battles: minutes).
bench-pairwise: $(TESTED)
	$(BIN)/python -m bench.pairwise
	$(BIN)/python -m bench.poe
	$(BIN)/python -m bench.clones

# The README's results: 5 seeds x 100 iterations x 4 raters on kuhn_3p and sheriff.
results: $(INSTALLED)
	for game in kuhn_3p sheriff; do \
		$(BIN)/metaeval compare --game $$game --raters uniform,nash,alpharank,deviation \
			--seeds 5 --iterations 100 --jobs 2 --out runs/results-$$game || exit 1; \
		mkdir -p docs/results/$$game; \
		cp runs/results-$$game/cce_gap.png runs/results-$$game/payoff.png \
			runs/results-$$game/final.csv runs/results-$$game/paired.csv docs/results/$$game/; \
	done

# PBT with Q-learners against random replacements on kuhn_3p (the README's figure).
pbt-results: $(INSTALLED)
	$(BIN)/python -m metaeval.loops.study pbt-vs-random --out runs/pbt-vs-random --seeds 3 --steps 20 \
		--population 8 --episodes-per-step 500 --matchmaking mecce
	mkdir -p docs/results/pbt
	cp runs/pbt-vs-random/cce_gap.png runs/pbt-vs-random/final.csv docs/results/pbt/

# Does the rater matter? 30 seeds x 300 iterations x 5 raters x 4 replacements x 2 games
# (resumable: rerun to continue; runs recorded in docs/results/study-full/records are not
# run again). study-small is the reduced run the README reports.
study: $(INSTALLED)
	$(BIN)/python -m metaeval.loops.study raters --out runs/study-full --seeds 30 --iterations 300 --jobs 2 \
		--records docs/results/study-full/records --publish docs/results/study-full

study-small: $(INSTALLED)
	$(BIN)/python -m metaeval.loops.study raters --out runs/study --games kuhn_3p,sheriff \
		--replacements random,mutate,best-response --seeds 6 --iterations 30 --every 10 --jobs 1 \
		--publish docs/results/study
	$(BIN)/python -m metaeval.loops.study raters --out runs/study-learned-small --games kuhn_3p,sheriff \
		--replacements learned --seeds 3 --iterations 15 --every 5 --jobs 1 --publish docs/results/study-learned-small

clean:
	rm -rf $(VENV) build site *.egg-info
