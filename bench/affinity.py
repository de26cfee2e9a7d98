"""Affinity-target equilibria: metaeval against DeepMind's polarix (JAX, gradient methods).

    pip install -e '.[polarix]'
    python -m bench.affinity [--iterations 60000]

Games: the 3-prompt, 4-model king-of-the-hill game u_king(p, i, j) = clip(S[p, i] -
S[p, j], -2, 2) / 2 with S = [[3,2,1,0],[0,3,2,1],[1,1,3,2]], without and with 5 copies of
prompt 1; and the agent-vs-agent-vs-task game of a random 5 x 6 table, without and with
10 adversarial task copies. polarix runs in float64 (jax_enable_x64). For each game:

- the affinity target: polarix's ``max_affinity_entropy_marginals`` (kernel sampled on
  512 Dirichlet profiles, variance 1e-6) against metaeval's exact hard-kernel target;
- the LLE with that target: polarix's LLE update (Adam on the QRE loss of Gemp et al.)
  against ``metaeval.rate(game, "nash", target="affinity")``. polarix's own ``lle``
  lowers the temperature once the loss has gone 250 steps without a new minimum; in
  float64 the loss keeps creeping down and the temperature stalls (at 0.026 with max
  regret 8e-3 on the king-of-the-hill game after 150,000 steps). Here the same update runs
  under polarix's ``fixed_threshold`` schedule instead: the temperature is multiplied by
  0.95 every 200 steps from 1 down to 1e-6, and Adam's step decays from 1e-2 to 1e-4;
- the maximum relative-entropy equilibrium with the product target: polarix has no CCE
  solver, only ``ce_maxent`` (correlated equilibria). Every CE is a CCE, so metaeval's
  CCE objective H(sigma) + sum sigma log t must be at least polarix's; the two coincide
  when the CCE is a CE.

Regrets and violations are relative to the game's payoff range.
"""

from __future__ import annotations

import argparse
import functools
import time

import numpy as np
import pandas as pd

import metaeval
from metaeval import data
from metaeval.solvers.equilibria import deviation_gains
from metaeval.ratings.base import marginals
from metaeval.ratings import affinity
from metaeval.ratings.logit import max_regret, payoff_against

TEMPERATURE_STEPS = 200  # Adam steps per temperature
ANNEAL_RATE = 0.95


def king_of_the_hill(copies: int) -> metaeval.MetaGame:
    scores = np.array([[3, 2, 1, 0], [0, 3, 2, 1], [1, 1, 3, 2]], dtype=float)
    scores = np.vstack([scores, np.repeat(scores[1:2], copies, axis=0)])
    king = np.clip(scores[:, :, None] - scores[:, None, :], -2, 2) / 2  # [prompt, king, rebel]
    king = np.moveaxis(king, 0, -1)
    rebel = np.where(np.eye(4, dtype=bool)[:, :, None], -1.0, -king)
    return metaeval.MetaGame(np.stack([king, rebel, np.abs(king)]),
                             player_names=["king", "rebel", "prompt"])


def table_game(copies: int) -> metaeval.MetaGame:
    table = pd.DataFrame(np.random.default_rng(0).uniform(size=(5, 6)), index=list("abcde"))
    if copies:
        game = data.agent_vs_agent_vs_task(table)
        mean = game.payoffs[0][int(np.argmax(metaeval.rate(game, "uniform").ratings[0]))].mean(axis=0)
        weights = np.exp(-10 * (mean - mean.min()))
        picks = np.random.default_rng(0).choice(len(mean), size=copies, p=weights / weights.sum())
        extra = table.iloc[:, picks].copy()
        extra.columns = [f"{table.columns[i]} copy {k}" for k, i in enumerate(picks)]
        table = pd.concat([table, extra], axis=1)
    return data.agent_vs_agent_vs_task(table)


def _polarix_game(game: metaeval.MetaGame):
    import jax
    import polarix as plx

    return plx.Game(payoffs=jax.numpy.asarray(game.payoffs),
                    actions=tuple(np.array(n) for n in game.strategy_names),
                    players=tuple(game.player_names))


def polarix_target(game: metaeval.MetaGame, iterations: int) -> list[np.ndarray]:
    import jax
    import polarix as plx

    solver = functools.partial(plx.max_affinity_entropy_marginals, kernel_fn=plx.affinity_kernel(jax.random.PRNGKey(0)))
    result = plx.solve(_polarix_game(game), solver, max_num_iterations=iterations, disable_progress_bar=True)
    return [np.asarray(m, dtype=np.float64) for m in result.marginals]


def polarix_lle(game: metaeval.MetaGame, targets, iterations: int) -> list[np.ndarray]:
    """polarix's LLE update under a fixed annealing schedule (module docstring)."""
    import jax.numpy as jnp
    import optax
    from polarix._src.solvers import lle, schedule

    temperature = schedule.fixed_threshold(
        optax.exponential_decay(1.0, 1, ANNEAL_RATE, end_value=1e-6),
        threshold=np.inf, min_steps_before_increment=TEMPERATURE_STEPS)
    optimiser = optax.adam(optax.exponential_decay(1e-2, iterations, 1e-2))
    update = lle._lle_update(optimiser, _polarix_game(game), temperature, epsilon=0.0)
    target_logits = tuple(jnp.log(jnp.maximum(jnp.asarray(t), 1e-30)) for t in targets)
    logits = list(target_logits)
    state, anneal = optimiser.init(logits), temperature.init()
    for _ in range(iterations):
        logits, state, anneal, outputs = update(logits, state, anneal, target_logits)
    return [np.asarray(m, dtype=np.float64) for m in outputs.marginals]


def polarix_ce(game: metaeval.MetaGame, targets, iterations: int) -> np.ndarray:
    import polarix as plx

    joint = np.ones(())
    for t in targets:
        joint = np.multiply.outer(joint, t)
    solver = functools.partial(plx.ce_maxent, target_logit=np.log(np.maximum(joint, 1e-30)))
    result = plx.solve(_polarix_game(game), solver, max_num_iterations=iterations, disable_progress_bar=True)
    return np.asarray(result.joint, dtype=np.float64)


def ce_violation(game: metaeval.MetaGame, sigma: np.ndarray) -> float:
    """max over players, recommendations a and deviations b of sum_{a_-i} sigma(a, a_-i)
    (u_i(b, a_-i) - u_i(a, a_-i))."""
    worst = 0.0
    for p in range(game.num_players):
        s = np.moveaxis(sigma, p, 0).reshape(game.shape[p], -1)
        u = np.moveaxis(game.payoffs[p], p, 0).reshape(game.shape[p], -1)
        gains = s @ u.T - (s * u).sum(axis=1)[:, None]  # [recommended, deviation]
        worst = max(worst, float(gains.max()))
    return worst


def _objective(sigma: np.ndarray, targets) -> float:
    """H(sigma) + sum sigma log t = -KL(sigma || t)."""
    joint = np.ones(())
    for t in targets:
        joint = np.multiply.outer(joint, t)
    mask = sigma > 0
    return float(-(sigma[mask] * np.log(sigma[mask] / joint[mask])).sum())


def _ratings(game: metaeval.MetaGame, strategies) -> list[np.ndarray]:
    values = [payoff_against(game.payoffs, strategies, p) for p in range(game.num_players)]
    return [v - v @ x for v, x in zip(values, strategies)]


def _timed(function, *args):
    start = time.perf_counter()
    result = function(*args)
    return result, time.perf_counter() - start


def compare(label: str, game: metaeval.MetaGame, iterations: int, ce_iterations: int) -> tuple[dict, dict]:
    spread = float(max(np.ptp(g) for g in game.payoffs))
    targets = [affinity.affinity_target(game, p) for p in range(game.num_players)]
    plx_targets, target_seconds = _timed(polarix_target, game, iterations)
    ours, ours_seconds = _timed(lambda: metaeval.rate(game, "nash", target="affinity"))
    theirs, plx_seconds = _timed(polarix_lle, game, plx_targets, iterations)
    lle = {
        "game": label,
        "strategies": "x".join(map(str, game.shape)),
        "target |diff|": max(np.abs(a - b).max() for a, b in zip(targets, plx_targets)),
        "metaeval s": ours_seconds,
        "polarix s": plx_seconds + target_seconds,
        "strategy |diff|": max(np.abs(a - b).max() for a, b in zip(marginals(ours.distribution), theirs)),
        "rating |diff|": max(np.abs(a - b).max() / spread for a, b in zip(ours.ratings, _ratings(game, theirs))),
        "metaeval regret": max_regret(game.payoffs, marginals(ours.distribution)) / spread,
        "polarix regret": max_regret(game.payoffs, theirs) / spread,
        "metaeval king": np.round(ours.ratings[0], 4).tolist(),
        "polarix king": np.round(_ratings(game, theirs)[0], 4).tolist(),
    }
    cce, cce_seconds = _timed(lambda: metaeval.rate(game, "payoff", target="affinity"))
    ce, ce_seconds = _timed(polarix_ce, game, plx_targets, ce_iterations)
    joint = {
        "game": label,
        "metaeval s": cce_seconds,
        "polarix s": ce_seconds,
        "joint |diff|": float(np.abs(cce.distribution - ce).max()),
        "metaeval CCE viol.": max(0.0, max(g.max() for g in deviation_gains(game, cce.distribution))) / spread,
        "polarix CCE viol.": max(0.0, max(g.max() for g in deviation_gains(game, ce))) / spread,
        "metaeval CE viol.": ce_violation(game, cce.distribution) / spread,
        "polarix CE viol.": ce_violation(game, ce) / spread,
        "objective: metaeval - polarix": _objective(cce.distribution, targets) - _objective(ce, targets),
    }
    return lle, joint


def main(argv=None) -> None:
    import jax

    jax.config.update("jax_enable_x64", True)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=60_000,
                        help="polarix's steps for the target and the LLE (at least the schedule's)")
    parser.add_argument("--ce-iterations", type=int, default=100_000, help="polarix's budget for ce_maxent")
    args = parser.parse_args(argv)
    metaeval.rate(king_of_the_hill(0), "nash", target="affinity")  # warm imports
    games = [
        ("king of the hill", king_of_the_hill(0)),
        ("king of the hill + 5 copies of prompt 1", king_of_the_hill(5)),
        ("5x6 table, 3p", table_game(0)),
        ("5x6 table, 3p + 10 adversarial copies", table_game(10)),
    ]
    rows = [compare(label, game, args.iterations, args.ce_iterations) for label, game in games]
    lle = pd.DataFrame([r[0] for r in rows])
    print(lle.drop(columns=["metaeval king", "polarix king"]).to_string(index=False, float_format=lambda x: f"{x:.3g}"))
    print()
    for row, _ in rows:
        print(f"{row['game']}: king ratings metaeval {row['metaeval king']}, polarix {row['polarix king']}")
    print()
    print(pd.DataFrame([r[1] for r in rows]).to_string(index=False, float_format=lambda x: f"{x:.3g}"))


if __name__ == "__main__":
    main()
