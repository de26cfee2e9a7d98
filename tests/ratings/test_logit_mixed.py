"""The logit tracer's branch equations with float32 passes (metaeval.ratings.logit_mixed)
against the float64 ones."""

import numpy as np
import pytest

from metaeval.ratings import logit, logit_mixed


def game_and_profile(seed, shape):
    rng = np.random.default_rng(seed)
    payoffs = rng.uniform(-1, 1, size=(len(shape), *shape))
    return payoffs, [rng.dirichlet(np.ones(k)) for k in shape]


def unknowns(x, lam):
    return np.concatenate([np.log(s) for s in x] + [[lam]]), np.cumsum([0, *(len(s) for s in x)])


@pytest.mark.parametrize("seed, shape", [(1, (5, 6, 7)), (2, (4, 3, 5, 2)), (3, (3, 3, 2, 2, 3))])
def test_jacobian_and_residuals_match_the_float64_ones(seed, shape):
    payoffs, x = game_and_profile(seed, shape)
    lam = 300.0
    v, offsets = unknowns(x, lam)
    mixed = logit_mixed.MixedEquations(payoffs)
    residual, jacobian = mixed(payoffs, v, offsets)
    exact_residual, exact_jacobian = logit._branch_equations(payoffs, v, offsets)
    np.testing.assert_allclose(residual, exact_residual, rtol=0, atol=1e-12)  # the Jacobian's point: float64
    np.testing.assert_allclose(jacobian, exact_jacobian, rtol=0, atol=1e-4)  # one float32 block
    assert np.abs(jacobian - exact_jacobian).max() > 0
    # A corrector iterate near the Jacobian's point: one float32 pass, within its bound.
    near = v + 1e-6 * np.random.default_rng(seed).standard_normal(len(v))
    near[-1] = lam
    moved = [np.exp(near[offsets[p] : offsets[p + 1]]) for p in range(len(x))]
    change = np.abs(moved[logit_mixed._first_opponent(0)] - x[logit_mixed._first_opponent(0)]).sum()
    bound = 2 * lam * (shape[1] + 3) * 2.0**-24 * np.abs(payoffs).max() * change
    assert bound <= logit_mixed.MIXED_TOLERANCE
    difference = mixed(payoffs, near, offsets, jacobian=False)[0] - logit._branch_equations(payoffs, near, offsets, jacobian=False)[0]
    assert 0 < np.abs(difference).max() <= logit_mixed.MIXED_TOLERANCE


def test_a_residual_far_from_the_jacobians_point_is_a_float64_pass():
    payoffs, x = game_and_profile(4, (4, 5, 3))
    v, offsets = unknowns(x, 1e4)
    mixed = logit_mixed.MixedEquations(payoffs)
    mixed(payoffs, v, offsets)
    far = v + 0.1
    np.testing.assert_allclose(mixed(payoffs, far, offsets, jacobian=False)[0],
                               logit._branch_equations(payoffs, far, offsets, jacobian=False)[0], rtol=0, atol=1e-11)


def test_a_float64_pass_is_the_base_of_the_next_residuals():
    """A corrector iterate far from the Jacobian's point but near the last float64 pass is a
    float32 pass over its change from that pass, within the bound."""
    payoffs, x = game_and_profile(4, (4, 5, 3))
    lam = 1e4
    v, offsets = unknowns(x, lam)
    mixed = logit_mixed.MixedEquations(payoffs)
    mixed(payoffs, v, offsets)
    far = v + 0.1
    far[-1] = lam
    mixed(payoffs, far, offsets, jacobian=False)
    near = far + 1e-7 * np.random.default_rng(4).standard_normal(len(v))
    near[-1] = lam
    difference = mixed(payoffs, near, offsets, jacobian=False)[0] - logit._branch_equations(payoffs, near, offsets, jacobian=False)[0]
    assert 0 < np.abs(difference).max() <= logit_mixed.MIXED_TOLERANCE


def test_large_games_of_three_players_or_more_are_traced_in_mixed_precision():
    def applies(shape):
        return logit_mixed.applies(np.broadcast_to(0.0, shape))

    assert applies((4, 32, 32, 32, 32)) and applies((3, 102, 103, 100))
    assert not applies((2, 1024, 1024))  # a 2-player Jacobian makes no pass over the payoffs
    assert not applies((3, 64, 64, 64))  # in cache


def test_a_jacobian_near_the_last_float64_pass_reads_only_the_float32_copy(monkeypatch):
    """The Jacobian's G_p x_q, like a residual's, is the last float64 contraction plus a
    float32 pass over x_q's change where the bound allows: no float64 pass over G_p, the
    residual at its point within MIXED_TOLERANCE of the float64 one."""
    payoffs, x = game_and_profile(5, (4, 3, 5))
    lam = 300.0
    v, offsets = unknowns(x, lam)
    mixed = logit_mixed.MixedEquations(payoffs)
    mixed(payoffs, v, offsets)
    near = v + 1e-6 * np.random.default_rng(5).standard_normal(len(v))
    near[-1] = lam
    float64_passes, contract = [], logit._contract

    def counted(values, x, axis):
        if values.dtype == np.float64 and values.size == payoffs[0].size:
            float64_passes.append(axis)
        return contract(values, x, axis)

    monkeypatch.setattr(logit, "_contract", counted)
    residual, jacobian = mixed(payoffs, near, offsets)
    assert not float64_passes
    exact_residual, exact_jacobian = logit._branch_equations(payoffs, near, offsets)
    assert 0 < np.abs(residual - exact_residual).max() <= logit_mixed.MIXED_TOLERANCE
    np.testing.assert_allclose(jacobian, exact_jacobian, rtol=0, atol=1e-4)
    far = v + 0.1
    far[-1] = 1e4
    float64_passes.clear()
    residual, jacobian = mixed(payoffs, far, offsets)  # beyond the bound: float64 passes, exact
    assert len(float64_passes) == len(payoffs)
    np.testing.assert_allclose(residual, logit._branch_equations(payoffs, far, offsets)[0], rtol=0, atol=1e-11)
