"""A game too large to enumerate, policies that are not tables, two Ray workers.

    python -m examples.large_games [--workers 2] [--episodes 100] [--out DIR]

Goofspiel with 8 cards and hidden bids has some 4.7e9 terminal histories: exact mode
would need about 1.64 TiB to enumerate it, so the Evaluator says so in one line and
samples instead. Each player's population holds policies as the objects they are:
OpenSpiel's uniform random policy, random policies drawn state by state, plain functions
wrapped by ``spiel.CallablePolicy``, and a "learner" whose parameters keep changing after
it is added (the evaluated snapshot does not). The meta-game is built on Ray workers and
rated by every game-theoretic rater, with bootstrap intervals from the entries' standard
errors.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from open_spiel.python import policy as policy_lib

import metaeval
from metaeval import MetaEvalError, spiel

GAME = "goofspiel(num_cards=8,imp_info=True)"
RATERS = ("nash", "alpharank", "deviation", "payoff")


def highest_card(state, player):
    """Always bid the highest card left."""
    return {max(state.legal_actions(player)): 1.0}


def lowest_card(state, player):
    """Always bid the lowest card left."""
    return {min(state.legal_actions(player)): 1.0}


class Softmax(policy_lib.Policy):
    """A stand-in for a trained network: softmax of per-card preferences over the legal bids."""

    def __init__(self, game, preferences):
        super().__init__(game, list(range(game.num_players())))
        self.preferences = np.asarray(preferences, dtype=np.float64)

    def action_probabilities(self, state, player_id=None):
        legal = state.legal_actions(player_id)
        weights = np.exp(self.preferences[legal] - self.preferences[legal].max())
        return dict(zip(legal, weights / weights.sum()))


def main(argv=None) -> metaeval.Evaluator:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--out", type=Path, default=None, help="save the meta-game here")
    args = parser.parse_args(argv)

    ev = metaeval.Evaluator(GAME, episodes=args.episodes, workers=args.workers, seed=0)  # mode "auto"
    print(f"mode: {ev.mode}")
    learner = Softmax(ev.game, np.zeros(ev.game.num_distinct_actions()))
    for p in range(ev.game.num_players()):
        ev.add(p, policy_lib.UniformRandomPolicy(ev.game), name="uniform")
        ev.add(p, spiel.LazyRandomPolicy(ev.game, p, seed=p), name="random")
        ev.add(p, spiel.CallablePolicy(highest_card), name="highest card")
        ev.add(p, spiel.CallablePolicy(lowest_card), name="lowest card")
        ev.add(p, learner, name="learner")  # a snapshot: its preferences as they are now
    learner.preferences[:] = np.arange(len(learner.preferences))  # "training" goes on; nothing evaluated changes

    metagame = ev.metagame()
    print(f"meta-game {metagame.shape}, {int(metagame.counts.min())} episodes per entry, "
          f"largest standard error {metagame.stderr.max():.3f}")
    for rater in RATERS:
        rating = ev.rate(rater, bootstrap=100, seed=0)
        best = int(np.argmax(rating.ratings[0]))
        low, high = rating.intervals[0][best]
        print(f"{rater:>9}: player 0's best rated {metagame.strategy_names[0][best]!r} "
              f"{rating.ratings[0][best]:.3f} [{low:.3f}, {high:.3f}]")
    try:
        ev.gap(ev.meta_distribution("mecce"))
    except MetaEvalError as exc:
        print(f"CCE gap: {exc}")
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        metagame.save(args.out / "metagame.npz")  # metaeval rate DIR/metagame.npz --rater nash --option bootstrap=200
        print(f"meta-game saved in {args.out / 'metagame.npz'}")
    return ev


if __name__ == "__main__":
    main()
