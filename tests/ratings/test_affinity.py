import numpy as np
import pandas as pd
import pytest

import metaeval
from metaeval.ratings.base import marginals
from metaeval import MetaEvalError, data
from metaeval.ratings import affinity
from metaeval.ratings.elo import bradley_terry

CLONED = np.array([[1, 0, 0], [0, 1, 1], [0, 1, 1]], dtype=float)


@pytest.mark.parametrize("x, p, expected", [
    ([1 / 3] * 3, 1.0, 4 / 9),
    ([0.5, 0.25, 0.25], 1.0, 0.5),
    ([0.5, 0.5, 0.0], 1.0, 0.5),
    ([0.5, 0.25, 0.25], 0.5, 2 * (1 - 2 * 0.5**1.5)),
])
def test_affinity_entropy_with_a_clone(x, p, expected):
    # The de-cloned 2-action game at (1/2, 1/2) has the same maximum.
    assert affinity.affinity_entropy(x, CLONED, p) == pytest.approx(expected, abs=1e-12)
    assert affinity.affinity_entropy([1 / 3] * 3, np.eye(3)) == pytest.approx(2 / 3)


def _with_clone():
    payoffs = np.random.default_rng(0).normal(size=(2, 3, 4))
    return metaeval.MetaGame(payoffs).add_clone(0, 1)


def test_kernel_and_target_see_clones():
    game = _with_clone()
    hard = affinity.affinity_kernel(game, 0)
    np.testing.assert_array_equal(hard, [[1, 0, 0, 0], [0, 1, 0, 1], [0, 0, 1, 0], [0, 1, 0, 1]])
    soft = affinity.affinity_kernel(game, 0, variance=0.5)
    assert np.allclose(soft, soft.T) and soft[1, 3] == 1 and 0 < soft[0, 1] < 1
    np.testing.assert_allclose(affinity.affinity_target(game, 0), [1 / 3, 1 / 6, 1 / 3, 1 / 6])
    np.testing.assert_allclose(affinity.affinity_target(game, 1), 1 / 4)
    target = affinity.affinity_target(game, 0, variance=0.5)
    best = affinity.affinity_entropy(target, soft)
    samples = np.random.default_rng(1).dirichlet(np.ones(4), size=200)
    assert all(affinity.affinity_entropy(x, soft) <= best + 1e-9 for x in samples)
    assert target[1] == pytest.approx(target[3])


def test_without_clones_the_affinity_target_selects_what_the_uniform_one_does():
    game = metaeval.MetaGame(np.random.default_rng(4).normal(size=(3, 3, 2, 3)))
    plain = metaeval.rate(game, "payoff")  # dual Newton
    cone = affinity.max_relative_entropy_cce(game, np.full(game.shape, 1 / game.num_joints))
    for r, s in zip(plain.ratings, affinity.deviation_gains(game, cone)):
        np.testing.assert_allclose(r, s, atol=1e-8)
    assert max(s.max() for s in affinity.deviation_gains(game, cone)) < 1e-9
    for r, s in zip(metaeval.rate(game, "nash").ratings, metaeval.rate(game, "nash", target="affinity").ratings):
        np.testing.assert_allclose(r, s, atol=1e-12)


def adversarial_copies(table: pd.DataFrame, copies: int = 10, sharpness: float = 10.0, seed: int = 0):
    """Liu et al. (2025, section 5): copies of tasks drawn from softmax(-lambda u_bar), u_bar the
    uniform-top agent's mean payoff per task, i.e. tasks where that agent does worst."""
    game = data.agent_vs_agent_vs_task(table)
    top = int(np.argmax(metaeval.rate(game, "uniform").ratings[0]))
    mean = game.payoffs[0][top].mean(axis=0)
    weights = np.exp(-sharpness * (mean - mean.min()))
    picks = np.random.default_rng(seed).choice(len(mean), size=copies, p=weights / weights.sum())
    extra = table.iloc[:, picks].copy()
    extra.columns = [f"{table.columns[i]} copy {k}" for k, i in enumerate(picks)]
    return pd.concat([table, extra], axis=1)


def test_clone_attack_on_the_three_player_game():
    table = pd.DataFrame(np.random.default_rng(0).uniform(size=(5, 6)), index=list("abcde"))
    attacked = adversarial_copies(table)
    before, after = data.agent_vs_agent_vs_task(table), data.agent_vs_agent_vs_task(attacked)

    def elo(t):  # Bradley-Terry on task wins between agents
        values = t.to_numpy()
        return bradley_terry((values[:, None, :] > values[None, :, :]).sum(axis=2))

    assert np.abs(elo(table) - elo(attacked)).max() > 10
    moved = {"uniform": {}, "payoff": {}}
    fixed = {"deviation": ({}, 1e-9), "payoff": ({"target": "affinity"}, 1e-8),
             "nash": ({"target": "affinity"}, 1e-12)}
    for method, options in moved.items():
        change = metaeval.rate(before, method, **options).ratings[0] - metaeval.rate(after, method, **options).ratings[0]
        assert np.abs(change).max() > 0.05, method
    for method, (options, tolerance) in fixed.items():
        r0 = metaeval.rate(before, method, **options).ratings[0]
        r1 = metaeval.rate(after, method, **options).ratings[0]
        np.testing.assert_allclose(r0, r1, rtol=0, atol=tolerance, err_msg=method)


def test_bad_targets():
    game = _with_clone()
    with pytest.raises(MetaEvalError, match="target must be one of"):
        metaeval.rate(game, "payoff", target="shannon")
    with pytest.raises(MetaEvalError, match="only the hard kernel"):
        metaeval.rate(game, "nash", target="affinity", kernel_variance=0.1)
    with pytest.raises(MetaEvalError, match="0 < p <= 1"):
        affinity.affinity_entropy([1.0], np.eye(1), p=2)


def test_decloned_shortcut_agrees_with_the_exponential_cone_program():
    game = metaeval.MetaGame(np.random.default_rng(6).normal(size=(3, 3, 2, 3))).add_clone(2, 0).add_clone(0, 1)
    rating = metaeval.rate(game, "payoff", target="affinity")
    assert rating.diagnostics["solver"] == "MECCE of the de-cloned game"
    target = np.ones(())
    for t in rating.diagnostics["target_marginals"]:
        target = np.multiply.outer(target, t)
    direct = affinity.max_relative_entropy_cce(game, target)
    np.testing.assert_allclose(rating.distribution, direct, atol=1e-7)
    for r, s in zip(rating.ratings, affinity.deviation_gains(game, direct)):
        np.testing.assert_allclose(r, s, atol=1e-9)


def test_king_of_the_hill_lle_ends_with_the_king_on_c():
    """u_king(p, i, j) = clip(S[p, i] - S[p, j], -2, 2) / 2. King C, rebel D is an equilibrium
    for every prompt mix q with q_3 >= 2/3 (rebel B pays -q_3 + (q_1 + q_2)/2 against -1/2
    for D; every prompt pays 1/2): a continuum. The logit branch (pseudo-arclength
    continuation; it folds back near lambda = 27 with the king mixing B and C) ends there.
    The rebel's mass on B decays only like 1/lambda, not exponentially, so B's payoff gap
    and q_3 - 2/3 go to 0; prompts 1 and 2 are paid alike up to the king's exponentially
    small mass on A. The limit is q = (1/6, 1/6, 2/3), king ratings (-0.75, -0.5, 0, -0.5);
    the prompt-1 copies share prompt 1's mass."""
    scores = np.array([[3, 2, 1, 0], [0, 3, 2, 1], [1, 1, 3, 2]], dtype=float)
    games = []
    for copies in (0, 5):
        s = np.vstack([scores, np.repeat(scores[1:2], copies, axis=0)])
        king = np.moveaxis(np.clip(s[:, :, None] - s[:, None, :], -2, 2) / 2, 0, -1)
        rebel = np.where(np.eye(4, dtype=bool)[:, :, None], -1.0, -king)
        games.append(metaeval.MetaGame(np.stack([king, rebel, np.abs(king)])))
    # De-cloning keeps payoffs shared by a clone set bit for bit: the same game.
    np.testing.assert_array_equal(affinity.decloned(games[1])[0].payoffs, games[0].payoffs)
    for game in games:
        rating = metaeval.rate(game, "nash", target="affinity")
        np.testing.assert_allclose(rating.ratings[0], [-0.75, -0.5, 0, -0.5], atol=1e-6)
        np.testing.assert_allclose(marginals(rating.distribution)[0], [0, 0, 1, 0], atol=1e-6)
        prompts = marginals(rating.distribution)[2]
        np.testing.assert_allclose([prompts[0], prompts[1] + prompts[3:].sum(), prompts[2]],
                                   [1 / 6, 1 / 6, 2 / 3], atol=1e-6)
        assert rating.diagnostics["max_regret"] < 1e-9
