import numpy as np
import pyspiel
import pytest
from open_spiel.python import policy as policy_lib
from open_spiel.python.algorithms import exploitability, policy_aggregator

import metaeval
from metaeval import MetaEvalError, games, spiel
from metaeval.distributed import last_build
from metaeval.training.meta_solvers import SOLVERS


def random_policies(game, player, count, seed):
    rng = np.random.default_rng(seed)
    return [spiel.random_policy(game, player, rng) for _ in range(count)]


@pytest.fixture(scope="module")
def kuhn3():
    return games.load("kuhn_3p")


@pytest.fixture(scope="module")
def pool(kuhn3):
    """Four random policies per player of kuhn_3p."""
    return [random_policies(kuhn3, p, 4, seed=p) for p in range(3)]


def filled(game, pool, **kwargs):
    evaluator = metaeval.Evaluator(game, **kwargs)
    for p, policies in enumerate(pool):
        for policy in policies:
            evaluator.add(p, policy)
    return evaluator


@pytest.mark.parametrize("mode", ["exact", "sampled"])
def test_adding_one_by_one_gives_the_metagame_built_from_scratch_bit_for_bit(kuhn3, pool, mode):
    options = dict(mode=mode, episodes=20, seed=3)
    scratch = filled(kuhn3, pool, **options).metagame()
    stepwise = metaeval.Evaluator(kuhn3, **options)
    for round_ in range(4):
        for p in range(3):
            stepwise.add(p, pool[p][round_])
        grown = stepwise.metagame()
        new_joints = grown.num_joints - (round_ ** 3)
        assert last_build().evaluated == new_joints  # only joints touching a new policy
    np.testing.assert_array_equal(grown.payoffs, scratch.payoffs)
    if mode == "exact":
        reference = spiel.exact_metagame(kuhn3, spiel.Population(kuhn3, pool))
        np.testing.assert_allclose(grown.payoffs, reference.payoffs, atol=1e-12)


def test_remove_and_replace_keep_the_metagame_equal_to_a_fresh_build(kuhn3, pool):
    evaluator = filled(kuhn3, pool)
    evaluator.metagame()
    evaluator.remove(1, [1, 3])
    new_ids = evaluator.replace(2, [0], random_policies(kuhn3, 2, 1, seed=9))
    assert new_ids == [4] and evaluator.ids == ((0, 1, 2, 3), (0, 2), (4, 1, 2, 3))
    incremental = evaluator.metagame()
    assert last_build().evaluated == 4 * 2 * 1  # only joints with the replacement
    fresh = spiel.exact_metagame(kuhn3, evaluator.population)
    np.testing.assert_allclose(incremental.payoffs, fresh.payoffs, atol=1e-12)
    assert evaluator.add(1, pool[1][0]) == 4  # ids are never reused


def test_any_openspiel_policy_is_stored_as_its_table(kuhn3):
    evaluator = metaeval.Evaluator(kuhn3)
    full = policy_lib.TabularPolicy(kuhn3)  # all players, uniform
    a = evaluator.add(0, full)
    b = evaluator.add(0, policy_lib.UniformRandomPolicy(kuhn3), name="uniform python")
    c = evaluator.add(0, policy_lib.python_policy_to_pyspiel_policy(full), name="uniform pyspiel")
    layout = spiel.game_tree(kuhn3).players[0]
    tables = [spiel.policy_table(layout, evaluator.policy(0, i), 0) for i in (a, b, c)]
    for table in tables:
        np.testing.assert_allclose(table, layout.legal / layout.legal.sum(axis=1, keepdims=True))
    full.action_probability_array[:] = 0  # the caller's object changing later changes nothing
    assert spiel.policy_table(layout, evaluator.policy(0, a), 0).sum() == pytest.approx(len(layout.keys))
    for p in (1, 2):
        evaluator.add(p, policy_lib.TabularPolicy(kuhn3))
    assert evaluator.metagame().strategy_names[0] == ("policy 0", "uniform python", "uniform pyspiel")


def test_bad_input_is_a_clear_error(kuhn3, pool):
    evaluator = filled(kuhn3, pool)
    kuhn2 = games.load("kuhn_2p")
    with pytest.raises(MetaEvalError, match="is for kuhn_poker"):
        evaluator.add(0, policy_lib.TabularPolicy(kuhn2))
    with pytest.raises(MetaEvalError, match="no action probabilities at .*is it for this game"):
        evaluator.add(0, policy_lib.python_policy_to_pyspiel_policy(policy_lib.TabularPolicy(kuhn2)))
    with pytest.raises(MetaEvalError, match="expected an OpenSpiel policy"):
        evaluator.add(0, "not a policy")
    with pytest.raises(MetaEvalError, match="no policy with id 17"):
        evaluator.remove(1, [17])
    with pytest.raises(MetaEvalError, match="no player 3"):
        evaluator.add(3, pool[0][0])
    with pytest.raises(MetaEvalError, match="unknown meta-solver 'gini'"):
        evaluator.meta_distribution("gini")
    with pytest.raises(MetaEvalError, match="already has a policy named"):
        evaluator.add(0, pool[0][0], name="a")
        evaluator.add(0, pool[0][1], name="a")
    with pytest.raises(MetaEvalError, match=r"player\(s\) \[0, 1, 2\] have no policy"):
        metaeval.Evaluator(kuhn3).metagame()
    with pytest.raises(MetaEvalError, match="2-player zero-sum"):
        evaluator.nash_conv()
    with pytest.raises(MetaEvalError, match="keep must be a positive int"):
        evaluator.prune("uniform", 0)


@pytest.mark.parametrize("solver", list(SOLVERS))
def test_meta_distribution_is_a_distribution_on_the_population(kuhn3, pool, solver):
    evaluator = filled(kuhn3, pool)
    sigma = evaluator.meta_distribution(solver)
    assert sigma.shape == evaluator.sizes
    assert np.all(sigma >= 0) and sigma.sum() == pytest.approx(1.0, abs=1e-12)


def test_meta_distribution_accepts_a_callable(kuhn3, pool):
    evaluator = filled(kuhn3, pool)
    corner = evaluator.meta_distribution(lambda mg: np.pad([[[1.0]]], [(0, k - 1) for k in mg.shape]))
    assert corner[0, 0, 0] == 1.0
    with pytest.raises(MetaEvalError, match="sum to 1"):
        evaluator.meta_distribution(lambda mg: np.zeros(mg.shape))


def test_gap_is_the_full_game_cce_gap(kuhn3, pool):
    evaluator = filled(kuhn3, pool)
    sigma = evaluator.meta_distribution("mecce")
    expected = spiel.cce_gap(kuhn3, spiel.Population(kuhn3, pool), sigma)
    assert evaluator.gap(sigma).total == pytest.approx(expected.total, abs=1e-12)


def test_prune_removes_exactly_the_lowest_rated(kuhn3):
    evaluator = filled(kuhn3, [random_policies(kuhn3, p, 7, seed=10 + p) for p in range(3)], seed=5)
    before = evaluator.ids
    pruned = evaluator.prune("deviation", keep=4)
    for p, ratings in enumerate(pruned.rating.ratings):
        removed = {before[p].index(i) for i in pruned.removed[p]}
        kept = set(range(7)) - removed
        assert len(removed) == 3 and evaluator.ids[p] == tuple(before[p][i] for i in sorted(kept))
        assert pruned.names[p] == [f"policy {i}" for i in pruned.removed[p]]
        assert max(np.round(ratings[i], 9) for i in removed) <= min(np.round(ratings[i], 9) for i in kept)
    # the top of the order is the select() answer
    best = evaluator.select("uniform", 2)
    rating = evaluator.rate("uniform")
    for p in range(3):
        top = sorted(rating.ratings[p], reverse=True)[:2]
        assert [rating.ratings[p][evaluator.ids[p].index(i)] for i in best[p]] == top


def test_prune_keeps_protected_policies_unless_they_alone_exceed_keep(kuhn3):
    evaluator = filled(kuhn3, [random_policies(kuhn3, p, 7, seed=20 + p) for p in range(3)], seed=6)
    ids, ratings = evaluator.ids, evaluator.rate("deviation").ratings
    by_rating = [[ids[p][i] for i in np.argsort(ratings[p], kind="stable")] for p in range(3)]
    # player 0 protects its two lowest-rated, player 1 five policies (more than keep), player 2 none
    protect = [by_rating[0][:2], by_rating[1][1:6], []]
    pruned = evaluator.prune("deviation", keep=4, protect=protect)
    assert pruned.protected == [sorted(ids) for ids in protect]
    rated = [dict(zip(ids[p], np.round(ratings[p], 9))) for p in range(3)]
    for p in range(3):
        removed, kept = set(pruned.removed[p]), set(evaluator.ids[p])
        assert len(removed) == 3 and removed | kept == set(ids[p])
        open_removed = removed - set(protect[p])
        open_kept = kept - set(protect[p])
        if open_removed and open_kept:  # outside the protection: exactly the lowest-rated
            assert max(rated[p][i] for i in open_removed) <= min(rated[p][i] for i in open_kept)
    assert set(protect[0]) <= set(evaluator.ids[0])
    assert set(pruned.removed[0]) == set(by_rating[0][2:5])
    # unavoidable: both unprotected go, then the lowest-rated protected one
    assert set(pruned.removed[1]) == {by_rating[1][0], by_rating[1][6], by_rating[1][1]}
    assert set(pruned.removed[2]) == set(by_rating[2][:3])
    with pytest.raises(MetaEvalError, match="no policy with id"):
        evaluator.prune("deviation", keep=3, protect=[[99], [], []])
    with pytest.raises(MetaEvalError, match="one list of ids per player"):
        evaluator.prune("deviation", keep=3, protect=[[]])


def test_prune_breaks_ties_by_the_seeded_generator(kuhn3):
    clones = [[policy_lib.TabularPolicy(kuhn3)] * 6 for _ in range(3)]  # all tied
    first = filled(kuhn3, clones, seed=1).prune("uniform", keep=3)
    again = filled(kuhn3, clones, seed=1).prune("uniform", keep=3)
    other = filled(kuhn3, clones, seed=2).prune("uniform", keep=3)
    assert first.removed == again.removed and first.tie_break_keys == again.tie_break_keys
    assert first.removed != other.removed


def test_save_and_load_round_trip(tmp_path, kuhn3, pool):
    evaluator = filled(kuhn3, pool, seed=4)
    evaluator.add(0, pool[0][0], name="again")
    evaluator.metagame()
    evaluator.save(tmp_path)
    loaded = metaeval.Evaluator.load(tmp_path)
    assert loaded.ids == evaluator.ids and loaded.name(0, 4) == "again"
    mg, mg_loaded = evaluator.metagame(), loaded.metagame()
    np.testing.assert_array_equal(mg.payoffs, mg_loaded.payoffs)
    assert mg.strategy_names == mg_loaded.strategy_names
    for p in range(3):
        for i in evaluator.ids[p]:
            np.testing.assert_array_equal(evaluator.policy(p, i).action_probability_array,
                                          loaded.policy(p, i).action_probability_array)
    extra = random_policies(kuhn3, 2, 1, seed=11)[0]
    for e in (evaluator, loaded):
        e.add(2, extra)
    np.testing.assert_array_equal(evaluator.metagame().payoffs, loaded.metagame().payoffs)
    assert evaluator.prune("uniform", 3).removed == loaded.prune("uniform", 3).removed
    evaluator.save(tmp_path)  # a second save replaces the first's files
    assert sorted(f.name for f in tmp_path.glob("*.npz")) == ["metagame-000001.npz", "population-000001.npz"]
    with pytest.raises(MetaEvalError, match="no saved evaluator"):
        metaeval.Evaluator.load(tmp_path / "nothing")


def test_nash_conv_matches_openspiel_on_the_meta_nash_mixture():
    game = games.load("kuhn_2p")
    pool = [random_policies(game, p, 3, seed=20 + p) for p in range(2)]
    evaluator = filled(game, pool)
    sigma = evaluator.meta_distribution("nash")
    mixtures = [sigma.sum(axis=1), sigma.sum(axis=0)]
    aggregated = policy_aggregator.PolicyAggregator(game).aggregate([0, 1], pool, mixtures)
    expected = exploitability.nash_conv(game, aggregated)
    assert evaluator.nash_conv() == pytest.approx(expected, abs=1e-9)
    assert evaluator.exploitability() == pytest.approx(exploitability.exploitability(game, aggregated), abs=1e-9)
