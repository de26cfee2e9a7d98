"""alpha-Rank (Omidshafiei et al. 2019): stationary mass of an evolutionary Markov chain.

Multi-population model (the default, SPEC 2): one state per joint pure profile; from
profile s, one player p switches to another strategy, giving profile r, with probability
``eta * rho(G_p(r) - G_p(s))`` where ``eta = 1 / sum_p (K_p - 1)`` and ``rho`` is the
fixation probability of a mutant in a population of m (eq. 10, Fermi selection):

    rho(Delta) = (1 - exp(-alpha Delta)) / (1 - exp(-m alpha Delta)),   rho(0) = 1 / m.

A strategy's rating is its marginal stationary mass.  ``alpha = inf`` is the infinite-alpha
model of OpenSpiel's ``use_inf_alpha``: better moves get ``eta (1 - eps)``, payoff ties
``eta / 2``, worse moves ``eta * eps``.

Single-population model (``single_population=True``, symmetric 2-player games only):
states are the K strategies, and a mutant r invades a population playing s with
``rho(G_0(r, s) - G_0(s, r))`` (OpenSpiel's local selection model, used when it is given
one payoff table); both players get the same ratings.  It is not the default because
the SPEC defines alpha-Rank over joint profiles, which also covers asymmetric games.

Both agree with ``open_spiel.python.egt.alpharank.compute``; the chain is built sparsely
(sum_p (K_p - 1) transitions per profile) and solved by :mod:`metaeval.solvers.markov`, so
32,768 profiles take seconds instead of OpenSpiel's dense eigendecomposition, and
262,144 (5e7 transitions) fit in 3 GiB.
"""

from __future__ import annotations

import math
import time

import numpy as np

from metaeval.runs import budget
from metaeval.errors import MetaEvalError
from metaeval.game import MetaGame
from metaeval.solvers.markov import stationary_distribution
from metaeval.ratings.base import Rating

# Infinite alpha: payoff differences below this fraction of the payoff range are ties.
# OpenSpiel uses np.isclose's defaults, which also count differences within 1e-5
# *relative* as ties; the two agree unless payoffs differ by less than that.
TIE_TOLERANCE = 1e-12


def alpharank(
    game: MetaGame,
    alpha: float = 100.0,
    population_size: int = 50,
    inf_alpha_eps: float = 0.01,
    single_population: bool = False,
) -> Rating:
    """Rate each strategy by its marginal alpha-Rank mass (defaults as OpenSpiel's ``compute``).

    Args:
        alpha: selection intensity >= 0, or ``math.inf`` for the infinite-alpha model.
        population_size: m >= 2, the size of each population (ignored when alpha is inf).
        inf_alpha_eps: the noise eps in (0, 1) of the infinite-alpha model.
        single_population: use one population for a symmetric 2-player game.
    """
    start = time.perf_counter()
    chain = _Chain(game, single_population)
    pi, info = chain.stationary(alpha, population_size, inf_alpha_eps)
    diagnostics = {
        "model": "single-population" if single_population else "multi-population",
        "alpha": float(alpha),
        "population_size": population_size,
        "num_states": chain.num_states,
        "residual": info["residual"],
        "aggregation_levels": info["levels"],
        "seconds": time.perf_counter() - start,
    }
    if math.isinf(alpha):
        diagnostics["inf_alpha_eps"] = inf_alpha_eps
    if single_population:
        return Rating("alpharank", game, [pi, pi.copy()], [pi, pi.copy()], diagnostics)
    joint = pi.reshape(game.shape)
    return Rating("alpharank", game, _marginals(joint), joint, diagnostics)


def alpharank_sweep(
    game: MetaGame,
    alphas,
    population_size: int = 50,
    inf_alpha_eps: float = 0.01,
    single_population: bool = False,
) -> list[np.ndarray]:
    """Marginal stationary masses over a grid of alphas: one ``[len(alphas), K_p]`` array per player."""
    alphas = np.atleast_1d(np.asarray(alphas, dtype=np.float64))
    if alphas.ndim != 1 or len(alphas) == 0:
        raise MetaEvalError("alphas must be a non-empty 1-D sequence")
    chain = _Chain(game, single_population)
    rows = []
    for alpha in alphas:
        pi, _ = chain.stationary(alpha, population_size, inf_alpha_eps)
        rows.append([pi, pi] if single_population else _marginals(pi.reshape(game.shape)))
    return [np.array([row[p] for row in rows]) for p in range(game.num_players)]


def _marginals(joint: np.ndarray) -> list[np.ndarray]:
    axes = range(joint.ndim)
    return [joint.sum(axis=tuple(q for q in axes if q != p)) for p in axes]


class _Chain:
    """The transitions of the alpha-Rank chain of a game and the payoff gain along each."""

    def __init__(self, game: MetaGame, single_population: bool):
        if not isinstance(game, MetaGame):
            raise MetaEvalError(f"alpharank needs a MetaGame, got {type(game).__name__}")
        if single_population:
            if game.num_players != 2 or not game.is_symmetric(atol=1e-9 * float(np.ptp(game.payoffs))):
                raise MetaEvalError(
                    "single_population=True needs a symmetric 2-player game "
                    f"(G_1 = G_0 transposed); got {game!r}"
                )
            self.num_states, self.source, self.target, self.gain = _single_population(game)
        else:
            self.num_states, self.source, self.target, self.gain = _joint_profiles(game)
        self.scale = float(np.ptp(game.payoffs))

    def stationary(self, alpha, population_size, inf_alpha_eps):
        log_rate = self._log_rates(alpha, population_size, inf_alpha_eps)
        return stationary_distribution(self.num_states, self.source, self.target, log_rate)

    def _log_rates(self, alpha, population_size, inf_alpha_eps) -> np.ndarray:
        try:
            alpha = float(alpha)
        except (TypeError, ValueError):
            raise MetaEvalError(f"alpha must be a number, got {alpha!r}") from None
        if not alpha >= 0:
            raise MetaEvalError(f"alpha must be >= 0 (or math.inf), got {alpha}")
        if math.isinf(alpha):
            if not 0 < inf_alpha_eps < 1:
                raise MetaEvalError(f"inf_alpha_eps must lie in (0, 1), got {inf_alpha_eps}")
            tie = np.abs(self.gain) <= TIE_TOLERANCE * self.scale
            better = np.log1p(-inf_alpha_eps)
            return np.where(tie, np.log(0.5), np.where(self.gain > 0, better, np.log(inf_alpha_eps)))
        if isinstance(population_size, bool) or not isinstance(population_size, (int, np.integer)) \
                or population_size < 2:
            raise MetaEvalError(f"population_size must be an integer >= 2, got {population_size!r}")
        return log_fixation(self.gain, alpha, int(population_size))


def log_fixation(gain: np.ndarray, alpha: float, population_size: int) -> np.ndarray:
    """log rho for payoff gains ``gain`` (Omidshafiei et al. 2019, eq. 10), stable for any alpha.

    With u = alpha * gain and v = |u|, rho = exp(-(m - 1) max(-u, 0)) (1 - e^-v) / (1 - e^-mv),
    which never overflows; rho(0) = 1/m.  Computed in place: a 64^3 game has 5e7 gains.
    """
    m = population_size
    u = alpha * np.asarray(gain, dtype=np.float64)
    tie = u == 0
    v = np.abs(u)
    v[tie] = 1.0
    log_rho = np.negative(v)
    np.log(np.negative(np.expm1(log_rho, out=log_rho), out=log_rho), out=log_rho)  # log(1 - e^-v)
    v *= -m
    log_rho -= np.log(np.negative(np.expm1(v, out=v), out=v), out=v)  # - log(1 - e^-mv)
    del v
    np.minimum(u, 0.0, out=u)
    u *= m - 1
    log_rho += u
    log_rho[tie] = -np.log(m)
    return log_rho


def _joint_profiles(game: MetaGame):
    """Every unilateral switch between joint profiles (C order ids, as OpenSpiel's).

    Sorted by source profile (then player, then new strategy), so the solver builds its
    sparse matrices without sorting; ids are int32 when they fit, and nothing larger than
    a player's share of the output is formed (5e7 switches at 64^3).
    """
    n = game.num_joints
    index = np.int32 if n < 2**31 else np.int64
    degree = sum(k - 1 for k in game.shape)
    # Per switch: its source and target ids, its gain, and log_fixation's rate and two temporaries.
    per_switch = 2 * np.dtype(index).itemsize + 4 * budget.FLOAT
    budget.check(per_switch * n * degree, f"the alpha-Rank chain of {game!r} ({n * degree:.3g} switches)",
                 "use fewer strategies per player")
    ids = np.arange(n, dtype=index)
    source = np.repeat(ids, degree)
    target, gain = np.empty((n, degree), dtype=index), np.empty((n, degree))
    strides = np.cumprod((1, *game.shape[:0:-1]))[::-1]
    column = 0
    for p, (k, stride) in enumerate(zip(game.shape, strides)):
        own = (ids // index(stride)) % index(k)  # a_p of every profile
        others = np.array([[b for b in range(k) if b != a] for a in range(k)], dtype=index).reshape(k, k - 1)
        block = slice(column, column + k - 1)
        # a with a_p replaced by each a'_p != a_p: a + (a'_p - a_p) * stride_p.
        target[:, block] = ids[:, None] + (others[own] - own[:, None]) * index(stride)
        payoff = game.payoffs[p].ravel()
        np.subtract(payoff[target[:, block]], payoff[:, None], out=gain[:, block])
        column += k - 1
    return n, source, target.ravel(), gain.ravel()


def _single_population(game: MetaGame):
    """Mutant r invading a population playing s gains G_0(r, s) - G_0(s, r)."""
    k = game.shape[0]
    s, r = np.nonzero(~np.eye(k, dtype=bool))
    row = game.payoffs[0]
    return k, s, r, row[r, s] - row[s, r]
