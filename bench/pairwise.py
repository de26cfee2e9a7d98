"""Bradley-Terry with bootstrap intervals against the arena's own method, in one run.

    python -m bench.pairwise [--battles 1000000] [--models 100] [--rounds 1000]
                             [--reference-rounds 1] [--lbfgs-rounds 50]
    python -m bench.pairwise --arena [--battles 10000000] [--models 130]

``--arena`` runs the arena-scale comparison with evalica and arena-rank instead (its
defaults: 10M battles, 130 models; see ``bench.arena_scale``).

Simulated battles (uniform pairs, Elo scores N(0, 150), 10% ties).  metaeval counts them
per (pair, outcome) cell, draws every bootstrap round's counts from a multinomial and
fits all rounds by batched Newton.  Two references, both re-derived from the arena's code
(``fastchat/serve/monitor/elo_analysis.py``, see tests/pairwise/references.py):

- the published package (fschat 0.2.36): per round, resample the battle rows and fit a
  scikit-learn logistic regression on the duplicated +-ln(10) design.  At a million
  battles one round takes tens of seconds, so only ``--reference-rounds`` are timed and
  the 1,000-round time is that median times the rounds;
- the arena repository's newer aggregated fit (``fit_bt``: L-BFGS-B on unique outcomes,
  multinomial bootstrap weights), run on ``--lbfgs-rounds`` of the same resampled counts.

Both references stop at their optimisers' tolerances (scikit-learn's lbfgs and L-BFGS-B
stop on a relative drop of the objective), so the scores are also checked against
choix's ILSR on the same win matrices run to tol 1e-13, which converges to the MLE.
"""

from __future__ import annotations

import argparse
import os
import time
from functools import partial

import choix
import numpy as np
from scipy.optimize import minimize
from scipy.special import expit

from bench.timing import median_time
from metaeval import pairwise
from metaeval.pairwise.bradley_terry import CHUNK, fit, resample
from tests.pairwise.references import arena_mle, simulated_battles


def fit_bt_lbfgs(matchups, outcomes, weights, n_models, alpha=np.log(10.0), tol=1e-6):
    """The repository's ``bt_loss_and_grad`` + ``fit_bt`` (L-BFGS-B, maxiter 100, gtol 1e-6)."""

    def loss_and_grad(ratings):
        pair = ratings[matchups]
        probs = expit(alpha * (pair[:, 0] - pair[:, 1]))
        loss = -((np.log(probs) * outcomes + np.log(1.0 - probs) * (1.0 - outcomes)) * weights).sum()
        grads = -alpha * (outcomes - probs) * weights
        model_grad = np.zeros_like(ratings)
        np.add.at(model_grad, matchups, grads[:, None] * np.array([1.0, -1.0]))
        return loss, model_grad

    result = minimize(loss_and_grad, np.zeros(n_models), jac=True, method="L-BFGS-B",
                      options={"maxiter": 100, "gtol": tol})
    return result.x


def aggregated(counts):
    """The repository's ``preprocess_battles_to_arrays`` from metaeval's cells (same unique outcomes)."""
    matchups = np.stack([counts.a, counts.b], axis=1)
    outcomes = np.select([counts.outcome == 0, counts.outcome == 1], [1.0, 0.0], 0.5)
    return matchups, outcomes


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arena", action="store_true", help="the arena-scale comparison (bench.arena_scale)")
    parser.add_argument("--battles", type=int, default=None, help="default 1M (10M with --arena)")
    parser.add_argument("--models", type=int, default=None, help="default 100 (130 with --arena)")
    parser.add_argument("--contextual-battles", type=int, default=2_000_000,
                        help="with --arena: battles of the contextual comparison")
    parser.add_argument("--agreement-battles", type=int, default=200_000,
                        help="with --arena: battles of the converged agreement check")
    parser.add_argument("--rounds", type=int, default=1000)
    parser.add_argument("--reference-rounds", type=int, default=1)
    parser.add_argument("--lbfgs-rounds", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.arena:
        from bench import arena_scale

        args.battles, args.models = args.battles or 10_000_000, args.models or 130
        return arena_scale.main(args)
    args.battles, args.models = args.battles or 1_000_000, args.models or 100
    print(f"cores: {os.cpu_count()}, load average before: {os.getloadavg()[0]:.2f}")
    truth = np.random.default_rng(args.seed).normal(0, 150, args.models)
    battles = simulated_battles(truth, args.battles, args.seed)
    print(f"{args.battles:,} battles among {args.models} models, {args.rounds} bootstrap rounds\n")

    start, cpu = time.perf_counter(), time.process_time()
    counts = pairwise.count_battles(battles)
    counting, counting_cpu = time.perf_counter() - start, time.process_time() - cpu
    cpu = time.process_time()
    ours_time, frame = median_time(lambda: pairwise.bradley_terry(counts, bootstrap=args.rounds, seed=args.seed))
    ours_cpu = time.process_time() - cpu
    point = frame["score"].sort_index().to_numpy()
    print(f"metaeval: counting {counting:.2f} s, fit + {args.rounds} rounds {ours_time:.2f} s, "
          f"total {counting + ours_time:.2f} s wall (target < 10 s), {counting_cpu + ours_cpu:.2f} CPU s")

    # Reference 1: the published logistic regression, per round on resampled rows.
    rng = np.random.RandomState(args.seed)
    times = []
    for _ in range(args.reference_rounds):
        start = time.perf_counter()
        arena_mle(battles.sample(frac=1.0, replace=True, random_state=rng))
        times.append(time.perf_counter() - start)
    per_round = float(np.median(times))
    published = arena_mle(battles)
    exact_time, exact = median_time(lambda: arena_mle(battles, C=np.inf, tol=1e-10, max_iter=1000))
    exact = (exact - 1000)[list(counts.models)].to_numpy()
    print(f"published logistic regression: {per_round:.1f} s per round (median of {args.reference_rounds}); "
          f"{args.rounds} rounds ~ {per_round * args.rounds:,.0f} s; "
          f"speed-up {per_round * args.rounds / (counting + ours_time):,.0f}x")
    print(f"  max |score difference| vs its unpenalised fit (C=inf, tol 1e-10; {exact_time:.1f} s): "
          f"{np.abs(point - exact).max():.2e} Elo")
    published = (published - 1000)[list(counts.models)].to_numpy()
    print(f"  vs its published defaults (L2 penalty C=1, tol 1e-4): {np.abs(point - published).max():.2e} Elo")

    # Reference 2: the aggregated L-BFGS-B fit on the first resampled counts of ours.
    matchups, outcomes = aggregated(counts)
    total = counts.count.sum()
    bt = partial(fit_bt_lbfgs, matchups, outcomes, n_models=args.models)
    stream = np.random.SeedSequence(args.seed).spawn(1)[0]
    draws = resample(counts, min(CHUNK, args.lbfgs_rounds), np.random.default_rng(stream))
    start = time.perf_counter()
    lbfgs_rounds = 400 * np.array([bt(d * counts.weight / total) for d in draws])
    lbfgs_time = (time.perf_counter() - start) / len(draws) * args.rounds
    _, samples = fit(counts, args.rounds, args.seed)
    lbfgs_point = 400 * bt(counts.count * counts.weight / total)
    print(f"aggregated L-BFGS-B: {args.rounds} rounds ~ {lbfgs_time:.0f} s (from {len(draws)} rounds); "
          f"speed-up {lbfgs_time / (counting + ours_time):.1f}x")
    print(f"  max |score difference|: full data {np.abs(point - lbfgs_point).max():.2e} Elo, "
          f"first {len(draws)} bootstrap rounds {np.abs(samples[: len(draws)] - lbfgs_rounds).max():.2e} Elo")

    # The converged reference: choix's ILSR on the same win matrices, tol 1e-13.
    def ilsr(wins):
        return 400 / np.log(10) * choix.ilsr_pairwise_dense(wins, tol=1e-13, max_iter=100_000)

    checked = min(10, args.rounds)
    ilsr_point = ilsr(counts.wins())
    ilsr_rounds = np.array([ilsr(w) for w in counts.wins(draws[:checked])])
    print(f"choix ILSR (tol 1e-13): max |score difference| full data {np.abs(point - ilsr_point).max():.2e} Elo, "
          f"first {checked} bootstrap rounds {np.abs(samples[:checked] - ilsr_rounds).max():.2e} Elo")
    print(f"\nload average after: {os.getloadavg()[0]:.2f}")
    print(frame.head(5).to_string(float_format=lambda x: f"{x:.2f}"))


if __name__ == "__main__":
    main()
