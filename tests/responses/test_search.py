"""The search responder: exact where its beliefs are exhaustive, a lower bound always, the same
for any number of workers, and honest in what it reports."""

import numpy as np
import pytest

from metaeval import Evaluator, MetaEvalError, games, spiel
from metaeval.responses import RESPONDERS, Exact, Opponents, Search
from metaeval.responses.exact import correlated_population
from metaeval.responses.gap import ApproximateGap, approximate_cce_gap, describe
from metaeval.responses.search import SearchPolicy, SearchStatistics, exhaustive_statistics, search_shard
from metaeval.spiel.tree import has_at_most_terminals
from metaeval.spiel.gap import cce_gap

SMALL = ["kuhn_poker", "leduc_poker", "kuhn_3p", "goofspiel(num_cards=3,imp_info=True)"]


def problem(name: str, seed: int, player: int = 0, size: int = 2):
    game = games.load(name)
    population = spiel.Population.random(game, size=size, seed=seed)
    rng = np.random.default_rng(seed)
    count = size ** (game.num_players() - 1)
    distribution = rng.dirichlet(np.ones(count)).reshape([size] * (game.num_players() - 1))
    return game, Opponents.from_distribution(population.policies, player, distribution)


def exact_value(game, player: int, policy, opponents: Opponents) -> float:
    """The exact value of ``policy`` against ``opponents`` (a tree walk)."""
    population, sigma = correlated_population(game, player, opponents)
    members = [list(m) for m in population.policies]
    members[player] = [policy]
    return float(cce_gap(game, spiel.Population(game, members), sigma).on_policy_values[player])


@pytest.mark.parametrize("name", SMALL)
def test_with_exhaustive_beliefs_the_search_is_the_exact_best_response(name):
    game = games.load(name)
    for player in range(game.num_players()):
        game, opponents = problem(name, seed=3, player=player)
        statistics = exhaustive_statistics(game, player, opponents)
        values, _ = statistics.best()
        best = Exact().train(game, player, opponents, 0, np.random.default_rng(0)).value
        assert values[np.array(statistics.parent) == -1].sum() == pytest.approx(best, abs=1e-12)
        policy = SearchPolicy(game, player, statistics.choices())
        assert exact_value(game, player, policy, opponents) == pytest.approx(best, abs=1e-12)


@pytest.mark.parametrize("branching", [1, 2, 64])
def test_forked_and_drawn_histories_estimate_every_sequence_weight_without_bias(branching):
    """Sequence weights estimated from sampled histories (forking at the responder's decisions up to
    ``branching``, drawing past it, with an epsilon-greedy behaviour) average, over seeds, to the
    exact weights of the tree walk."""
    game, opponents = problem("kuhn_3p", seed=4, player=1)
    exact = exhaustive_statistics(game, 1, opponents)
    choices = {key: 0 for key in exact.keys}
    estimates = []
    for seed in range(30):
        shard = search_shard(game, 1, opponents, 600, np.random.default_rng(seed), choices, 0.3, branching)
        assert shard.keys and set(shard.keys) <= set(exact.keys)
        sums = np.array([shard.sums[shard.index[key]] if key in shard.index else np.zeros(exact.num_actions)
                         for key in exact.keys])
        estimates.append(sums / shard.episodes)
    mean, spread = np.mean(estimates, axis=0), np.std(estimates, axis=0, ddof=1) / np.sqrt(len(estimates))
    assert np.all(np.abs(mean - exact.sums) <= 4.5 * spread + 1e-12)
    assert np.abs(mean - exact.sums).max() > 0  # sampled, not enumerated


def test_with_enough_episodes_the_sampled_search_finds_kuhns_best_response():
    for player in range(2):
        game, opponents = problem("kuhn_poker", seed=5, player=player)
        search = Search(exhaustive=False)
        policy = search.policy(game, player, search.train(game, player, opponents, 40_000, np.random.default_rng(1)))
        best = Exact().train(game, player, opponents, 0, np.random.default_rng(0)).value
        assert exact_value(game, player, policy, opponents) == pytest.approx(best, abs=1e-12)


@pytest.mark.parametrize("name", ["kuhn_poker", "goofspiel(num_cards=3,imp_info=True)"])
def test_a_budget_that_covers_the_tree_walk_buys_the_exact_best_response(name):
    game, opponents = problem(name, seed=4, player=1)
    terminals = spiel.game_tree(game).num_terminals
    walk = terminals * len(opponents.profiles)
    best = Exact().train(game, 1, opponents, 0, None)
    walked = Search().train(game, 1, opponents, walk, np.random.default_rng(0))
    assert walked.value == best.value
    assert exact_value(game, 1, Search().policy(game, 1, walked), opponents) == pytest.approx(best.value, abs=1e-12)
    assert isinstance(Search().train(game, 1, opponents, walk - 1, np.random.default_rng(0)), SearchStatistics)
    assert isinstance(Search(exhaustive=False).train(game, 1, opponents, walk, np.random.default_rng(0)),
                      SearchStatistics)


@pytest.mark.parametrize("name", ["kuhn_poker", "goofspiel(num_cards=3,imp_info=True)", "leduc_poker"])
def test_the_terminal_count_stops_at_its_limit_and_agrees_with_the_tree(name):
    terminals = spiel.game_tree(name).num_terminals
    assert has_at_most_terminals(str(games.load(name)), terminals)
    assert not has_at_most_terminals(str(games.load(name)), terminals - 1)


@pytest.mark.parametrize("name", ["kuhn_poker", "kuhn_3p", "goofspiel(num_cards=3,imp_info=True)", "leduc_poker"])
def test_the_searched_deviation_is_never_worth_more_than_the_best_response(name):
    """Over seeds and budgets (some far too small to find the best response): the exact value of
    the policy the search returns never exceeds the best response's."""
    for seed in range(6):
        game, opponents = problem(name, seed=seed, player=seed % games.load(name).num_players())
        player = seed % game.num_players()
        search = Search(rounds=2, exhaustive=False)
        values = search.train(game, player, opponents, [50, 500, 3000][seed % 3], np.random.default_rng(seed))
        value = exact_value(game, player, search.policy(game, player, values), opponents)
        assert value <= Exact().train(game, player, opponents, 0, None).value + 1e-12


def test_the_approximate_gap_by_search_is_close_to_the_exact_gap_and_covers_it():
    game = games.load("kuhn_3p")
    population = spiel.Population.random(game, size=3, seed=0)
    evaluator = Evaluator(game)
    for player, member in enumerate(population.policies):
        for policy in member:
            evaluator.add(player, policy)
    sigma = evaluator.meta_distribution("mecce")
    exact = evaluator.gap(sigma).total
    estimate = evaluator.approximate_gap(sigma, "search", 30_000, 4000, np.random.default_rng(0))
    low, high = estimate.interval()
    assert low <= exact <= high and estimate.bound == estimate.total
    assert estimate.responder == "search (tree walked)" and estimate.training_episodes == 30_000
    assert np.allclose(estimate.per_player_intervals().mean(axis=1), estimate.per_player)


def test_search_is_the_same_on_any_number_of_workers(ray_session):
    game, opponents = problem("leduc_poker", seed=2, player=1)
    one = Search().train(game, 1, opponents, 4000, np.random.default_rng(7))
    two = Search(workers=2).train(game, 1, opponents, 4000, np.random.default_rng(7))
    assert one.keys == two.keys and np.array_equal(one.sums, two.sums) and one.episodes == two.episodes > 0
    game = games.load("kuhn_3p")
    population = spiel.Population.random(game, size=2, seed=0)
    sigma = np.full([2, 2, 2], 1 / 8)
    gaps = [approximate_cce_gap(game, population.policies, sigma, "search", 3000, 500, np.random.default_rng(3),
                                workers=workers) for workers in (1, 2)]
    assert np.array_equal(gaps[0].per_player, gaps[1].per_player)
    assert np.array_equal(gaps[0].deviation_stderr, gaps[1].deviation_stderr)


def test_the_same_seed_gives_the_same_search():
    game, opponents = problem("kuhn_3p", seed=1, player=2)
    first, second = (Search(exhaustive=False).train(game, 2, opponents, 3000, np.random.default_rng(4))
                     for _ in range(2))
    assert first.choices() == second.choices() and np.array_equal(first.sums, second.sums)


def _gap(per_player, stderr):
    n = len(per_player)
    return ApproximateGap(np.array(per_player, dtype=float), np.zeros(n), np.full(n, stderr), np.zeros(n),
                          np.zeros(n), 100, 100, "search")


def test_a_gap_never_reads_negative():
    below = _gap([-0.2, -0.18], 0.03)
    assert below.bound == 0.0 and str(below).startswith("no profitable deviation found (search deviations; "
                                                        "estimate -0.38 +- 0.083)")
    assert "at least -" not in str(below)
    unsure = _gap([0.01, 0.0], 0.05)  # above 0, but its interval covers 0
    assert unsure.bound == 0.0 and str(unsure).startswith("no profitable deviation found")
    found = _gap([0.4, 0.2], 0.01)
    assert found.bound == pytest.approx(0.6) and str(found).startswith("CCE gap at least 0.6 (approximate: search")
    assert describe(-0.38, 0.0459) == "no profitable deviation found (deviations; estimate -0.38 +- 0.09)"


def test_responders_are_registered_and_bad_ones_refused():
    from metaeval.training.learners import LEARNERS

    assert isinstance(LEARNERS["search"](), Search) and set(RESPONDERS) >= {"search", "exact", "dqn", "ppo"}
    game = games.load("kuhn_poker")
    population = spiel.Population.random(game, size=1, seed=0)
    with pytest.raises(MetaEvalError, match="unknown responder 'mcts'"):
        approximate_cce_gap(game, population.policies, np.ones([1, 1]), "mcts", 10, 10, np.random.default_rng(0))
    with pytest.raises(MetaEvalError, match="needs train"):
        approximate_cce_gap(game, population.policies, np.ones([1, 1]), object(), 10, 10, np.random.default_rng(0))
    with pytest.raises(MetaEvalError, match="search epsilon"):
        Search(epsilon=0)
    with pytest.raises(MetaEvalError, match="search rounds"):
        Search(rounds=0)
