"""Bootstrap replicates warm-started from the point rating (metaeval.ratings.warm)."""

import warnings

import numpy as np
import pytest

from metaeval import MetaGame
from metaeval.ratings import RATERS
from metaeval.ratings.bootstrap import Resampler, replicate_ratings, with_intervals
from metaeval.ratings.deviation import COLUMN_GENERATION_JOINTS
from metaeval.errors import MetaEvalError
from metaeval.ratings.warm import warm_replicates
from metaeval.ratings.warm_chains import ChainReplicates
from metaeval.solvers.mecce import NEWTON_FIRST_JOINTS

REPLICATES = 8


def noisy_random_game(shape, seed=0, stderr=0.05):
    payoffs = np.random.default_rng(seed).uniform(-1, 1, (len(shape), *shape))
    return MetaGame(payoffs, stderr=np.full(payoffs.shape, stderr))


def both_ways(game, method, options=None):
    """The replicates' ratings warm-started and from scratch, and the warm run's count of
    replicates rated from scratch."""
    runs = {warm: with_intervals(game, RATERS[method], options or {}, REPLICATES, seed=3, level=0.5,
                                 progress=False, warm_start=warm) for warm in (True, False)}
    warm, cold = (np.concatenate(runs[w].replicates, axis=1) for w in (True, False))
    return warm, cold, runs[True].diagnostics["bootstrap"]["cold_replicates"]


@pytest.mark.parametrize("method, shape, tolerance", [
    ("payoff", (4, 4, 4), 1e-11),  # stored CCE matrix
    ("payoff", (13, 13, 13), 1e-11),  # implicit: 2,197 joints
    ("deviation", (4, 4, 4), 1e-9),
    ("deviation", (13, 13, 13), 1e-9),  # column generation in the point rating too
])
def test_warm_replicates_equal_cold_ones(method, shape, tolerance):
    warm, cold, from_scratch = both_ways(noisy_random_game(shape), method)
    assert from_scratch == 0  # every replicate took the warm path
    np.testing.assert_allclose(warm, cold, rtol=0, atol=tolerance)


def test_the_sizes_cover_both_paths():
    assert 4 * 4 * 4 <= NEWTON_FIRST_JOINTS < 13**3 and 4 * 4 * 4 <= COLUMN_GENERATION_JOINTS < 13**3


def test_payoff_has_no_warm_start_where_the_mecce_leaves_joints_out():
    """Strategy 1 of each player is strictly dominated: no CCE plays it, so the dual's
    multipliers diverge and Newton on every joint certifies nothing."""
    payoffs = np.random.default_rng(1).uniform(-1, 1, (2, 3, 3))
    payoffs[0, 1] = payoffs[0, 0] - 1.0
    payoffs[1, :, 1] = payoffs[1, :, 0] - 1.0
    game = MetaGame(payoffs, stderr=np.full(payoffs.shape, 0.01))
    assert warm_replicates(RATERS["payoff"], RATERS["payoff"](game), {}) is None
    warm, cold, from_scratch = both_ways(game, "payoff")
    assert from_scratch == REPLICATES
    np.testing.assert_array_equal(warm, cold)


def test_payoff_replicates_of_a_batch_are_solved_together_or_one_by_one():
    """On stored CCE matrices a batch's replicates are solved in lock-step; one the batch
    leaves uncertified (here strategy 0 strictly dominates for every player, so the MECCE
    is that one joint) goes the one-by-one way, which declines it too (None: rated from
    scratch)."""
    game = noisy_random_game((3, 4, 3))
    warm = warm_replicates(RATERS["payoff"], RATERS["payoff"](game), {})
    assert warm.batched
    payoffs = np.stack([Resampler(game).draw(np.random.default_rng(seed)) for seed in range(3)])
    payoffs[2, 0, 1:] = payoffs[2, 0, :1] - 1.0
    payoffs[2, 1, :, 1:] = payoffs[2, 1, :, :1] - 1.0
    payoffs[2, 2, :, :, 1:] = payoffs[2, 2, :, :, :1] - 1.0
    rows = warm(payoffs)
    assert rows[2] is None and warm.one(payoffs[2]) is None
    for drawn, row in zip(payoffs[:2], rows[:2]):
        np.testing.assert_allclose(row, warm.one(drawn), rtol=0, atol=1e-11)
        np.testing.assert_allclose(row, np.concatenate(RATERS["payoff"](MetaGame(drawn)).ratings), rtol=0, atol=1e-11)


def test_payoff_replicates_of_a_game_with_clones_are_solved_one_by_one():
    """Cloned strategies make the dual linear along a direction, which the lock-step
    Newton does not follow."""
    payoffs = np.random.default_rng(4).uniform(-1, 1, (3, 3, 3, 3))
    payoffs = np.concatenate([payoffs, payoffs[:, :1]], axis=1)  # player 0's strategy 0 twice
    game = MetaGame(payoffs, stderr=np.full(payoffs.shape, 0.05))
    warm = warm_replicates(RATERS["payoff"], RATERS["payoff"](game), {})
    assert warm is not None and not warm.batched
    warm_rows, cold, from_scratch = both_ways(game, "payoff")
    np.testing.assert_allclose(warm_rows, cold, rtol=0, atol=1e-11)


def test_a_replicate_the_warm_start_declines_is_rated_from_scratch():
    game = noisy_random_game((3, 3, 3))
    seeds = np.random.SeedSequence(0).spawn(4)
    cold = replicate_ratings(game, RATERS["payoff"], {}, None, seeds)
    declined = replicate_ratings(game, RATERS["payoff"], {}, None, seeds, warm=lambda payoffs: None)
    np.testing.assert_array_equal(declined[0], cold[0])
    assert cold[2] == declined[2] == 4


def test_warm_deviation_replicates_start_from_the_point_support():
    game = noisy_random_game((4, 4, 4))
    rating = RATERS["deviation"](game)
    warm = warm_replicates(RATERS["deviation"], rating, {})
    np.testing.assert_array_equal(warm.support, np.flatnonzero(rating.distribution.ravel() > 0))
    payoffs = Resampler(game).draw(np.random.default_rng(0))
    np.testing.assert_allclose(warm(payoffs), np.concatenate(RATERS["deviation"](MetaGame(payoffs)).ratings),
                               rtol=0, atol=1e-9)


@pytest.mark.parametrize("shape, spread, options", [
    ((8, 8, 8), 0.05, {}),  # nearly tied payoffs, like a sampled meta-game's, at alpha 100
    ((5, 6, 7), 1.0, {"alpha": 2.0, "population_size": 10}),
    ((12, 12), 1.0, {"alpha": 1.0}),
])
def test_warm_alpharank_replicates_equal_cold_ones(shape, spread, options):
    payoffs = np.random.default_rng(0).uniform(-spread, spread, (len(shape), *shape))
    game = MetaGame(payoffs, stderr=np.full(payoffs.shape, spread / 4))
    assert RATERS["alpharank"](game, **options).diagnostics["aggregation_levels"] == 1
    warm, cold, from_scratch = both_ways(game, "alpharank", options)
    assert from_scratch == 0  # every replicate took the warm path
    np.testing.assert_allclose(warm, cold, rtol=0, atol=1e-12)


def test_alpharank_replicates_solved_in_lock_step_equal_each_solved_alone():
    """A batch's chains share the solver's iterations, each stopping at its own residual: a
    replicate's rating does not depend on the batch it is solved in, nor on a chain of the
    batch that is declined (here one with three metastable classes)."""
    game = MetaGame(np.random.default_rng(5).uniform(-0.05, 0.05, (3, 6, 6, 6)),
                    stderr=np.full((3, 6, 6, 6), 0.0125))
    warm = warm_replicates(RATERS["alpharank"], RATERS["alpharank"](game), {})
    payoffs = np.stack([Resampler(game).draw(np.random.default_rng(seed)) for seed in range(5)])
    payoffs[2] = 0.0
    for a in range(6):
        payoffs[2, :, a, a, a] = 10.0  # coordination: three strict equilibria and more
    together = warm(payoffs)
    assert together[2] is None
    for b in (0, 1, 3, 4):
        alone = warm(payoffs[b : b + 1])[0]
        np.testing.assert_allclose(together[b], alone, rtol=0, atol=1e-13)
        cold = np.concatenate(RATERS["alpharank"](MetaGame(payoffs[b])).ratings)
        np.testing.assert_allclose(together[b], cold, rtol=0, atol=1e-13)


def test_an_alpharank_replicate_whose_state_barely_exits_raises_no_warning():
    """Replicate 28 of a random 3 x 8 game's bootstrap (seed 0) has a state whose exit
    rates sum below its in-rates by more than the double range: the anchor rule's ratio is
    then infinite, as markov takes it, without a RuntimeWarning. (Its chain has several
    metastable classes, so it is rated from scratch.)"""
    payoffs = np.random.default_rng(0).uniform(-1.0, 1.0, (3, 8, 8, 8))
    game = MetaGame(payoffs, stderr=np.full(payoffs.shape, 0.05))
    warm = warm_replicates(RATERS["alpharank"], RATERS["alpharank"](game), {})
    drawn = Resampler(game).draw(np.random.default_rng(np.random.SeedSequence(0).spawn(100)[28]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert warm(drawn[None]) == [None]
    assert RATERS["alpharank"](MetaGame(drawn)).diagnostics["aggregation_levels"] > 1


def test_a_replicate_chain_with_several_classes_is_rated_from_scratch():
    """Each player earning 10 when all three play alike has three strict equilibria, so its
    chain at alpha 100 has three metastable classes, which markov aggregates."""
    game = MetaGame(np.random.default_rng(2).uniform(-0.05, 0.05, (3, 3, 3, 3)))
    rating = RATERS["alpharank"](game)
    warm = warm_replicates(RATERS["alpharank"], rating, {})
    coordination = np.zeros((3, 3, 3, 3))
    for a in range(3):
        coordination[:, a, a, a] = 10.0
    rows = warm(np.stack([game.payoffs, coordination]))
    assert rows[1] is None
    np.testing.assert_allclose(rows[0], np.concatenate(rating.ratings), rtol=0, atol=1e-12)


def test_alpharank_has_no_warm_start_where_its_point_chain_has_several_classes():
    coordination = np.zeros((3, 3, 3, 3))
    for a in range(3):
        coordination[:, a, a, a] = 10.0
    rating = RATERS["alpharank"](MetaGame(coordination))
    assert rating.diagnostics["aggregation_levels"] > 1
    assert ChainReplicates.from_rating(rating) is None


def test_a_batched_warm_start_that_refuses_declines_its_whole_batch():
    game = noisy_random_game((3, 3, 3))
    seeds = np.random.SeedSequence(0).spawn(4)

    class Refusing:
        batched = True
        shapes = []

        def __call__(self, payoffs):
            self.shapes.append(payoffs.shape)
            raise MetaEvalError("over the memory budget")

    cold = replicate_ratings(game, RATERS["alpharank"], {}, None, seeds)
    declined = replicate_ratings(game, RATERS["alpharank"], {}, None, seeds, warm=Refusing())
    assert Refusing.shapes == [(4, 3, 3, 3, 3)]  # one call on the whole batch
    np.testing.assert_array_equal(declined[0], cold[0])
    assert declined[2] == 4


@pytest.mark.parametrize("shape", [(4, 4, 4), (3, 3, 3, 3), (5, 6)])
def test_warm_nash_replicates_equal_cold_ones(shape):
    game = noisy_random_game(shape, seed=1)
    assert RATERS["nash"](game).diagnostics["equilibrium"] == "limiting logit equilibrium"
    warm, cold, from_scratch = both_ways(game, "nash")
    assert from_scratch == 0  # every replicate's branch traced in the batch
    np.testing.assert_allclose(warm, cold, rtol=0, atol=1e-10)


def test_nash_branches_traced_in_lock_step_end_where_each_traced_alone_does():
    from metaeval.ratings import logit
    from metaeval.ratings.logit_batch import trace_logit_branches
    from metaeval.ratings.nash import well_scaled

    game = noisy_random_game((5, 4, 6), seed=2, stderr=0.2)
    payoffs = np.stack([well_scaled(Resampler(game).draw(np.random.default_rng(seed)))[0] for seed in range(6)])
    ends = trace_logit_branches(payoffs, logit.TRACE_REGRET)
    for tensor, reached in zip(payoffs, ends):
        assert logit.max_regret(tensor, reached) <= logit.TRACE_REGRET * np.ptp(tensor)
        alone = logit.limiting_logit_equilibrium(tensor)
        batched = logit.limiting_logit_equilibrium(tensor, reached=reached)
        for x, y in zip(alone, batched):
            np.testing.assert_allclose(y, x, rtol=0, atol=1e-12)


def test_a_nash_replicate_off_the_general_branch_or_not_ended_is_rated_from_scratch(monkeypatch):
    """A symmetric replicate selects the symmetric branch's equilibrium, which the batch
    does not trace; a branch the batch leaves unended (here: step limit 5) goes from scratch."""
    from metaeval.ratings import logit_batch

    game = noisy_random_game((3, 3, 3))
    warm = warm_replicates(RATERS["nash"], RATERS["nash"](game), {})
    assert warm.batched
    symmetric = np.zeros((3, 3, 3, 3))
    for a in np.ndindex(3, 3, 3):
        for p in range(3):
            others = sum(a) - a[p]
            symmetric[(p, *a)] = (a[p] - 1) * (1 + others) - others**2 / 3  # G_p(a) = f(a_p, the others' sum)
    assert MetaGame(symmetric).is_symmetric()
    rows = warm(np.stack([game.payoffs, symmetric]))
    assert rows[1] is None
    np.testing.assert_allclose(rows[0], np.concatenate(RATERS["nash"](game).ratings), rtol=0, atol=1e-10)
    monkeypatch.setattr(logit_batch, "_MAX_STEPS", 5)
    assert warm(game.payoffs[None]) == [None]
    warm_rows, cold, from_scratch = both_ways(game, "nash")
    assert from_scratch == REPLICATES
    np.testing.assert_array_equal(warm_rows, cold)


def test_nash_has_no_warm_start_off_the_general_logit_branch():
    zero_sum = np.random.default_rng(0).uniform(-1, 1, (4, 4))
    for game, options in [(noisy_random_game((3, 3, 3)), {"target": "affinity"}),
                          (MetaGame(np.stack([zero_sum, -zero_sum])), {})]:
        assert warm_replicates(RATERS["nash"], RATERS["nash"](game, **options), options) is None


def test_a_batched_warm_start_takes_tasks_of_its_chunk():
    game = noisy_random_game((3, 3, 3))
    sizes = []

    class Declining:
        batched, chunk = True, 5

        def __call__(self, payoffs):
            sizes.append(len(payoffs))
            return [None] * len(payoffs)

    monkeypatch = pytest.MonkeyPatch()
    with monkeypatch.context() as patch:
        patch.setattr("metaeval.ratings.bootstrap.warm_replicates", lambda *args: Declining())
        with_intervals(game, RATERS["payoff"], {}, 12, seed=0, level=0.5, progress=False)
        assert sizes == [5, 5, 2]
        # On 3 actors, tasks of 4: every actor gets one (the actors' map run in process here).
        patch.setattr("metaeval.distributed.replicates.map_on_actors",
                      lambda task, chunks, *args: [task(chunk) for chunk in chunks])
        sizes.clear()
        with_intervals(game, RATERS["payoff"], {}, 12, seed=0, level=0.5, progress=False, workers=3)
        assert sizes == [4, 4, 4]


def test_a_nash_replicate_whose_equilibrium_rounding_selects_is_rated_from_scratch():
    """At the end of this replicate's branch the best responses are a pure equilibrium
    beside the mixed one traced, both refined to max regret 0 up to rounding, so which has
    the lowest regret turns on the last bits of the traced point: traced in the batch it
    was the pure one, 0.88 away in ratings from the replicate's own trace."""
    from metaeval.ratings.logit import TRACE_REGRET, selected_equilibrium
    from metaeval.ratings.logit_batch import trace_logit_branches
    from metaeval.ratings.nash import well_scaled

    game = noisy_random_game((8, 8), seed=124)
    drawn = Resampler(game).draw(np.random.default_rng([24, 2]))
    warm = warm_replicates(RATERS["nash"], RATERS["nash"](game), {})
    assert warm(drawn[None]) == [None]
    scaled = well_scaled(drawn)[0]
    assert selected_equilibrium(scaled, trace_logit_branches(scaled[None], TRACE_REGRET)[0])[1]


def test_traced_ends_refined_in_lock_step_select_what_each_refined_alone_does():
    """Games of one shape whose ends have supports of other sizes, and one whose selection
    rounding decides (None where `selected_equilibrium` flags it contested)."""
    from metaeval.ratings.logit import TRACE_REGRET, selected_equilibrium
    from metaeval.ratings.logit_batch import trace_logit_branches
    from metaeval.ratings.logit_refine_batch import selected_equilibria
    from metaeval.ratings.nash import well_scaled

    contested_game = noisy_random_game((8, 8), seed=124)
    for game, seeds in [(noisy_random_game((5, 4, 6), seed=2, stderr=0.2), range(8)),
                        (contested_game, [[24, 2], 0, 1, 2])]:
        payoffs = np.stack([well_scaled(Resampler(game).draw(np.random.default_rng(seed)))[0] for seed in seeds])
        ends = trace_logit_branches(payoffs, TRACE_REGRET)
        selected = selected_equilibria(payoffs, ends)
        sizes = set()
        for tensor, reached, found in zip(payoffs, ends, selected):
            alone, contested = selected_equilibrium(tensor, reached)
            assert (found is None) == contested
            if found is not None:
                sizes.add(tuple(int((x > 0).sum()) for x in found))
                for x, y in zip(alone, found):
                    np.testing.assert_allclose(y, x, rtol=0, atol=1e-13)
        assert len(sizes) > 1  # supports of several sizes refined together
    assert selected[0] is None  # contested_game's first replicate
