import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from open_spiel.python import rl_tools
from open_spiel.python.algorithms import best_response, expected_game_score
from open_spiel.python.algorithms.tabular_qlearner import QLearner
from scipy import stats

from metaeval import MetaEvalError, games, spiel
from metaeval.responses import Opponents, QLearning
from metaeval.responses.qlearning import _categorical, _Uniforms
from tests.responses import reference

SEEDS = range(10)


@pytest.fixture(scope="module")
def kuhn2():
    return games.load("kuhn_2p")


@pytest.fixture(scope="module")
def kuhn3():
    return games.load("kuhn_3p")


def shortfall(game, learner, episodes, seed):
    """Best-response value against a random opponent minus the learned policy's value,
    both computed by OpenSpiel (its BestResponsePolicy and expected_game_score)."""
    opponent = spiel.random_policy(game, 1, np.random.default_rng(100 + seed))
    values = learner.train(game, 0, Opponents([(None, opponent)], [1.0]), episodes, np.random.default_rng(seed))
    root = game.new_initial_state()
    best = best_response.BestResponsePolicy(game, 0, opponent).value(root)
    achieved = expected_game_score.policy_value(root, [learner.policy(game, 0, values), opponent])[0]
    return best - achieved


def test_more_episodes_give_a_better_response_on_kuhn_2p(kuhn2):
    learner = QLearning()
    few = np.array([shortfall(kuhn2, learner, 50, s) for s in SEEDS])
    many = np.array([shortfall(kuhn2, learner, 2000, s) for s in SEEDS])
    assert np.all(few >= -1e-12) and np.all(many >= -1e-12)  # nothing beats a best response
    # Paired over 10 seeds, each with its own random opponent. A constant step size keeps
    # the values noisy, so the shortfall need not fall in every seed; the one-sided
    # Wilcoxon signed-rank test must reject "no decrease" and the mean must fall by half.
    assert many.mean() < 0.5 * few.mean()
    assert stats.wilcoxon(few, many, alternative="greater", zero_method="zsplit").pvalue < 0.05


def test_training_is_reproducible_from_the_seed_and_leaves_numpy_global_state_alone(kuhn3):
    opponents = Opponents([tuple(spiel.random_policy(kuhn3, q, np.random.default_rng(q)) for q in range(3))], [1.0])
    before = np.random.get_state()[1].copy()
    first = QLearning().train(kuhn3, 1, opponents, 200, np.random.default_rng(7))
    np.testing.assert_array_equal(np.random.get_state()[1], before)
    np.testing.assert_array_equal(first, QLearning().train(kuhn3, 1, opponents, 200, np.random.default_rng(7)))
    assert not np.array_equal(first, QLearning().train(kuhn3, 1, opponents, 200, np.random.default_rng(8)))
    # Training resumes from given values: 100 + 100 episodes from one stream is not a restart.
    rng = np.random.default_rng(7)
    half = QLearning().train(kuhn3, 1, opponents, 100, rng)
    assert not np.array_equal(half, QLearning().train(kuhn3, 1, opponents, 100, rng, values=half))


def test_opponents_are_drawn_from_the_distribution(kuhn3):
    """Player 0 holding the lowest card and betting first loses 2 when both opponents call
    and wins 2 when both fold: against callers and folders drawn 1:1 the learned value of
    that bet is near 0 (within 1), against callers alone near -2."""
    def fixed(player, action):
        layout = spiel.game_tree(kuhn3).players[player]
        table = np.zeros(layout.legal.shape)
        table[:, action] = 1.0
        return spiel.policies.tabular_policy(layout, table)

    callers = tuple(fixed(q, 1) for q in range(3))
    folders = tuple(fixed(q, 0) for q in range(3))
    learner = QLearning(step_size=0.05)
    row = spiel.game_tree(kuhn3).players[0].template.state_lookup["0"]
    mixed = learner.train(kuhn3, 0, Opponents([callers, folders], [0.5, 0.5]), 3000, np.random.default_rng(0))
    called = learner.train(kuhn3, 0, Opponents([callers], [1.0]), 3000, np.random.default_rng(0))
    assert abs(mixed[row, 1]) < 1.0
    assert called[row, 1] < -1.5


def test_seeded_exploration_has_the_qlearner_distribution():
    """The reference's seeded draw (which metaeval's learner matches bit for bit, below)
    has the distribution of QLearner's own epsilon-greedy choice."""
    uniforms = _Uniforms(np.random.default_rng(0))
    agent = reference.SeededQLearner(0, 4, uniforms, epsilon_schedule=rl_tools.ConstantSchedule(0.3))
    agent._q_values["s"].update({0: 1.0, 1: 2.0, 2: 2.0, 3: -1.0})
    openspiel = QLearner(0, 4)
    openspiel._q_values["s"].update(agent._q_values["s"])
    _, expected = openspiel._epsilon_greedy("s", [0, 1, 2, 3], 0.3)
    draws = [agent._get_action_probs("s", [0, 1, 2, 3], 0.3) for _ in range(20000)]
    counts = np.bincount([action for action, _ in draws], minlength=4)
    assert stats.chisquare(counts, 20000 * expected).pvalue > 1e-3


@pytest.mark.parametrize("name, player, learner", [
    ("kuhn_2p", 1, QLearning()),
    ("kuhn_3p", 0, QLearning()),
    ("kuhn_3p", 2, QLearning(step_size=0.37, epsilon=0.0)),
    ("sheriff", 0, QLearning()),
    ("sheriff", 1, QLearning(step_size=1.0, epsilon=1.0)),
    ("leduc_poker", 0, QLearning(step_size=0.05, epsilon=0.5)),
])
def test_values_equal_openspiels_qlearner_bit_for_bit(name, player, learner):
    """Side by side with OpenSpiel's QLearner stepped through TimeSteps (same episodes and
    draws): the same values to the last bit, from zeros and from trained values, against a
    mixture of two opponent profiles."""
    game = games.load(name)
    rng = np.random.default_rng(len(name) + player)
    profiles = [tuple(spiel.random_policy(game, q, rng) for q in range(game.num_players())) for _ in range(2)]
    opponents = Opponents(profiles, [0.3, 0.7])
    ours = learner.train(game, player, opponents, 300, np.random.default_rng(5))
    theirs = reference.train(learner, game, player, opponents, 300, np.random.default_rng(5))
    assert np.count_nonzero(ours) > 5
    np.testing.assert_array_equal(ours, theirs)
    ours = learner.train(game, player, opponents, 200, np.random.default_rng(6), values=ours)
    theirs = reference.train(learner, game, player, opponents, 200, np.random.default_rng(6), values=theirs)
    np.testing.assert_array_equal(ours, theirs)


def linear_draw(probabilities, u):
    """The first index whose running total exceeds u, else the last positive one."""
    total = 0.0
    for index, probability in enumerate(probabilities):
        total += probability
        if u < total:
            return index
    return max(i for i, probability in enumerate(probabilities) if probability > 0)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([0.0, 1.0, 0.3, 1e-13, -1e-13, 0.1, 2 / 3]), min_size=1, max_size=8)
       .filter(lambda p: max(p) > 0), st.integers(0, 2**32 - 1))
def test_a_bisected_draw_is_the_first_running_total_to_exceed_it(weights, seed):
    total = sum(w for w in weights if w > 0)
    probabilities = [w / total if w > 0 else w for w in weights]  # tiny negatives, as tables allow
    categorical = _categorical(probabilities)
    rng = np.random.default_rng(seed)
    uniforms = _Uniforms(rng)
    edges = [u for t in categorical[0] for u in (t, np.nextafter(t, -1), np.nextafter(t, 2))]
    for u in [*rng.random(50), *edges, 0.0, 1.0 - 2**-53]:
        uniforms.draw = iter([float(u)]).__next__
        assert uniforms.choice(categorical) == linear_draw(probabilities, u)


def test_greedy_policy_splits_ties_and_is_a_valid_read_only_table(kuhn3):
    learner = QLearning()
    layout = spiel.game_tree(kuhn3).players[2]
    policy = learner.policy(kuhn3, 2, np.zeros(layout.legal.shape))
    np.testing.assert_allclose(policy.action_probability_array, layout.legal / layout.legal.sum(1, keepdims=True))
    assert not policy.action_probability_array.flags.writeable


def test_bad_input_is_refused(kuhn3):
    opponent = tuple(spiel.random_policy(kuhn3, q, np.random.default_rng(q)) for q in range(3))
    with pytest.raises(MetaEvalError, match="step size"):
        QLearning(step_size=0)
    with pytest.raises(MetaEvalError, match="probabilit"):
        Opponents([opponent], [0.5])
    with pytest.raises(MetaEvalError, match="episodes"):
        QLearning().train(kuhn3, 0, Opponents([opponent], [1.0]), -1, np.random.default_rng(0))
    with pytest.raises(MetaEvalError, match="values of shape"):
        QLearning().train(kuhn3, 0, Opponents([opponent], [1.0]), 1, np.random.default_rng(0), values=np.zeros(3))
    rps = games.load("matrix_rps")
    with pytest.raises(MetaEvalError, match="simultaneous moves"):
        QLearning().train(rps, 0, Opponents([(None, spiel.random_policy(rps, 1, np.random.default_rng(0)))], [1.0]),
                          1, np.random.default_rng(0))
