"""A fast subset of the stress bench (``python -m bench.stress``): awkward games, every rater."""

import numpy as np

from bench import stress, stress_corpus
from tests import regression


def test_every_rater_rates_a_sample_of_the_stress_corpus():
    rng = np.random.default_rng(80)
    corpus = [("regression", name, np.array(regression.load(name).payoffs)) for name in regression.GAMES]
    corpus += [("degenerate", source, payoffs) for payoffs, source in stress_corpus.degenerate(32, rng)]
    corpus += [("win-probability", source, payoffs)
               for payoffs, source in stress_corpus.win_probability(6, rng)]
    sheriff = corpus[0]
    corpus += [("evolved-variant", source, payoffs) for payoffs, source in stress_corpus.variants(
        sheriff[2], sheriff[1], rng)]
    results = stress.run(corpus, recipe_every=4, log=lambda _: None)
    assert results.failures == []
    assert results.rated["deviation"] == len(corpus)
    assert results.rated["elo"] + results.refusals["elo"] == 6
    assert results.worst["deviation", "violation"] <= 1e-7
    assert results.worst["payoff", "violation"] <= 1e-9
    assert results.worst["nash", "regret"] <= 1e-6
    assert results.worst["alpharank", "residual"] <= 1e-9
    assert results.recipe_compared >= 8 and results.recipe_difference <= 1e-6
    assert f"| deviation | {len(corpus)} | 0 | 0 |" in stress.report(results)


def test_evolved_corpus_yields_the_meta_games_the_loop_rated():
    import itertools

    from metaeval.loops.evolve import EvolveConfig, Evolution

    (first, source0), (second, source1) = itertools.islice(stress_corpus.evolved(1, 2, 1, log=lambda _: None), 2)
    assert (source0, source1) == ("kuhn_3p uniform seed 0 iteration 0", "kuhn_3p uniform seed 0 iteration 1")
    run = Evolution(EvolveConfig(game="kuhn_3p", rater="uniform", iterations=2, seed=0))
    np.testing.assert_array_equal(first, run.evaluator.metagame().payoffs)
    run.step()
    np.testing.assert_array_equal(second, run.evaluator.metagame().payoffs)
    assert not np.array_equal(first, second)
