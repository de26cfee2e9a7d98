"""The rating benchmarks in one run (``python -m bench.ratings``).

Random 3-player games of 8, 12 and 16 strategies per player: deviation ratings
against the paper's recipe (CVXPY + GLOP, re-parametrised per round), and
alpha-Rank against OpenSpiel's dense solver, plus alpha-Rank alone at 32.
"""

from bench import alpharank, deviation


def main() -> None:
    print(deviation.deviation_table())
    print()
    alpharank.main([])


if __name__ == "__main__":
    main()
