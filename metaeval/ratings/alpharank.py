"""alpha-Rank (Omidshafiei et al. 2019): stationary mass of an evolutionary Markov chain.

Multi-population model (the default; maths, section 2): one state per joint pure profile; from
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
metaeval defines alpha-Rank over joint profiles (maths, section 2), which also covers asymmetric games.

Non-local selection (``local_selection=False``, single population only; Han et al. 2013,
OpenSpiel's ``use_local_selection_model=False``): a player's fitness is its mean payoff
against the rest of the population, so with k mutants r among m players

    f_r(k) = ((k - 1) G_0(r, r) + (m - k) G_0(r, s)) / (m - 1),
    f_s(k) = ((m - k - 1) G_0(s, s) + k G_0(s, r)) / (m - 1),
    rho = 1 / (1 + sum_{l=1}^{m-1} prod_{k=1}^{l} exp(-alpha (f_r(k) - f_s(k)))),

computed in log space; in a constant-sum game it is the local formula with gain
m / (m - 1) (G_0(r, s) - c / 2).

Both agree with ``open_spiel.python.egt.alpharank.compute``; the chain is built sparsely
(sum_p (K_p - 1) transitions per profile) and solved by [`metaeval.solvers.markov`][metaeval.solvers.markov], so
32,768 profiles take seconds instead of OpenSpiel's dense eigendecomposition.  From
``LINE_MIN_SWITCHES`` transitions on, the multi-population chain is never stored: its
rates are applied along sorted payoff lines (`line_rates`,
[`metaeval.solvers.line_rates`][metaeval.solvers.line_rates]) and solved by [`metaeval.solvers.line_markov`][metaeval.solvers.line_markov], so
16.7M profiles (4.2e9 transitions) take about 95 CPU s and 5.4 GiB when the chain has one
metastable class, and one more linear solve per further class (343 CPU s with five;
docs/benchmarks.md).
"""

from __future__ import annotations

import math
import time

import numpy as np
from scipy.special import logsumexp

from metaeval.runs import budget
from metaeval.errors import MetaEvalError
from metaeval.game import MetaGame
from metaeval.solvers.line_markov import line_stationary_distribution
from metaeval.solvers.line_rates import LineRates
from metaeval.solvers.markov import RESIDUAL_TOL, stationary_distribution
from metaeval.ratings.base import Rating, marginals, product_distribution

# Multi-population chains with at least this many switches are applied matrix-free along
# payoff lines (metaeval.solvers.line_rates) instead of stored: on random games the line
# path took 0.44 against 1.1 CPU s at 4 x 16 (3.9e6 switches), 1.9 against 13.8 s at 3 x 64.
LINE_MIN_SWITCHES = 1 << 20

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
    local_selection: bool = True,
) -> Rating:
    """Rate each strategy by its marginal alpha-Rank mass (defaults as OpenSpiel's ``compute``).

    Args:
        game: the meta-game.
        alpha: selection intensity >= 0, or ``math.inf`` for the infinite-alpha model.
        population_size: m >= 2, the size of each population (ignored when alpha is inf).
        inf_alpha_eps: the noise eps in (0, 1) of the infinite-alpha model.
        single_population: use one population for a symmetric 2-player game.
        local_selection: False: the non-local selection model of Han et al. 2013 (module
            docstring; single population, finite alpha).

    Returns:
        The Rating; its ``distribution`` is the stationary distribution over joint profiles
        (with one population: the product of its stationary mass with itself).
    """
    start = time.perf_counter()
    chain = _Chain(game, single_population, local_selection)
    pi, info = chain.stationary(alpha, population_size, inf_alpha_eps)
    diagnostics = {
        "model": "single-population" if single_population else "multi-population",
        "selection": "local" if local_selection else "non-local (Han et al. 2013)",
        "alpha": float(alpha),
        "population_size": population_size,
        "num_states": chain.num_states,
        "residual": info["residual"],
        "aggregation_levels": info["levels"],
        "chain": "sparse" if chain.line_game is None else "matrix-free lines",
        "seconds": time.perf_counter() - start,
    }
    if math.isinf(alpha):
        diagnostics["inf_alpha_eps"] = inf_alpha_eps
    if single_population:
        return Rating("alpharank", game, [pi, pi.copy()], product_distribution([pi, pi]), diagnostics,
                      tolerance=RESIDUAL_TOL)
    joint = pi.reshape(game.shape)
    # Masses are accurate to the accepted residual of the stationary solve: closer ones are tied.
    return Rating("alpharank", game, marginals(joint), joint, diagnostics, tolerance=RESIDUAL_TOL)


def alpharank_sweep(
    game: MetaGame,
    alphas,
    population_size: int = 50,
    inf_alpha_eps: float = 0.01,
    single_population: bool = False,
    local_selection: bool = True,
) -> list[np.ndarray]:
    """Marginal stationary masses over a grid of alphas: one ``[len(alphas), K_p]`` array per player.

    Args:
        game: the meta-game.
        alphas: the selection intensities.
        population_size: as in [`alpharank`][metaeval.ratings.alpharank.alpharank].
        inf_alpha_eps: as in [`alpharank`][metaeval.ratings.alpharank.alpharank].
        single_population: as in [`alpharank`][metaeval.ratings.alpharank.alpharank].
        local_selection: as in [`alpharank`][metaeval.ratings.alpharank.alpharank].

    Returns:
        One array ``[len(alphas), K_p]`` per player.
    """
    alphas = np.atleast_1d(np.asarray(alphas, dtype=np.float64))
    if alphas.ndim != 1 or len(alphas) == 0:
        raise MetaEvalError("alphas must be a non-empty 1-D sequence")
    chain = _Chain(game, single_population, local_selection)
    rows = []
    for alpha in alphas:
        pi, _ = chain.stationary(alpha, population_size, inf_alpha_eps)
        rows.append([pi, pi] if single_population else marginals(pi.reshape(game.shape)))
    return [np.array([row[p] for row in rows]) for p in range(game.num_players)]


class _Chain:
    """The transitions of the alpha-Rank chain of a game and the payoff gain along each, or,
    for a multi-population chain of LINE_MIN_SWITCHES transitions or more, the game alone
    (``line_game``: its rates are applied along payoff lines, built for each alpha)."""

    def __init__(self, game: MetaGame, single_population: bool, local_selection: bool = True):
        if not isinstance(game, MetaGame):
            raise MetaEvalError(f"alpharank needs a MetaGame, got {type(game).__name__}")
        if not local_selection and not single_population:
            raise MetaEvalError(
                "the non-local selection model (local_selection=False) is defined for one population "
                "of a symmetric 2-player game; pass single_population=True"
            )
        self.local_selection = local_selection
        self.row = game.payoffs[0]
        if single_population:
            if game.num_players != 2 or not game.is_symmetric():
                raise MetaEvalError(
                    "single_population=True needs a symmetric 2-player game "
                    f"(G_1 = G_0 transposed); got {game!r}"
                )
            self.num_states, self.source, self.target, self.gain = _single_population(game)
            self.line_game = None
        elif game.num_joints * sum(k - 1 for k in game.shape) >= LINE_MIN_SWITCHES:
            self.num_states, self.line_game = game.num_joints, game
        else:
            self.num_states, self.source, self.target, self.gain = _joint_profiles(game)
            self.line_game = None
        self.scale = float(np.ptp(game.payoffs))

    def stationary(self, alpha, population_size, inf_alpha_eps):
        if self.line_game is not None:
            alpha = self._checked_alpha(alpha, population_size, inf_alpha_eps)
            m = population_size if math.isinf(alpha) else int(population_size)
            return line_stationary_distribution(line_rates(self.line_game, alpha, m, inf_alpha_eps))
        log_rate = self._log_rates(alpha, population_size, inf_alpha_eps)
        return stationary_distribution(self.num_states, self.source, self.target, log_rate)

    def _log_rates(self, alpha, population_size, inf_alpha_eps) -> np.ndarray:
        alpha = self._checked_alpha(alpha, population_size, inf_alpha_eps)
        if math.isinf(alpha):
            tie = np.abs(self.gain) <= TIE_TOLERANCE * self.scale
            better = np.log1p(-inf_alpha_eps)
            return np.where(tie, np.log(0.5), np.where(self.gain > 0, better, np.log(inf_alpha_eps)))
        if not self.local_selection:
            return non_local_log_fixation(self.row, self.source, self.target, alpha, int(population_size))
        return log_fixation(self.gain, alpha, int(population_size))

    def _checked_alpha(self, alpha, population_size, inf_alpha_eps) -> float:
        """alpha as a float, after refusing bad parameters in one line."""
        try:
            alpha = float(alpha)
        except (TypeError, ValueError):
            raise MetaEvalError(f"alpha must be a number, got {alpha!r}") from None
        if not alpha >= 0:
            raise MetaEvalError(f"alpha must be >= 0 (or math.inf), got {alpha}")
        if math.isinf(alpha):
            if not self.local_selection:
                raise MetaEvalError("the non-local selection model needs a finite alpha")
            if not 0 < inf_alpha_eps < 1:
                raise MetaEvalError(f"inf_alpha_eps must lie in (0, 1), got {inf_alpha_eps}")
            return alpha
        if isinstance(population_size, bool) or not isinstance(population_size, (int, np.integer)) \
                or population_size < 2:
            raise MetaEvalError(f"population_size must be an integer >= 2, got {population_size!r}")
        return alpha


def non_local_log_fixation(row: np.ndarray, s: np.ndarray, r: np.ndarray, alpha: float,
                           population_size: int) -> np.ndarray:
    """log rho of a mutant r fixing in a population of s under non-local selection (module
    docstring; Han et al. 2013), for every pair ``(s[i], r[i])`` of the symmetric game ``row``."""
    m = population_size
    k = np.arange(1, m)[None, :]  # mutants
    s, r = s[:, None], r[:, None]
    f_r = ((k - 1) * row[r, r] + (m - k) * row[r, s]) / (m - 1)
    f_s = ((m - k - 1) * row[s, s] + k * row[s, r]) / (m - 1)
    log_products = np.cumsum(-alpha * (f_r - f_s), axis=1)
    return -logsumexp(np.concatenate([np.zeros((len(s), 1)), log_products], axis=1), axis=1)


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


#: Far-field accuracy of the line expansion: exp(-FAR_EXPONENT) ~ 4e-18 relative.
FAR_EXPONENT = 40.0
#: Most terms of the fixation probability's series per direction (see ``line_rates``).
MAX_SERIES_TERMS = 8


def line_rates(game: MetaGame, alpha: float, population_size: int, inf_alpha_eps: float) -> LineRates:
    """The multi-population chain of ``game`` as matrix-free `LineRates`.

    For u = alpha d > 0, rho = (1 - e^-u) / (1 - e^-mu) = sum_{k>=0} (e^-kmu - e^-(km+1)u),
    and rho(-d) = e^-(m-1)u rho(d) = sum_k (e^-(km+m-1)u - e^-(km+m)u): T terms of each are
    exact to e^-Tmu relative, so gains with T m alpha |d| >= FAR_EXPONENT use them and
    closer ones (ties, and rho's removable singularity at 0) the exact log_fixation.  T is
    the fewest terms (at most MAX_SERIES_TERMS) that leave 1/20 of the payoff range near.
    Infinite alpha: 1 - eps up, eps down, exactly 1/2 within the tie tolerance.
    """
    payoffs = list(game.payoffs)
    scale = float(np.ptp(game.payoffs))
    name = f"the alpha-Rank chain of {game!r}"
    if math.isinf(alpha):
        tie = TIE_TOLERANCE * scale

        def log_rate(d):
            return np.where(np.abs(d) <= tie, np.log(0.5),
                            np.where(d > 0, np.log1p(-inf_alpha_eps), np.log(inf_alpha_eps)))

        return LineRates(payoffs, log_rate, [(1 - inf_alpha_eps, 0.0)], [(inf_alpha_eps, 0.0)], tie, name)
    m = population_size
    if alpha == 0 or scale == 0:  # rho = 1/m everywhere
        constant = [(1 / m, 0.0)]
        return LineRates(payoffs, lambda d: np.full(np.shape(d), -np.log(m)), constant, constant, -1.0, name)
    terms = min(MAX_SERIES_TERMS, max(1, math.ceil(FAR_EXPONENT / (m * alpha * scale / 20))))
    up = [pair for k in range(terms) for pair in ((1.0, k * m * alpha), (-1.0, (k * m + 1) * alpha))]
    down = [pair for k in range(terms) for pair in ((1.0, (k * m + m - 1) * alpha), (-1.0, (k * m + m) * alpha))]
    return LineRates(payoffs, lambda d: log_fixation(d, alpha, m), up, down, FAR_EXPONENT / (terms * m * alpha), name)
