"""Kemeny-Young timings: the subset programme against the integer program, and the integer
program alone on larger profiles.

    python -m bench.kemeny [--sizes 16,30,54,80]

Profiles: the task player of the two Atari tables shipped with metaeval.data (8 agents
rank 54 or 57 games); synthetic tables whose 8 agents rank m tasks (task difficulty plus
agent skill plus noise, so the votes largely agree); and 20 uniformly random votes over m
alternatives (little consensus, the hard case). A refusal (time limit) is printed as such.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from metaeval import MetaEvalError, data
from metaeval.solvers import social_choice
from metaeval.data.profiles import Profile


def _timed(function, *args):
    start = time.perf_counter()
    try:
        result = function(*args)
    except MetaEvalError as exc:
        result = f"refused: {exc}"
    return result, time.perf_counter() - start


def _random_votes(m: int, rng) -> Profile:
    return Profile(tuple(f"a{i}" for i in range(m)), tuple(tuple(rng.permutation(m)) for _ in range(20)),
                   tuple([1] * 20))


def _synthetic_table(m: int, rng) -> Profile:
    scores = rng.normal(size=(1, m)) + 0.5 * rng.normal(size=(8, 1)) + 0.5 * rng.normal(size=(8, m))
    table = pd.DataFrame(scores, index=[f"agent{i}" for i in range(8)], columns=[f"task{j}" for j in range(m)])
    return Profile.from_game(data.agent_vs_task(table), 1)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="16,30,54,80")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    print("subset programme against integer program (random votes):")
    for m in (8, 10, 12, 14):
        counts = _random_votes(m, rng).preferences()
        subsets, subsets_seconds = _timed(social_choice._kemeny_subsets, counts)
        program, program_seconds = _timed(social_choice._kemeny_program, counts)
        print(f"  m={m}: subsets {subsets_seconds:.3f} s, program {program_seconds:.3f} s, "
              f"same order: {subsets == program}", flush=True)
    profiles = [(f"{name} (tasks)", Profile.from_game(data.agent_vs_task(data.load_table(name)), 1))
                for name in ("atari_rainbow_table6", "atari_agent57")]
    for m in map(int, args.sizes.split(",")):
        profiles += [("synthetic table (8 agents)", _synthetic_table(m, rng)), ("20 random votes", _random_votes(m, rng))]
    print("integer program:")
    for label, profile in profiles:
        election, seconds = _timed(social_choice.kemeny_young, profile, 1000)
        outcome = election if isinstance(election, str) else f"value {election.details['kemeny_value']}"
        print(f"  {label}, m={len(profile.alternatives)}: {seconds:.1f} s, {outcome}", flush=True)


if __name__ == "__main__":
    main()
