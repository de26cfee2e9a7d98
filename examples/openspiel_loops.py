"""metaeval inside OpenSpiel's own loops (``metaeval.integrations.openspiel``).

    python -m examples.openspiel_loops [psro_v2 | exact | jpsro | cfr]

1. psro_v2 on three-player Kuhn poker with metaeval's deviation-rating CCE as the
   meta-strategy (``meta_strategy_method=meta_strategy("deviation")``).
2. psro_v2 on two-player Kuhn poker with the meta-game filled exactly by metaeval's
   Evaluator and metaeval's Nash as the meta-strategy: NashConv reaches 0.
3. jpsro on three-player Kuhn poker with metaeval's MGCCE (training) and deviation CCE
   (evaluation) as meta-solvers: the CCE gap falls.
4. CFR checkpoints on two-player Kuhn poker, copied when taken and rated.
"""

from __future__ import annotations

import contextlib
import io
import sys

import numpy as np
import pyspiel
from open_spiel.python.algorithms import cfr, exploitability, jpsro, policy_aggregator
from open_spiel.python.algorithms.psro_v2 import best_response_oracle, psro_v2

from metaeval.integrations import openspiel


def nash_conv(game, solver) -> float:
    """OpenSpiel's NashConv of a psro_v2 solver's meta-strategy mixture."""
    mixture = policy_aggregator.PolicyAggregator(game).aggregate(
        range(game.num_players()), solver.get_policies(), solver.get_meta_strategies())
    return exploitability.nash_conv(game, mixture)


def run_psro_v2(game, solver_class, iterations, **options) -> list[float]:
    """``iterations`` of psro_v2 with exact best responses; NashConv after each."""
    oracle = best_response_oracle.BestResponseOracle(game=game, best_response_backend="py")
    np.random.seed(0)
    with contextlib.redirect_stdout(io.StringIO()):  # psro_v2 prints its settings
        solver = solver_class(game, oracle, training_strategy_selector="probabilistic",
                              sample_from_marginals=True, **options)
    history = []
    for iteration in range(iterations):
        solver.iteration()
        history.append(nash_conv(game, solver))
        print(f"iteration {iteration}: {[len(p) for p in solver.get_policies()]} policies, "
              f"NashConv {history[-1]:.3g}")
    return history


def psro_v2_with_metaeval_meta_strategy(iterations=4) -> list[float]:
    game = pyspiel.load_game("kuhn_poker(players=3)")
    return run_psro_v2(game, psro_v2.PSROSolver, iterations, sims_per_entry=20,
                       meta_strategy_method=openspiel.meta_strategy("deviation"))


def psro_v2_with_exact_metagame(iterations=8) -> list[float]:
    game = pyspiel.load_game("kuhn_poker")
    return run_psro_v2(game, openspiel.PSROSolver, iterations,
                       meta_strategy_method=openspiel.meta_strategy("nash"))


def jpsro_with_metaeval_meta_solvers(iterations=8) -> list[float]:
    """jpsro's CCE gap of the training meta-distribution, per iteration."""
    game = pyspiel.load_game("kuhn_poker(players=3)")
    gaps = []

    def record(iteration, *state):
        train_gaps = state[9]  # jpsro's callback arguments, in order: ..., train_meta_gaps, eval_meta_gaps, ...
        gaps.append(float(sum(train_gaps[-1])))
        print(f"jpsro iteration {iteration - 1}: CCE gap {gaps[-1]:.3g}")

    jpsro.run_loop(game, "kuhn_3p", iterations=iterations,
                   train_meta_solver=openspiel.register_jpsro("mgcce"),
                   eval_meta_solver=openspiel.register_jpsro("deviation"), callback=record)
    return gaps


def cfr_checkpoints(iterations=32):
    """Checkpoints at CFR iterations 1, 2, 4, ..., rated by deviation ratings."""
    game = pyspiel.load_game("kuhn_poker")
    solver, checkpoints = cfr.CFRSolver(game), openspiel.Checkpoints(game)
    for step in range(1, iterations + 1):
        solver.evaluate_and_update_policy()
        if not step & (step - 1):
            checkpoints.add(solver, name=f"cfr {step}")
    rating = checkpoints.evaluator().rate("deviation")
    print(rating.to_frame().to_string(index=False))
    return rating


EXAMPLES = {
    "psro_v2": psro_v2_with_metaeval_meta_strategy,
    "exact": psro_v2_with_exact_metagame,
    "jpsro": jpsro_with_metaeval_meta_solvers,
    "cfr": cfr_checkpoints,
}


def main(argv=None):
    names = (sys.argv[1:] if argv is None else argv) or list(EXAMPLES)
    for name in names:
        print(f"== {name}: {EXAMPLES[name].__name__.replace('_', ' ')}")
        EXAMPLES[name]()


if __name__ == "__main__":
    main()
