import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metaeval import MetaEvalError
from metaeval.solvers import markov
from metaeval.solvers.markov import stationary_distribution
from tests.solvers.markov_reference import gth_stationary


def random_chain(seed, num_states, density, spread):
    """A random irreducible chain: a ring (for irreducibility) plus random extra edges."""
    rng = np.random.default_rng(seed)
    pairs = {(i, (i + 1) % num_states) for i in range(num_states)}
    extra = rng.random((num_states, num_states)) < density
    pairs |= {(int(i), int(j)) for i, j in zip(*np.nonzero(extra)) if i != j}
    source, target = (np.array(x) for x in zip(*sorted(pairs)))
    return source, target, -spread * rng.random(len(source))


@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    seed=st.integers(0, 2**32 - 1),
    num_states=st.integers(2, 40),
    density=st.floats(0.0, 0.5),
    spread=st.sampled_from([1.0, 30.0, 300.0, 3000.0]),
)
def test_matches_log_space_gth_at_any_rate_spread(seed, num_states, density, spread):
    # Adversarial rates spread evenly over many orders of magnitude: the error is ~1e-15
    # typically, about 1e-7 at worst (300 such chains), when couplings sit near STRONG and
    # are either solved linearly (error eps / coupling) or aggregated (error coupling /
    # internal rate).
    source, target, log_rate = random_chain(seed, num_states, density, spread)
    pi, info = stationary_distribution(num_states, source, target, log_rate)
    np.testing.assert_allclose(pi, gth_stationary(num_states, source, target, log_rate), atol=1e-6, rtol=1e-5)
    assert info["residual"] < 1e-12


@pytest.mark.parametrize("spread", [1.0, 100.0, 1000.0])
def test_iterative_path_matches_reference(monkeypatch, spread):
    monkeypatch.setattr(markov, "DENSE_MAX", 3)  # force BiCGSTAB/GMRES on every solve
    source, target, log_rate = random_chain(7, 60, 0.1, spread)
    pi, _ = stationary_distribution(60, source, target, log_rate)
    np.testing.assert_allclose(pi, gth_stationary(60, source, target, log_rate), atol=1e-10)


def test_two_states_far_below_double_range():
    # pi_0 / pi_1 = q(1->0) / q(0->1) = exp(-1000) / exp(-1200) = exp(200)
    pi, _ = stationary_distribution(2, [0, 1], [1, 0], [-1200.0, -1000.0])
    np.testing.assert_allclose(pi, [1 / (1 + np.exp(-200)), np.exp(-200) / (1 + np.exp(-200))])


def test_two_metastable_pairs_aggregate_exactly():
    # {0, 1} and {2, 3} mix at rate 1 inside; 1 -> 2 at e^-1000, 3 -> 0 at e^-1100.
    # Each pair is uniform inside, so mass(2, 3) / mass(0, 1) = e^-1000 / e^-1100 = e^100.
    source, target = [0, 1, 2, 3, 1, 3], [1, 0, 3, 2, 2, 0]
    log_rate = [0.0, 0.0, 0.0, 0.0, -1000.0, -1100.0]
    pi, info = stationary_distribution(4, source, target, log_rate)
    low = 0.5 / (1 + np.exp(100))
    np.testing.assert_allclose(pi, [low, low, 0.5 - low, 0.5 - low], rtol=1e-12)
    assert info["levels"] == 2


def test_single_state_and_errors():
    pi, _ = stationary_distribution(1, [], [], [])
    np.testing.assert_array_equal(pi, [1.0])
    with pytest.raises(MetaEvalError, match="reducible"):
        stationary_distribution(3, [0, 1], [1, 0], [0.0, 0.0])  # state 2 is cut off
    with pytest.raises(MetaEvalError, match="reducible"):
        stationary_distribution(2, [0, 1], [1, 0], [0.0, -np.inf])  # 1 cannot reach 0
    with pytest.raises(MetaEvalError, match="reducible"):
        stationary_distribution(2, [], [], [])
    with pytest.raises(MetaEvalError, match="one length"):
        stationary_distribution(2, [0], [1, 0], [0.0])
    with pytest.raises(MetaEvalError, match="join states 0..1"):
        stationary_distribution(2, [0, 2], [1, 0], [0.0, 0.0])
    with pytest.raises(MetaEvalError, match="positive integer"):
        stationary_distribution(0, [], [], [])
    with pytest.raises(MetaEvalError, match="self-transitions"):
        stationary_distribution(2, [0, 1], [0, 0], [0.0, 0.0])
    with pytest.raises(MetaEvalError, match="finite or -inf"):
        stationary_distribution(2, [0, 1], [1, 0], [np.nan, 0.0])


def test_principal_submatrices_match_the_dense_matrix():
    # The solves apply D - N on nested subsets of unknowns without copying N.
    rng = np.random.default_rng(4)
    off = np.where(rng.random((9, 9)) < 0.4, rng.random((9, 9)), 0.0)
    np.fill_diagonal(off, 0.0)
    diagonal = rng.random(9) + 1.0
    dense = np.diag(diagonal) - off
    outer = np.array([0, 2, 3, 5, 6, 8])
    inner = np.array([1, 2, 4])  # positions within outer: states 2, 3, 6
    matrix = markov._MMatrix(diagonal, markov.sp.csr_matrix(off)).principal(outer).principal(inner)
    expected = dense[np.ix_(outer[inner], outer[inner])]
    np.testing.assert_allclose(matrix.toarray(), expected, rtol=1e-15)
    x = rng.standard_normal((3, 2))
    np.testing.assert_allclose(matrix @ x, expected @ x, rtol=1e-14)
    np.testing.assert_allclose(matrix.absolute_product(x), np.abs(expected) @ np.abs(x), rtol=1e-14)
    assert matrix.principal(np.arange(3)) is matrix
