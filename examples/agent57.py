"""Ratings with bootstrap intervals for the Agent57 score table (Badia et al. 2020, H.4).

    python -m examples.agent57 [--bootstrap 200] [--seed 0] [--workers 1] [--out docs/uncertainty]

The table gives, per Atari game, each agent's mean score and a published ±. It is
rated as an agent-vs-task game (maths, section 6): the six agents' scores are min-max
normalised per game over the agents' means, and each ± is divided by the same span
and used as the entry's standard error (MuZero's row has no ±, so its entries count
as exact). ``rate_with_intervals`` accepts any MetaGame with ``stderr``, such as a
loader's output for the same table.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

import metaeval
from metaeval import data
from metaeval.viz.plots import plot_intervals

AGENTS = ["agent57", "r2d2(bandit)", "muzero", "ngu", "r2d2(retrace)", "r2d2"]


def agent_vs_task(agents=AGENTS) -> metaeval.MetaGame:
    """The published table (shipped as ``atari_agent57``) as a 2-player zero-sum game of
    the six agents with per-entry standard errors (metaeval.data.agent_vs_task)."""
    scores, spreads = data.load_table("atari_agent57", spread=True)
    return data.agent_vs_task(scores.loc[agents], stderr=spreads.loc[agents])


def rate_with_intervals(game: metaeval.MetaGame, raters=("deviation", "uniform"), bootstrap: int = 200,
                        seed: int = 0, workers: int = 1, out: Path | None = None) -> pd.DataFrame:
    """Rate ``game`` with each rater and a bootstrap; the agents' rows, and a figure in ``out``."""
    import matplotlib.pyplot as plt

    frames, tolerances = [], {}
    fig, axes = plt.subplots(1, len(raters), figsize=(5.4 * len(raters), 3.2), squeeze=False)
    for ax, rater in zip(axes[0], raters):
        rating = metaeval.rate(game, rater, bootstrap=bootstrap, seed=seed, workers=workers)
        frame = rating.to_frame()
        tolerances[rater] = rating.tolerance
        frames.append(frame[frame.player == game.player_names[0]].assign(rater=rater))
        plot_intervals(rating, player=0, ax=ax, title=f"{rater}: {game.player_names[0]} ratings")
    if out is not None:
        Path(out).mkdir(parents=True, exist_ok=True)
        fig.tight_layout()
        fig.savefig(Path(out) / "agent57.png", dpi=130)
    plt.close(fig)
    frame = pd.concat(frames, ignore_index=True)
    frame.attrs["rank_tolerance"] = tolerances  # per rater: ratings this close share a rank
    return frame


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("docs/uncertainty"))
    args = parser.parse_args(argv)
    frame = rate_with_intervals(agent_vs_task(), bootstrap=args.bootstrap, seed=args.seed,
                                workers=args.workers, out=args.out)
    columns = ["rater", "strategy", "rating", "low", "high", "p_top", "rank", "ci_rank"]
    print(frame[columns].to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    print("ranks: ratings within each rater's accuracy share a rank ("
          + ", ".join(f"{rater} {tolerance:.3g}" for rater, tolerance in frame.attrs["rank_tolerance"].items()) + ")")


if __name__ == "__main__":
    main()
