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
