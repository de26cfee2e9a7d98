"""The rollout responder: its forked returns are unbiased action values, its policy a lower bound
that reaches the best response on small games, the same for any number of workers."""

import numpy as np
import pytest
from open_spiel.python import policy as policy_lib

from metaeval import MetaEvalError, games
from metaeval.responses import RESPONDERS, Exact, Rollout
from metaeval.responses.rollout import rollout_shard
from tests.responses.test_search import exact_value, problem


class _FirstMove(policy_lib.Policy):
    """Player 0 of Kuhn poker: ``action`` at its first decision holding ``card``, uniform elsewhere."""

    def __init__(self, game, card: int, action: int):
        super().__init__(game, [0])
        self.card, self.action = card, action

    def action_probabilities(self, state, player_id=None):
        if not state.history()[2:] and state.history()[0] == self.card:
            return {self.action: 1.0}
        return {a: 0.5 for a in state.legal_actions()}


def _first_decision_tensor(game, card: int) -> np.ndarray:
    state = game.new_initial_state()
    state.apply_action(card)
    state.apply_action((card + 1) % 3)
    return np.asarray(state.information_state_tensor(0), np.float32)


def test_forked_returns_are_unbiased_action_values():
    """Uniform behaviour, every decision forked: at player 0's first decision the mean
    difference of the two actions' returns equals the exact one (a tree walk), per card."""
    game, opponents = problem("kuhn_poker", seed=3, player=0)
    samples = rollout_shard(game, 0, opponents, 60_000, np.random.default_rng(0), None, 1.0, fork=1.0)
    assert samples.observed.any(axis=1).all()
    for card in range(3):
        rows = np.flatnonzero((samples.x == _first_decision_tensor(game, card)).all(axis=1))
        assert samples.observed[rows].all()  # forked: both actions' returns seen
        differences = samples.returns[rows, 0] - samples.returns[rows, 1]
        exact = (exact_value(game, 0, _FirstMove(game, card, 0), opponents)
                 - exact_value(game, 0, _FirstMove(game, card, 1), opponents)) * 3
        assert abs(differences.mean() - exact) < 4 * differences.std() / np.sqrt(len(rows)), card


def test_with_enough_episodes_the_rollout_finds_kuhns_best_response():
    for player in range(2):
        game, opponents = problem("kuhn_poker", seed=5, player=player)
        rollout = Rollout()
        policy = rollout.policy(game, player, rollout.train(game, player, opponents, 30_000,
                                                             np.random.default_rng(1)))
        best = Exact().train(game, player, opponents, 0, np.random.default_rng(0)).value
        assert exact_value(game, player, policy, opponents) == pytest.approx(best, abs=1e-9)


@pytest.mark.parametrize("name", ["kuhn_3p", "goofspiel(num_cards=3,imp_info=True)", "leduc_poker"])
def test_the_rollout_deviation_is_never_worth_more_than_the_best_response(name):
    for seed in range(4):
        game = games.load(name)
        player = seed % game.num_players()
        game, opponents = problem(name, seed=seed, player=player)
        rollout = Rollout(rounds=2)
        values = rollout.train(game, player, opponents, [300, 3000][seed % 2], np.random.default_rng(seed))
        value = exact_value(game, player, rollout.policy(game, player, values), opponents)
        assert value <= Exact().train(game, player, opponents, 0, None).value + 1e-12


def test_the_same_seed_gives_the_same_rollout():
    game, opponents = problem("kuhn_3p", seed=1, player=2)
    first, second = (Rollout(rounds=2).train(game, 2, opponents, 2000, np.random.default_rng(4)) for _ in range(2))
    assert all(np.array_equal(a, b) for a, b in zip(_leaves(first), _leaves(second)))


def test_rollout_is_the_same_on_any_number_of_workers(ray_session):
    game, opponents = problem("leduc_poker", seed=2, player=1)
    one = Rollout(rounds=2).train(game, 1, opponents, 3000, np.random.default_rng(7))
    two = Rollout(rounds=2, workers=2).train(game, 1, opponents, 3000, np.random.default_rng(7))
    assert all(np.array_equal(a, b) for a, b in zip(_leaves(one), _leaves(two)))


def test_rollout_is_registered_and_bad_settings_refused():
    assert isinstance(RESPONDERS["rollout"](), Rollout)
    with pytest.raises(MetaEvalError, match="fork"):
        Rollout(fork=1.5)
    with pytest.raises(MetaEvalError, match="rounds"):
        Rollout(rounds=0)
    game, opponents = problem("kuhn_poker", seed=0)
    with pytest.raises(MetaEvalError, match="episodes must be a positive int"):
        Rollout().train(game, 0, opponents, 0, np.random.default_rng(0))


def _leaves(params):
    import jax

    return jax.tree_util.tree_leaves(params)
