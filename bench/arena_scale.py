"""Bradley-Terry at arena scale: metaeval against evalica and arena-rank, in one run.

    python -m bench.pairwise --arena [--battles 10000000] [--models 130] [--seed 0]

One simulated arena (``metaeval.data.simulated.simulated_arena``: uneven sampling, style
correlated with quality, 10% ties) is handed, as one DataFrame, to:

- metaeval: ``count_battles`` (duplicate-compressed cells) + ``bradley_terry(sandwich=True)``;
- evalica 0.4.2's ``bradley_terry`` (Rust), its fit only (no intervals);
- arena-rank 0.1.1: ``PairDataset.from_pandas`` + ``BradleyTerry.compute_ratings_and_cis``
  (L-BFGS in JAX, sandwich intervals), at its defaults;
- then contextual (style-controlled) Bradley-Terry with sandwich intervals on the four
  style features: metaeval against arena-rank's ``ContextualBradleyTerry`` (reg 0 so both
  fit the MLE; inverse-propensity weights and standardised features as arena-rank's
  defaults), on ``--contextual-battles`` of the battles; and their agreement, with
  arena-rank run to convergence and metaeval with arena-rank's Hessian regularisation,
  on ``--agreement-battles``.

Each fit runs in its own forked process, so that its peak memory (VmHWM above the RSS at
the fork) is its own; the times are wall times of the whole call, data preparation
included, each run once (arena-rank's includes its JIT compilation).
"""

from __future__ import annotations

import multiprocessing
import os
import time

import numpy as np
import pandas as pd

from metaeval.data.simulated import STYLE

GIB = 2.0**30


def measured(function, *args):
    """``(seconds, peak extra bytes, result)`` of ``function(*args)`` in a forked child."""
    context = multiprocessing.get_context("fork")
    parent, child = context.Pipe(duplex=False)

    def run():
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")  # reset the peak RSS to the current RSS
        start_rss = _status("VmRSS")
        start = time.perf_counter()
        result = function(*args)
        seconds = time.perf_counter() - start
        child.send((seconds, _status("VmHWM") - start_rss, result))

    process = context.Process(target=run)
    process.start()
    outcome = parent.recv()
    process.join()
    return outcome


def _status(field: str) -> int:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def ours(table, control=None, hessian_ridge=0.0):
    from metaeval import pairwise

    frame = pairwise.bradley_terry(table, sandwich=True, control=control, hessian_ridge=hessian_ridge)
    coefficients = frame.attrs.get("coefficients", {})
    return frame[["score", "lower", "upper"]].sort_index(), [coefficients[f]["coefficient"] for f in control or []]


def evalica_fit(table):
    import evalica

    winners = table["winner"].map({"model_a": evalica.Winner.X, "model_b": evalica.Winner.Y,
                                   "tie": evalica.Winner.Draw})
    result = evalica.bradley_terry(table["model_a"], table["model_b"], winners)
    return np.log(result.scores.sort_index())  # evalica's scores are strengths, exp(theta)


def arena_rank_fit(table, control=None, converged=False):
    import jax.numpy as jnp  # noqa: F401 (arena-rank enables float64 on import)
    from arena_rank.models.bradley_terry import BradleyTerry
    from arena_rank.models.contextual_bradley_terry import ContextualBradleyTerry
    from arena_rank.utils.data_utils import ContextualPairDataset, PairDataset

    tolerances = dict(ftol=0.0, gtol=1e-12, max_iter=10_000) if converged else {}
    if control is None:
        data = PairDataset.from_pandas(table)
        model = BradleyTerry(len(data.competitors), **tolerances)
    else:
        data = ContextualPairDataset.from_pandas(table, control)
        model = ContextualBradleyTerry(len(data.competitors), len(control), reg=0.0, **tolerances)
    result = model.compute_ratings_and_cis(data)
    frame = pd.DataFrame({"score": np.asarray(result["ratings"]) - 1000.0,
                          "lower": np.asarray(result["rating_lower"]) - 1000.0,
                          "upper": np.asarray(result["rating_upper"]) - 1000.0}, index=result["competitors"])
    return frame.sort_index(), list(np.asarray(result.get("coeffs", [])))


def main(args):
    from metaeval import pairwise
    from metaeval.data.simulated import simulated_arena

    print(f"cores: {os.cpu_count()}, load average before: {os.getloadavg()[0]:.2f}")
    start = time.perf_counter()
    table, _ = simulated_arena(models=args.models, battles=args.battles, tie_rate=0.1, seed=args.seed)
    print(f"{args.battles:,} battles among {args.models} models (simulated in {time.perf_counter() - start:.1f} s, "
          f"{table.memory_usage(deep=True).sum() / GIB:.2f} GiB as a DataFrame)\n")
    plain = table[["model_a", "model_b", "winner"]]
    rows = []
    seconds, memory, (board, _) = measured(ours, plain)
    rows.append(("metaeval: count + fit + sandwich", seconds, memory, 0.0))
    seconds_e, memory_e, scores = measured(evalica_fit, plain)
    rows.append(("evalica: fit (no intervals)", seconds_e, memory_e,
                 _difference(board["score"], (scores - scores.mean()) * 400 / np.log(10))))
    seconds_a, memory_a, (reference, _) = measured(arena_rank_fit, plain)
    rows.append(("arena-rank: fit + sandwich", seconds_a, memory_a, _difference(board["score"], reference["score"])))
    _print(rows, "plain Bradley-Terry")
    print(f"\nspeed-up: {seconds_e / seconds:.1f}x evalica's fit, {seconds_a / seconds:.1f}x arena-rank's fit + "
          f"intervals; interval bounds vs arena-rank: max |difference| "
          f"{max(_difference(board[c], reference[c]) for c in ('lower', 'upper')):.2e} Elo "
          "(arena-rank adds 1e-5 per battle to the Hessian's diagonal, metaeval inverts in the mean-0 gauge)")

    sub = table.iloc[: args.contextual_battles].copy()
    for name in STYLE:  # arena-rank takes the features as columns; metaeval forms the same from name_a, name_b
        sub[name] = pairwise.covariates(sub, [name], normalise=False)[:, 0]
    weighted = sub.assign(weight=pairwise.inverse_propensity(sub))
    seconds, memory, (board, beta) = measured(ours, weighted, list(STYLE))
    seconds_a, memory_a, (reference, beta_a) = measured(arena_rank_fit, sub, list(STYLE))
    _print([("metaeval: count + fit + sandwich", seconds, memory, 0.0),
            ("arena-rank: fit + sandwich", seconds_a, memory_a, _difference(board["score"], reference["score"]))],
           f"contextual Bradley-Terry ({len(sub):,} battles, 4 style features)")
    print(f"\nspeed-up: {seconds_a / seconds:.1f}x; coefficients {np.round(beta, 4)} vs arena-rank "
          f"{np.round(beta_a, 4)} (max |difference| {np.abs(np.subtract(beta, beta_a)).max():.1e})")
    agreement = sub.iloc[: args.agreement_battles]
    agreement_weighted = agreement.assign(weight=pairwise.inverse_propensity(agreement))
    _, _, (board, beta) = measured(ours, agreement_weighted, list(STYLE), 1e-5)
    _, _, (reference, beta_a) = measured(arena_rank_fit, agreement, list(STYLE), True)
    print(f"\nagreement, {len(agreement):,} battles, arena-rank run to convergence (ftol 0, gtol 1e-12) and "
          "metaeval with its Hessian regularisation (1e-5 per battle): max |difference| "
          + ", ".join(f"{c} {_difference(board[c], reference[c]):.1e}" for c in ("score", "lower", "upper"))
          + f" Elo, coefficients {np.abs(np.subtract(beta, beta_a)).max():.1e}")
    print(f"\nload average after: {os.getloadavg()[0]:.2f}")


def _difference(ours_, theirs) -> float:
    return float(np.abs(ours_.to_numpy() - theirs.reindex(ours_.index).to_numpy()).max())


def _print(rows, title):
    print(f"{title}:")
    print(f"  {'':36s} {'seconds':>9s} {'peak GiB':>9s} {'max |score diff| (Elo)':>24s}")
    for name, seconds, memory, difference in rows:
        print(f"  {name:36s} {seconds:9.2f} {memory / GIB:9.2f} {difference:24.2e}")
