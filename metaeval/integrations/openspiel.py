"""metaeval inside OpenSpiel's own loops.

- [`meta_strategy`][metaeval.integrations.openspiel.meta_strategy]: a ``psro_v2`` ``meta_strategy_method`` from any metaeval
  meta-solver ([`metaeval.training.meta_solvers.SOLVERS`][metaeval.training.meta_solvers.SOLVERS]) or rater whose rating
  carries a distribution (``payoff``, ``nash``, ``deviation``, ...):

      psro_v2.PSROSolver(game, oracle, sims_per_entry=1000,
                         meta_strategy_method=meta_strategy("deviation"))

- [`PSROSolver`][metaeval.integrations.openspiel.PSROSolver]: ``psro_v2.PSROSolver`` whose meta-game is filled by a
  [`metaeval.Evaluator`][metaeval.training.evaluator.Evaluator] (exact expected returns by default, or episodes sampled by
  metaeval's batched builder with ``mode="sampled"``) instead of ``sims_per_entry``
  episodes per entry.
- [`jpsro_meta_solver`][metaeval.integrations.openspiel.jpsro_meta_solver] and [`register_jpsro`][metaeval.integrations.openspiel.register_jpsro]: metaeval meta-solvers under a
  name ``jpsro.run_loop`` accepts as ``train_meta_solver`` / ``eval_meta_solver``.
- [`Checkpoints`][metaeval.integrations.openspiel.Checkpoints]: snapshots of a CFR-style solver's average policy, copied when
  taken (``CFRSolver.average_policy()`` returns one object updated in place), with a
  warning when a snapshot equals an earlier one; rated through an Evaluator.
"""

from __future__ import annotations

import reprlib
import warnings
from collections.abc import Callable

import numpy as np
from open_spiel.python import policy as policy_lib
from open_spiel.python.algorithms import jpsro
from open_spiel.python.algorithms.psro_v2 import psro_v2

from metaeval.errors import MetaEvalError
from metaeval.game import MetaGame
from metaeval.ratings import RATERS, check_options, rate
from metaeval.training import meta_solvers
from metaeval.training.evaluator import Evaluator


def distribution(game: MetaGame, method, **options) -> np.ndarray:
    """The joint distribution ``[K_1..K_N]`` that ``method`` puts on ``game``'s joints: a
    meta-solver (name in ``meta_solvers.SOLVERS`` or a callable) or a rater's
    ``Rating.distribution``.

    Args:
        game: the meta-game.
        method: a meta-solver's name or callable, or a rater's name.
        **options: the meta-solver's or rater's options.

    Returns:
        The joint distribution.

    Raises:
        MetaEvalError: ``method`` gives no distribution (as ``elo`` and most voting rules).
    """
    sigma = _played(game, _checked(method, options), options)
    if sigma is None:
        raise MetaEvalError(_no_distribution(method))
    return sigma


def _played(game: MetaGame, method, options: dict) -> np.ndarray | None:
    """``method``'s distribution on ``game``; None for a rater whose ratings carry none."""
    if callable(method) or method in meta_solvers.SOLVERS:
        return meta_solvers.solve(game, method, **options)
    return rate(game, method, **options).distribution


def _no_distribution(method) -> str:
    return (f"the {method} rater gives no distribution to play; choose a meta-solver "
            f"({', '.join(meta_solvers.SOLVERS)}) or a rater that gives one")


def _checked(method, options: dict):
    """``method``, once its name and the names of its ``options`` are checked."""
    if callable(method) or method in meta_solvers.SOLVERS:
        meta_solvers.check_options(method, options)
    elif method in RATERS:
        check_options(method, options)
    else:
        raise MetaEvalError(
            f"unknown meta-solver or rater {method!r}; choose one of "
            f"{', '.join(sorted(set(meta_solvers.SOLVERS) | set(RATERS)))} or pass a callable"
        )
    return method


#: Small meta-games of the kinds OpenSpiel's loops meet, on which a named method is tried
#: when its meta-strategy is made, so that a method or option that cannot work is refused
#: there rather than inside the loop's first iteration.
TRIAL_GAMES = {
    "symmetric 2-player zero-sum": MetaGame.from_matrix([[0, -1, 1], [1, 0, -1], [-1, 1, 0]]),
    "2-player win-probability": MetaGame.from_matrix([[0.5, 0.7], [0.3, 0.5]], [[0.5, 0.3], [0.7, 0.5]]),
    "2-player general-sum": MetaGame.from_matrix([[3, 0, 1], [5, 1, 0]], [[3, 5, 0], [0, 1, 2]]),
    "3-player": MetaGame(np.array([[[[1, 0], [0, 2]], [[0, 3], [1, 0]]],
                                   [[[2, 0], [1, 0]], [[0, 1], [0, 3]]],
                                   [[[0, 1], [2, 0]], [[1, 0], [0, 2]]]], dtype=np.float64)),
}


def _tried(method, options: dict):
    """``method`` (checked), once tried on each of `TRIAL_GAMES`: refused when it gives
    no distribution or plays on none of them, and the kinds it cannot play on named in a
    ``UserWarning``. A callable is not called before the loop calls it."""
    _checked(method, options)
    if callable(method):
        return method
    label = f"{method}({', '.join(f'{k}={v!r}' for k, v in options.items())})" if options else method
    refusals = {}  # kind of game -> why the method refused it
    for kind, game in TRIAL_GAMES.items():
        try:
            sigma = _played(game, method, options)
        except MetaEvalError as exc:
            refusals[kind] = str(exc)
            continue
        if sigma is None:
            raise MetaEvalError(_no_distribution(method))
    if refusals:
        kinds, first = " or ".join(refusals), next(iter(refusals.values()))
        if len(refusals) == len(TRIAL_GAMES):
            raise MetaEvalError(f"meta-strategy {label} plays on no meta-game tried ({kinds}): {first}")
        warnings.warn(f"meta-strategy {label} cannot play on {kinds} meta-games ({first})", UserWarning, stacklevel=3)
    return method


def meta_strategy(method="deviation", **options) -> Callable:
    """A ``psro_v2`` meta-strategy method: ``f(solver, return_joint=False)`` returns the
    players' marginals of ``method``'s distribution on the solver's meta-game, and with
    ``return_joint`` also the joint distribution (shape ``[K_1..K_N]``, which psro_v2's
    joint sampler indexes by shape). ``options`` go to the meta-solver or rater.

    A named method is tried here on small meta-games of each kind (`TRIAL_GAMES`):
    one that gives no distribution, or an option it does not take or cannot use, is a
    ``MetaEvalError`` now; the kinds of meta-game it cannot play on are named in a
    ``UserWarning``.

    Args:
        method: a meta-solver or rater, as [`distribution`][metaeval.integrations.openspiel.distribution] takes it.
        **options: its options.

    Returns:
        The meta-strategy method, for ``psro_v2.PSROSolver(meta_strategy_method=...)``.
    """
    _tried(method, options)

    def metaeval_meta_strategy(solver, return_joint=False):
        game = MetaGame(np.stack([np.asarray(m, dtype=np.float64) for m in solver.get_meta_game()]))
        sigma = distribution(game, method, **options)
        marginals = meta_solvers.marginals(sigma)
        return (marginals, sigma) if return_joint else marginals

    metaeval_meta_strategy.__name__ = f"metaeval_{getattr(method, '__name__', method)}"
    return metaeval_meta_strategy


class PSROSolver(psro_v2.PSROSolver):
    """``psro_v2.PSROSolver`` with the meta-game built by a [`metaeval.Evaluator`][metaeval.training.evaluator.Evaluator].

    Every new policy is added to the evaluator (stored as a table on the game's
    information states), and the meta-game is the evaluator's: exact expected returns
    (``mode="exact"``, the default) or ``episodes`` per joint sampled in batches
    (``mode="sampled"``), evaluated only for joints touching new policies. The game must
    be enumerable (its information states listed), as for the Evaluator. Other arguments
    are ``psro_v2.PSROSolver``'s; ``sims_per_entry`` is not used.

    Args:
        game: the OpenSpiel game.
        oracle: the best-response oracle, as ``psro_v2.PSROSolver`` takes it.
        mode: ``"exact"`` or ``"sampled"``, as the Evaluator's.
        episodes: episodes per joint in sampled mode.
        workers: Ray actors building the meta-game.
        seed: the Evaluator's seed.
        **kwargs: ``psro_v2.PSROSolver``'s other arguments.
    """

    def __init__(self, game, oracle, mode: str = "exact", episodes: int = 1000, workers: int = 1,
                 seed: int = 0, **kwargs):
        if kwargs.get("symmetric_game"):
            raise MetaEvalError("metaeval's PSROSolver keeps one population per player; use symmetric_game=False")
        self.evaluator = Evaluator(game, mode=mode, episodes=episodes, workers=workers, seed=seed)
        super().__init__(game, oracle, sims_per_entry=episodes, **kwargs)

    def update_empirical_gamestate(self, seed=None):
        """Add the new policies to the evaluator and take its meta-game (``seed`` unused:
        the evaluator's seed fixes sampled entries).

        Args:
            seed: unused.

        Returns:
            The meta-game's payoff matrices, one per player, as ``psro_v2`` keeps them.
        """
        for player, new in enumerate(self._new_policies):
            for policy in new:
                self.evaluator.add(player, policy)
        self._policies = [old + new for old, new in zip(self._policies, self._new_policies)]
        self._meta_games = list(np.array(self.evaluator.metagame().payoffs))
        return self._meta_games


def jpsro_meta_solver(method, **options) -> Callable:
    """A function of the form ``jpsro`` calls its meta-solvers with,
    ``f(meta_game, per_player_repeats, ignore_repeats=False) -> (dist, {})``. Unless
    ``ignore_repeats``, a policy found k times weighs as k copies (the meta-game is
    expanded by the repeats, solved, and each copy's mass summed back), as jpsro's own
    solvers do: a policy found 0 times gets no mass. ``method`` and ``options`` are tried as
    [`meta_strategy`][metaeval.integrations.openspiel.meta_strategy] tries them.

    Args:
        method: a meta-solver or rater, as [`distribution`][metaeval.integrations.openspiel.distribution] takes it.
        **options: its options.

    Returns:
        The meta-solver function.
    """
    _tried(method, options)

    def metaeval_jpsro_solver(meta_game, per_player_repeats, ignore_repeats=False):
        payoffs = np.asarray(meta_game, dtype=np.float64)
        if ignore_repeats:
            return distribution(MetaGame(payoffs), method, **options), {}
        repeats = _repeat_counts(per_player_repeats, payoffs.shape[1:])
        for player, counts in enumerate(repeats):
            payoffs = np.repeat(payoffs, counts, axis=player + 1)
        sigma = distribution(MetaGame(payoffs), method, **options)
        for player, counts in enumerate(repeats):
            found = np.flatnonzero(counts)  # each found policy's copies sum back to it
            starts = np.concatenate([[0], np.cumsum(counts[found])[:-1]])
            summed = np.zeros(sigma.shape[:player] + (len(counts),) + sigma.shape[player + 1:])
            summed[(slice(None),) * player + (found,)] = np.add.reduceat(sigma, starts, axis=player)
            sigma = summed
        return sigma, {}

    return metaeval_jpsro_solver


def _repeat_counts(per_player_repeats, sizes: tuple[int, ...]) -> list[np.ndarray]:
    """Each player's repeat counts, checked against the meta-game's ``sizes``."""
    if len(per_player_repeats) != len(sizes):
        raise MetaEvalError(f"{len(per_player_repeats)} lists of repeat counts for a {len(sizes)}-player meta-game")
    repeats = []
    for player, (counts, size) in enumerate(zip(per_player_repeats, sizes)):
        counts = np.asarray(counts)
        if counts.shape != (size,):
            raise MetaEvalError(f"player {player} has repeat counts of shape {counts.shape} for {size} policies")
        if not (np.issubdtype(counts.dtype, np.number) and np.all(counts >= 0) and np.all(counts % 1 == 0)
                and counts.any()):
            raise MetaEvalError(f"player {player}'s repeat counts must be non-negative integers, not all 0; "
                                f"got {counts.tolist()}")
        repeats.append(counts.astype(np.int64))
    return repeats


def register_jpsro(method, name: str | None = None, **options) -> str:
    """Make ``method`` a ``jpsro`` meta-solver; returns the name to pass as
    ``train_meta_solver`` or ``eval_meta_solver`` (default ``"metaeval_<method>"``).

    Args:
        method: a meta-solver or rater, as [`distribution`][metaeval.integrations.openspiel.distribution] takes it.
        name: the name to register under (needed for a callable ``method``).
        **options: its options.

    Returns:
        The registered name.
    """
    if name is None:
        if not isinstance(method, str):
            raise MetaEvalError("a callable meta-solver needs a name to register under")
        name = f"metaeval_{method}"
    jpsro.FLAG_TO_FUNC[name] = jpsro_meta_solver(method, **options)
    return name


class Checkpoints:
    """Snapshots of a training run's policy, each a copy frozen when taken.

    ``add(solver)`` copies ``solver.average_policy()`` (or a policy given directly):
    OpenSpiel's ``CFRSolver.average_policy()`` returns the same ``TabularPolicy`` object,
    updated in place, on every call, so references kept across iterations would all end
    as the final policy. A snapshot equal to an earlier one draws a ``UserWarning``.
    [`evaluator`][metaeval.integrations.openspiel.Checkpoints.evaluator] puts every snapshot in each player's population.

    Args:
        game: a ``pyspiel.Game`` or a name for [`metaeval.games.load`][metaeval.games.load].
    """

    def __init__(self, game):
        from metaeval import games

        self.game = games.load(game)
        self.names: list[str] = []
        self.policies: list[policy_lib.TabularPolicy] = []

    def add(self, source, name: str | None = None) -> policy_lib.TabularPolicy:
        """Copy ``source.average_policy()`` (or ``source`` itself when it is a policy, or a
        callable ``state -> {action: probability}``).

        Args:
            source: a CFR-style solver, an OpenSpiel policy or a callable.
            name: the snapshot's name (unique); default: ``"checkpoint <number>"``.

        Returns:
            The snapshot, a ``TabularPolicy``.
        """
        policy = source.average_policy() if hasattr(source, "average_policy") else source
        if isinstance(policy, policy_lib.TabularPolicy):
            snapshot = policy.__copy__()
        elif callable(policy):  # an OpenSpiel Policy is one too
            snapshot = policy_lib.tabular_policy_from_callable(self.game, policy)
        else:
            given = f"{type(source).__name__}.average_policy() returned" if policy is not source else "got"
            raise MetaEvalError("Checkpoints.add needs a solver with average_policy(), a policy.Policy or a "
                                f"callable state -> action probabilities; {given} {reprlib.repr(policy)}")
        name = f"checkpoint {len(self.policies)}" if name is None else str(name)
        if name in self.names:
            raise MetaEvalError(f"a checkpoint is already named {name!r}")
        table = snapshot.action_probability_array
        for earlier, kept in zip(self.names, self.policies):
            if kept.action_probability_array.shape == table.shape and np.array_equal(
                    kept.action_probability_array, table):
                warnings.warn(f"checkpoint {name!r} is identical to {earlier!r}: was the policy copied, "
                              "and did training change it in between?", UserWarning, stacklevel=2)
                break
        self.names.append(name)
        self.policies.append(snapshot)
        return snapshot

    def evaluator(self, **options) -> Evaluator:
        """An [`metaeval.Evaluator`][metaeval.training.evaluator.Evaluator] with every snapshot, by name, in each player's
        population (``options`` go to the Evaluator: mode, episodes, workers, seed).

        Args:
            **options: the Evaluator's options.

        Returns:
            The evaluator.

        Raises:
            MetaEvalError: no snapshot was taken yet.
        """
        if not self.policies:
            raise MetaEvalError("no checkpoints yet: add() some first")
        evaluator = Evaluator(self.game, **options)
        for player in range(self.game.num_players()):
            for name, policy in zip(self.names, self.policies):
                evaluator.add(player, policy, name=name)
        return evaluator
