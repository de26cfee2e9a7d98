"""Neural learners (DQN, PPO) and the lock-step training episodes they step."""

import itertools

import numpy as np
import pyspiel
import pytest
from open_spiel.python import policy as policy_lib
from open_spiel.python.algorithms import best_response, expected_game_score
from scipy import stats

from metaeval.errors import MetaEvalError
from metaeval.responses import DQN, PPO, Opponents
from metaeval.responses.episodes import TrainingEpisodes

pytest.importorskip("jax")


def uniform_opponents(game, player):
    uniform = policy_lib.UniformRandomPolicy(game)
    return Opponents((tuple(None if q == player else uniform for q in range(game.num_players())),), np.ones(1))


def uniform_value(state, player):
    """The exact expected return of ``player`` when everyone plays uniformly (a tree walk)."""
    if state.is_terminal():
        return state.returns()[player]
    if state.is_chance_node():
        return sum(p * uniform_value(state.child(a), player) for a, p in state.chance_outcomes())
    if state.is_simultaneous_node():
        joints = list(itertools.product(*(state.legal_actions(q) for q in range(state.num_players()))))
        total = 0.0
        for joint in joints:
            child = state.clone()
            child.apply_actions(list(joint))
            total += uniform_value(child, player)
        return total / len(joints)
    return np.mean([uniform_value(state.child(a), player) for a in state.legal_actions()])


def play_uniformly(env, rng):
    """Plays the learner's side of ``env`` uniformly at random until every episode ended."""
    while env.running():
        _, legal, _ = env.observe()
        actions = [rng.choice(np.flatnonzero(row)) if row.any() else 0 for row in legal]
        env.act(np.array(actions))


@pytest.mark.parametrize("name, player", [("kuhn_poker(players=3)", 1), ("matrix_rps", 0), ("goofspiel(num_cards=3)", 1)])
def test_episode_returns_estimate_the_exact_value(name, player):
    """Turn-based and simultaneous games: every episode of the budget is played and the
    learner's mean return lies within four standard errors of the exact value."""
    game = pyspiel.load_game(name)
    env = TrainingEpisodes(game, player, uniform_opponents(game, player), budget=3000, num_envs=64,
                           rng=np.random.default_rng(0))
    play_uniformly(env, np.random.default_rng(1))
    returns = np.array(env.returns)
    exact = uniform_value(game.new_initial_state(), player)
    assert len(returns) == 3000 and env.started == 3000
    assert abs(returns.mean() - exact) <= 4 * returns.std(ddof=1) / np.sqrt(len(returns)) + 1e-12


def test_rewards_handed_to_the_learner_add_up_to_its_returns():
    game = pyspiel.load_game("leduc_poker")
    env = TrainingEpisodes(game, 0, uniform_opponents(game, 0), budget=500, num_envs=16, rng=np.random.default_rng(2))
    rng, total = np.random.default_rng(3), 0.0
    while env.running():
        _, legal, live = env.observe()
        rewards, _ = env.act(np.array([rng.choice(np.flatnonzero(row)) if row.any() else 0 for row in legal]))
        total += rewards[live].sum()
    assert total == pytest.approx(sum(env.returns), abs=1e-9)


def test_bad_input_is_a_clear_error():
    game = pyspiel.load_game("kuhn_poker")
    with pytest.raises(MetaEvalError, match="budget must be a positive int"):
        TrainingEpisodes(game, 0, uniform_opponents(game, 0), budget=0, num_envs=4, rng=np.random.default_rng(0))
    tables = Opponents(((None, np.full((6, 2), 0.5)),), np.ones(1))
    with pytest.raises(MetaEvalError, match="policy objects, not policy tables"):
        TrainingEpisodes(game, 0, tables, budget=10, num_envs=4, rng=np.random.default_rng(0))
    with pytest.raises(MetaEvalError, match="learning_rate is out of range"):
        DQN(learning_rate=0)
    with pytest.raises(MetaEvalError, match="clip is out of range"):
        PPO(clip=1.5)


@pytest.mark.parametrize("learner", [DQN(min_replay=64), PPO()], ids=["dqn", "ppo"])
def test_the_same_seed_gives_the_same_weights(learner):
    game = pyspiel.load_game("kuhn_poker")
    opponents = uniform_opponents(game, 1)
    first, again, other = (learner.train(game, 1, opponents, 300, np.random.default_rng(seed)) for seed in (5, 5, 6))
    flat = [np.concatenate([np.ravel(x) for x in _leaves(v)]) for v in (first, again, other)]
    assert np.array_equal(flat[0], flat[1])
    assert not np.array_equal(flat[0], flat[2])


def _leaves(tree):
    return [leaf for value in tree.values() for leaf in (_leaves(value) if isinstance(value, dict) else [value])]


def regret(learner, game, episodes, seed):
    """Best-response value against the uniform opponent less the trained policy's value."""
    uniform = policy_lib.UniformRandomPolicy(game)
    values = learner.train(game, 0, uniform_opponents(game, 0), episodes, np.random.default_rng(seed))
    root = game.new_initial_state()
    best = expected_game_score.policy_value(root, [best_response.BestResponsePolicy(game, 0, uniform), uniform])[0]
    return best - expected_game_score.policy_value(root, [learner.policy(game, 0, values), uniform])[0]


@pytest.mark.parametrize("learner, game, budgets, bound", [
    (DQN(), "leduc_poker", (200, 3000), 0.6), (PPO(), "kuhn_poker", (300, 2000), 0.1),
], ids=["dqn", "ppo"])
def test_more_budget_gives_a_better_response(learner, game, budgets, bound):
    """Regret against a fixed opponent falls with the budget: one-sided Wilcoxon signed-rank
    test over 6 seeds (p < 0.05), and the larger budget's mean regret is below ``bound``
    (DQN on Leduc: 0.42 at 3,000 episodes, 0.25 at 10,000, from about 0.8 untrained)."""
    game = pyspiel.load_game(game)
    small, large = (np.array([regret(learner, game, budget, seed) for seed in range(6)]) for budget in budgets)
    assert stats.wilcoxon(small, large, alternative="greater", zero_method="zsplit").pvalue < 0.05
    assert large.mean() < bound


def test_a_small_budget_already_trains_the_dqn():
    """300 Leduc episodes store 500 to 700 transitions: the default DQN learns from its first
    batch, where waiting for 500 and stepping every 8 left the network nearly untrained
    (mean regret 0.87 over these seeds, the untrained network's; 0.66 now)."""
    game = pyspiel.load_game("leduc_poker")
    regrets = {name: np.mean([regret(learner, game, 300, seed) for seed in range(6)])
               for name, learner in (("default", DQN()), ("late", DQN(min_replay=500, transitions_per_update=8)))}
    assert regrets["default"] < 0.75 < regrets["late"]


def test_psro_with_a_ppo_oracle_lowers_exploitability():
    """PSRO on Kuhn poker with PPO best responses (2,000 episodes an iteration): the exact
    exploitability of the meta-Nash falls from about 0.46 to below 0.1 in 8 iterations."""
    from metaeval.loops.psro import PSROConfig, psro
    from metaeval.training.oracles import learned

    config = PSROConfig(game="kuhn_2p", iterations=8, solver="nash", seed=0)
    records = psro(config, oracle=learned(PPO(), 2000, "psro"), progress=False)
    exploitability = [record["exploitability"] for record in records]
    assert exploitability[0] > 0.4 and exploitability[-1] < 0.1


def test_a_learned_oracle_responds_to_the_target_it_is_given():
    """On a 3-player meta-distribution that correlates the opponents, the psro target trains
    against the product of their marginals and the jpsro target against their joint: the
    opponents a learner is handed differ accordingly."""
    import metaeval
    from metaeval import spiel
    from metaeval.training.oracles import learned

    game = pyspiel.load_game("kuhn_poker(players=3)")
    evaluator = metaeval.Evaluator(game)
    for player in range(3):
        for seed in range(2):
            evaluator.add(player, spiel.random_policy(game, player, np.random.default_rng(seed)))
    sigma = np.zeros((2, 2, 2))
    sigma[0, 0, 0] = sigma[1, 1, 1] = 0.5
    handed = {}

    class Recorder:
        def train(self, game, player, opponents, episodes, rng):
            handed[target] = sorted(zip(opponents.probabilities.round(3).tolist(), range(len(opponents.profiles))))
            return None

        def policy(self, game, player, values):
            return policy_lib.UniformRandomPolicy(game)

    for target in ("jpsro", "psro"):
        learned(Recorder(), 10, target)(evaluator, 0, sigma, np.random.default_rng(0))
    assert [p for p, _ in handed["jpsro"]] == [0.5, 0.5]
    assert [p for p, _ in handed["psro"]] == [0.25, 0.25, 0.25, 0.25]
    with pytest.raises(MetaEvalError, match="target must be one of"):
        learned(PPO(), 10, "nash")
