"""The stress corpus: meta-games on which raters must not fail, generated from seeds.

    python -m bench.stress_corpus --out stress_corpus.npz [--seeds 2] [--iterations 100] [--every 10]

Families (every game carries its family and where it came from):

- ``evolved``: meta-games captured along population runs, every rater, kuhn_3p and
  sheriff, a snapshot every ``every`` iterations of each seed (the hard cases are
  evolved populations whose policies are nearly tied);
- ``evolved-variant``: each evolved snapshot with its strategies relabelled at random,
  scaled by 1e-6 and by 1e6, and perturbed by Gaussian noise of 1e-12 of its range
  (the Sheriff seed-4 failure came and went under exactly these changes);
- ``degenerate``: integer payoffs with many ties, duplicated and dominated strategies,
  constant games, payoffs scaled by 1e-6 and 1e6, zero-sum games, 2 to 4 players;
- ``win-probability``: symmetric 2-player games P + P^T = 1 (what elo accepts), with ties;
- ``regression``: the named games of tests/regression.

Everything is drawn from ``numpy.random.default_rng`` seeded per family, so the same
arguments give the same corpus.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from metaeval import MetaGame
from metaeval.loops.evolve import EvolveConfig, Evolution
from tests import regression

EVOLVED_GAMES = ("kuhn_3p", "sheriff")
EVOLVED_RATERS = ("uniform", "nash", "alpharank", "deviation", "payoff")


def evolved(seeds: int, iterations: int, every: int, log=print):
    """(payoffs, source) of meta-games along population runs of every rater and game."""
    for game in EVOLVED_GAMES:
        for rater in EVOLVED_RATERS:
            for seed in range(seeds):
                run = Evolution(EvolveConfig(game=game, rater=rater, iterations=iterations, seed=seed))
                for _ in range(iterations):
                    rated = run.evaluator.metagame()  # the meta-game this step rates, built as the loop builds it
                    run.step()
                    if run.iteration % every == 0:
                        source = f"{game} {rater} seed {seed} iteration {run.iteration - 1}"
                        yield np.array(rated.payoffs), source
                log(f"  evolved: {game} {rater} seed {seed}")


def variants(payoffs: np.ndarray, source: str, rng: np.random.Generator):
    """Relabelled, rescaled and perturbed copies of one meta-game."""
    relabelled = payoffs
    for axis, k in enumerate(payoffs.shape[1:]):
        relabelled = np.take(relabelled, rng.permutation(k), axis=1 + axis)
    yield relabelled, f"{source}, strategies relabelled"
    yield payoffs * 1e-6, f"{source}, times 1e-6"
    yield payoffs * 1e6, f"{source}, times 1e6"
    noise = 1e-12 * np.ptp(payoffs) * rng.standard_normal(payoffs.shape)
    yield payoffs + noise, f"{source}, noise 1e-12 of the range"


def _shape(rng, players):
    largest = {2: 8, 3: 5, 4: 3}[players]
    return tuple(int(k) for k in rng.integers(2, largest + 1, size=players))


def degenerate(count: int, rng: np.random.Generator):
    """(payoffs, source) of games built to be awkward: ties, copies, dominance, scale."""
    kinds = ["integer ties", "zero-one", "duplicated strategies", "dominated strategies",
             "constant", "scaled 1e-6", "scaled 1e6", "zero-sum integer"]
    for i in range(count):
        kind = kinds[i % len(kinds)]
        players = int(rng.integers(2, 5)) if kind != "zero-sum integer" else 2
        shape = _shape(rng, players)
        if kind == "integer ties":
            payoffs = rng.integers(-2, 3, size=(players, *shape)).astype(float)
        elif kind == "zero-one":
            payoffs = rng.integers(0, 2, size=(players, *shape)).astype(float)
        elif kind == "duplicated strategies":
            game = MetaGame(rng.integers(-3, 4, size=(players, *shape)).astype(float))
            for _ in range(int(rng.integers(1, 4))):
                p = int(rng.integers(players))
                game = game.add_clone(p, int(rng.integers(game.shape[p])))
            payoffs = np.array(game.payoffs)
        elif kind == "dominated strategies":
            payoffs = rng.uniform(-1, 1, size=(players, *shape))
            p = int(rng.integers(players))
            own = np.moveaxis(payoffs[p], p, 0)
            own[-1] = own[0] - rng.integers(0, 2, size=own.shape[1:]) * rng.uniform(0, 0.5, size=own.shape[1:])
        elif kind == "constant":
            payoffs = np.full((players, *shape), float(rng.integers(-3, 4)))
        elif kind == "zero-sum integer":
            row = rng.integers(-2, 3, size=shape).astype(float)
            payoffs = np.stack([row, -row])
        else:
            factor = 1e-6 if kind == "scaled 1e-6" else 1e6
            base = rng.uniform(-1, 1, size=(players, *shape)) if i % 2 else \
                rng.integers(-2, 3, size=(players, *shape)).astype(float)
            payoffs = factor * base
        yield payoffs, f"{kind}, {players} players, shape {shape}"


def win_probability(count: int, rng: np.random.Generator):
    """Symmetric 2-player win-probability games, with ties (0.5) and certainties (0, 1)."""
    for i in range(count):
        k = int(rng.integers(2, 9))
        upper = rng.choice([0.0, 0.5, 1.0], size=(k, k)) if i % 2 else rng.uniform(size=(k, k))
        p = np.triu(upper, 1)
        p = p + np.tril(1 - p.T, -1)
        np.fill_diagonal(p, 0.5)
        yield np.stack([p, p.T]), f"win probabilities, {k} strategies"


def generate(seeds: int = 2, iterations: int = 100, every: int = 10, degenerate_count: int = 2000,
             win_probability_count: int = 200, log=print) -> list[tuple[str, str, np.ndarray]]:
    """The corpus as (family, source, payoffs) triples."""
    corpus = [("regression", regression.GAMES[name], np.array(regression.load(name).payoffs))
              for name in regression.GAMES]
    rng = np.random.default_rng(8)
    for payoffs, source in evolved(seeds, iterations, every, log):
        corpus.append(("evolved", source, payoffs))
        corpus.extend(("evolved-variant", s, p) for p, s in variants(payoffs, source, rng))
    rng = np.random.default_rng(80)
    corpus.extend(("degenerate", s, p) for p, s in degenerate(degenerate_count, rng))
    rng = np.random.default_rng(800)
    corpus.extend(("win-probability", s, p) for p, s in win_probability(win_probability_count, rng))
    return corpus


def save(path: Path, corpus, settings: dict) -> None:
    arrays = {f"payoffs_{i}": payoffs for i, (_, _, payoffs) in enumerate(corpus)}
    meta = {"settings": settings, "games": [[family, source] for family, source, _ in corpus]}
    np.savez_compressed(path, meta=np.array(json.dumps(meta)), **arrays)


def load(path: Path) -> tuple[list[tuple[str, str, np.ndarray]], dict]:
    with np.load(path) as data:
        meta = json.loads(str(data["meta"]))
        games = [(family, source, data[f"payoffs_{i}"]) for i, (family, source) in enumerate(meta["games"])]
    return games, meta["settings"]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("stress_corpus.npz"))
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--iterations", type=int, default=100)
    parser.add_argument("--every", type=int, default=10)
    parser.add_argument("--degenerate", type=int, default=2000)
    parser.add_argument("--win-probability", type=int, default=200)
    args = parser.parse_args(argv)
    settings = {"seeds": args.seeds, "iterations": args.iterations, "every": args.every,
                "degenerate": args.degenerate, "win_probability": args.win_probability}
    corpus = generate(args.seeds, args.iterations, args.every, args.degenerate, args.win_probability)
    save(args.out, corpus, settings)
    families = {}
    for family, _, _ in corpus:
        families[family] = families.get(family, 0) + 1
    print(f"{len(corpus)} games in {args.out}: " + ", ".join(f"{n} {f}" for f, n in families.items()))


if __name__ == "__main__":
    main()
