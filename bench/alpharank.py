"""alpha-Rank: metaeval's sparse solver against OpenSpiel's dense one, measured in one run.

    python -m bench.alpharank [--max-openspiel 16] [--repeats 3]

Random 3-player games (payoffs uniform in [-1, 1]) with K strategies per player, so K^3
profiles.  OpenSpiel (``open_spiel.python.egt.alpharank.compute``) builds a dense
K^3 x K^3 transition matrix and eigendecomposes it; at K = 32 that matrix alone needs
8.6 GB and the eigendecomposition is out of reach, so only metaeval runs there.  The
comparison uses alpha = 1, m = 10, where OpenSpiel's chain is well-conditioned enough
for its eigenvectors to be accurate; metaeval also runs OpenSpiel's defaults (alpha =
100, m = 50) at K = 32, where the chain is nearly reducible.
"""

from __future__ import annotations

import argparse

import numpy as np

import metaeval
from bench.timing import median_time
from metaeval.ratings.alpharank import alpharank
from open_spiel.python.egt import alpharank as openspiel_alpharank

ALPHA, POPULATION = 1.0, 10


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[8, 12, 16, 32])
    parser.add_argument("--max-openspiel", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    reference = openspiel_alpharank
    print(f"alpha-Rank, 3 players, alpha={ALPHA}, m={POPULATION}; times in seconds (median of "
          f"{args.repeats} for metaeval, one run for OpenSpiel)")
    print(f"{'K':>3} {'profiles':>9} {'OpenSpiel':>10} {'metaeval':>9} {'speed-up':>9} {'max |dpi|':>10}")
    warm_up = metaeval.MetaGame(np.random.default_rng(0).uniform(-1, 1, size=(3, 3, 3, 3)))
    alpharank(warm_up), reference.compute(list(warm_up.payoffs), m=POPULATION, alpha=ALPHA)
    for k in args.sizes:
        payoffs = np.random.default_rng(k).uniform(-1, 1, size=(3, k, k, k))
        game = metaeval.MetaGame(payoffs)
        ours_time, rating = median_time(lambda: alpharank(game, alpha=ALPHA, population_size=POPULATION), args.repeats)
        if k <= args.max_openspiel:
            theirs, (_, _, expected, _, _) = median_time(
                lambda: reference.compute(list(payoffs), m=POPULATION, alpha=ALPHA)
            )
            error = np.abs(rating.distribution.ravel() - expected).max()
            if error > 1e-6:
                raise SystemExit(f"disagreement with OpenSpiel at K={k}: {error:.3g}")
            print(f"{k:>3} {k**3:>9} {theirs:>10.3f} {ours_time:>9.3f} {theirs / ours_time:>8.0f}x {error:>10.1e}")
        else:
            print(f"{k:>3} {k**3:>9} {'(cannot)':>10} {ours_time:>9.3f} {'':>9} {'':>10}")
    k = max(args.sizes)
    game = metaeval.MetaGame(np.random.default_rng(k).uniform(-1, 1, size=(3, k, k, k)))
    seconds, rating = median_time(lambda: alpharank(game), 1)
    print(f"K={k} at OpenSpiel's defaults (alpha=100, m=50): {seconds:.3f} s, "
          f"{rating.diagnostics['aggregation_levels']} aggregation level(s), "
          f"residual {rating.diagnostics['residual']:.1e}")


if __name__ == "__main__":
    main()
