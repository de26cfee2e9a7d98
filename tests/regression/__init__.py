"""Named meta-games on which a rater once failed, kept as regression cases.

Each was captured from a population run (the exact meta-game the loop built and rated
at that iteration, incremental build included) and saved with ``MetaGame.save``.
"""

from pathlib import Path

from metaeval import MetaGame

HERE = Path(__file__).parent

GAMES = {
    "sheriff_seed4_iteration178": (
        "metaeval evolve --game sheriff --rater deviation --iterations 200 --seed 4: the 8x8 "
        "meta-game of iteration 178 (payoffs 2.3 to 14.9), where round 9 of the deviation LPs "
        "was reported infeasible"
    ),
    "kuhn_3p_seed24_iteration209": (
        "metaeval compare --game kuhn_3p --raters deviation --seeds 30 --iterations 300, seed 24, "
        "iteration 209: round 8 of the LPs over every joint is infeasible even afresh at a "
        "tolerance of 1e-7; column generation rates it"
    ),
    "kuhn_3p_seed5_iteration92": (
        "metaeval compare --game kuhn_3p --raters deviation --seeds 30 --iterations 300, seed 5, "
        "iteration 92: the loop's MECCE Newton stopped at a KKT residual of 5.6e-7 with f 5e-3 "
        "above its minimum; damped Newton reaches the minimum"
    ),
    "kuhn_3p_best_response_seed1_iteration41": (
        "python -m metaeval.loops.study raters --seeds 30 --iterations 300, kuhn_3p with "
        "best-response replacements, nash rater, seed 1, iteration 41: pygambit's logit path "
        "follower ran for over 13 minutes without ending (it ends at a max regret of 1e-7 in "
        "0.12 s, not at 1e-8)"
    ),
    "kuhn_3p_best_response_seed6_iteration228": (
        "metaeval evolve --game kuhn_3p --rater nash --replace best-response --seed 6 "
        "--iterations 300, iteration 228: the logit tracer's steps stall at lambda 5e7 and a max "
        "regret of 1.2e-8 x range, and pygambit's follower, its fallback, ran for 55 minutes "
        "(11.7 GB) without reaching 1e-8"
    ),
    "agent57_bootstrap_replicate10": (
        "metaeval.rate(agent-vs-task game of the shipped Agent57 table, 'nash', bootstrap=200, "
        "seed=0), replicate 10: the task player's largest-support LP on the unbounded cone ended "
        "'Not Set', and without presolve counted all 57 tasks where 4 are feasible"
    ),
    "agent57_bootstrap_replicate79": (
        "the same bootstrap with 'payoff', replicate 79: HiGHS ends the MECCE's largest-support "
        "LP 'Unknown' at a feasibility tolerance of 1e-10 and solves a fresh model at 1e-7"
    ),
    "leduc_adaptive_500_face": (
        "bench.league_scale --parts adaptive --adaptive-size 500 --adaptive-initial 2 "
        "--adaptive-rounds 1 --adaptive-rules response_graph (seed 0): the 186 x 186 sub-game, on "
        "the optimal supports and one more row, of the rule's 500 x 500 leduc estimate, whose row "
        "66 carries at most 2e-8 in any maximin strategy; the optimal-support LP read it as losing, "
        "and without it the value falls by 1.6e-10, beyond the value slack, so nash refused the "
        "game ('the feasible set is empty')"
    ),
    "leduc_2p_psro_search_seed1_iteration110": (
        "PSRO on leduc_2p (nash meta-solver, exact meta-game, search oracle of 18,000 episodes, "
        "seed 1; bench.search_oracle's configuration): the 27 x 40 sub-game, payoffs rounded to "
        "their exact multiples of 1/34,560, of the 111 x 111 meta-game of iteration 110, whose "
        "optimal-support LP on the cone of optimal pairs HiGHS ended 'Unbounded' or 'Unknown' "
        "at every tolerance; the smallest sub-game found that still fails so"
    ),
}


def load(name: str) -> MetaGame:
    """The named regression meta-game."""
    if name not in GAMES:
        raise KeyError(f"no regression game {name!r}; have {', '.join(sorted(GAMES))}")
    return MetaGame.load(HERE / f"{name}.npz")
