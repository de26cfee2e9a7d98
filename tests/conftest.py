"""Shared test helpers: random games as hypothesis strategies and numpy fixtures."""

import numpy as np
import pytest
from hypothesis import settings, strategies as st

import metaeval
from metaeval.runs import rundir

# Property tests draw the same examples on every run, so a red run reproduces; a
# search for new counterexamples is `pytest --hypothesis-profile explore
# --hypothesis-seed N` (a sweep over seeds found the Schulze tie bug).
settings.register_profile("default", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile("default")


@st.composite
def random_games(draw, players=(2, 3), strategies=(2, 6), integer=False):
    """A random N-player game with payoffs in [-1, 1] (or small integers, which tie often)."""
    n = draw(st.sampled_from(players))
    shape = tuple(draw(st.integers(*strategies)) for _ in range(n))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    if integer:
        payoffs = rng.integers(-3, 4, size=(n, *shape)).astype(float)
    else:
        payoffs = rng.uniform(-1, 1, size=(n, *shape))
    return metaeval.MetaGame(payoffs)


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def rock_paper_scissors():
    return metaeval.MetaGame.from_matrix(
        [[0, -1, 1], [1, 0, -1], [-1, 1, 0]],
        strategy_names=[["rock", "paper", "scissors"]] * 2,
    )


def dominant_strategy_game():
    """Strategy 2 strictly dominates for both players of a general-sum game."""
    row = np.array([[3.0, 0.0, 1.0], [1.0, 2.0, 0.0], [4.0, 3.0, 2.0]])
    return metaeval.MetaGame.from_matrix(row, row.T.copy())


def without_timings(records):
    """Population-loop records without their wall-clock timings and memory (which vary run to run)."""
    return [rundir.without_timings(r) for r in records]


@pytest.fixture(scope="session")
def ray_session():
    """One quiet Ray session (2 CPUs, on the loopback address) shared by every test that needs Ray.

    Opened here, not by the code under test, so that code must leave it running.
    """
    ray = pytest.importorskip("ray")
    from metaeval.distributed import session, shutdown

    opened = not ray.is_initialized()
    if opened:
        session.start_embedded(num_cpus=2)
    yield ray
    shutdown()
    if opened:
        session.stop_embedded()
