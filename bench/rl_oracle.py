"""PSRO with a DQN oracle on leduc_2p: metaeval against OpenSpiel's ``psro_v2`` + ``rl_oracle``.

Run from the repository root: ``python -m bench.rl_oracle [--seeds 3] [--first-seed 3]
[--iterations 21] [--episodes 1000] [--sims 1000]`` (OpenSpiel's side needs the
``bench-openspiel-rl`` extra; without it, or with ``--sides metaeval``, only metaeval's side
runs). Both sides run, per
seed, on leduc_poker with 2 players, with the Nash meta-solver and a DQN oracle trained from
fresh weights for ``--episodes`` episodes per player per iteration (the shared budget):

- metaeval: ``metaeval psro --game leduc_2p --solver nash --oracle dqn --oracle-episodes E
  --oracle-target psro --seed S`` with the oracle's :class:`metaeval.responses.DQN`
  on :data:`SCHEDULE`: one uniform policy per player to start; the exact meta-game (tree
  walk); the meta-Nash by linear programming; the oracle is trained against opponents drawn
  from the other player's meta-Nash marginal, 32 episodes in lock-step, and it returns the
  greedy policy of its Q-network.
- OpenSpiel: ``psro_v2.PSROSolver`` with ``rl_oracle.RLOracle`` and ``rl_policy.DQNPolicy``
  (``open_spiel.python.jax.dqn``), set up as ``examples/psro_v2_example.py`` with
  ``--game_name leduc_poker --n_players 2 --oracle_type DQN --meta_strategy_method nash
  --number_training_episodes E --sims_per_entry SIMS --seed S`` (the probabilistic
  training-strategy selector, one new policy per player per iteration, an untrained DQN per
  player to start, each new meta-game entry estimated from SIMS episodes), its DQN on the
  same :data:`SCHEDULE` (:func:`openspiel_dqn`: network, batch, learning rate, Adam, Huber
  loss, replay size, learning starts, update period, target copies, linear epsilon decay)
  instead of the example's defaults, under which it barely learns in a few thousand episodes.

Measured per iteration i (the population holding i + 1 policies per player), identically for
both sides and outside their timed loops: the exploitability (NashConv / 2) of the meta-Nash
mixture in the full game, by :class:`Exploitability` (an exact tree walk; the test checks it
against OpenSpiel's ``PolicyAggregator`` + ``exploitability.exploitability``). The clocks
(wall and process CPU seconds, cumulative) run over each loop only. metaeval's loop records
an iteration and then trains its oracles, so its clock at row i includes iteration i's
oracle calls (and its own exact CCE gap and NashConv): it is one oracle round ahead of
psro_v2's. Each (side, seed) runs in a fresh process (``--parallel`` of them at a time),
so each pays its own JIT compilation; each run's rows are written as they come
(``per_run/``).

A table of the means over seeds is printed; the per-seed CSV and the figure (exploitability
against iteration and against wall seconds) go to ``--out``. Timings are whatever the
machine gives; compare ratios taken in the same run.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import multiprocessing
import time
from pathlib import Path

import numpy as np
import pandas as pd

GAME = "leduc_poker"
SIDES = ("metaeval", "openspiel")
FROM_ITERATION = 5
"""The goal: lower mean exploitability than psro_v2's at every iteration from this one on."""
SCHEDULE = {"hidden": (64, 64), "learning_rate": 1e-3, "batch_size": 128, "replay_capacity": 20_000,
            "min_replay": 128, "transitions_per_update": 2, "target_every": 100, "epsilon_start": 1.0,
            "epsilon_end": 0.05, "epsilon_decay": 0.5}
"""Both sides' DQN schedule, in :class:`metaeval.responses.DQN`'s terms (see
:func:`openspiel_dqn` for psro_v2's): metaeval's DQN defaults, which were set on seeds 0 to 2.
Chosen again among three schedules by ``--schedule`` runs on seeds 100 and 101
(``docs/results/rl_oracle/tuning/``); report other seeds (docs/benchmarks.md: 3 and 4)."""
DECISIONS_PER_EPISODE = 2.0
"""A Leduc player's decisions per episode (2.31 and 1.76 under uniform play): psro_v2's DQN
counts a step per decision and one per episode's end, metaeval's a transition per decision."""


def openspiel_dqn(schedule: dict, episodes: int, seed: int) -> dict:
    """psro_v2's DQN arguments for ``schedule``: counts of transitions become counts of its
    steps (a step per decision, and one per episode's end, which stores no transition of its
    own), the epsilon decay over a fraction of the oracle's episodes becomes one over steps,
    and the target network is copied whole (a coefficient of 1) every ``target_every``
    gradient steps."""
    steps_per_transition = 1 + 1 / DECISIONS_PER_EPISODE
    learn_every = max(1, round(schedule["transitions_per_update"] * steps_per_transition))
    return {"hidden_layers_sizes": list(schedule["hidden"]), "batch_size": schedule["batch_size"],
            "learning_rate": schedule["learning_rate"], "replay_buffer_capacity": schedule["replay_capacity"],
            "min_buffer_size_to_learn": schedule["min_replay"], "learn_every": learn_every,
            "update_target_network_every": schedule["target_every"] * learn_every, "weight_update_coeff": 1.0,
            "epsilon_start": schedule["epsilon_start"], "epsilon_end": schedule["epsilon_end"],
            "epsilon_decay_duration": max(1, round(schedule["epsilon_decay"] * episodes
                                                   * (DECISIONS_PER_EPISODE + 1))),
            "epsilon_decay_schedule_str": "linear", "optimizer_str": "adam", "loss_str": "huber",
            "discount_factor": 1.0, "seed": seed}


def openspiel_available() -> bool:
    """Whether psro_v2's RL policies import (their JAX agents need chex, dm-haiku and rlax)."""
    try:
        from open_spiel.python.algorithms.psro_v2 import rl_policy  # noqa: F401
    except ImportError:
        return False
    return True


class Exploitability:
    """The exploitability (NashConv / 2) of a mixture of per-player policies in leduc_2p: the
    full-game CCE gap of the product distribution of the weights (for a product, the CCE gap
    is NashConv), on one exact :class:`metaeval.Evaluator` holding every policy met so far
    (each tabulated once, when first met; policies never change once added). The test checks
    it against OpenSpiel's ``PolicyAggregator`` + ``exploitability`` on both sides' policies;
    it is used here because it costs a fraction of a second per iteration where the
    aggregator walks the tree once per policy."""

    def __init__(self):
        self.evaluator = None
        self._ids: dict[int, tuple[int, int]] = {}  # id(policy) -> (player, evaluator id), policy kept alive
        self._held = []

    def __call__(self, policies, probabilities) -> float:
        import warnings

        from metaeval import Evaluator, spiel

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # two greedy networks may act alike; each is still its own entry
            if self.evaluator is None:
                self.evaluator = Evaluator("leduc_2p", mode="exact", population=spiel.Population(
                    "leduc_2p", [[member[0]] for member in policies]))
                for p, member in enumerate(policies):
                    self._ids[id(member[0])] = (p, self.evaluator.ids[p][0])
            for p, member in enumerate(policies):
                for policy in member:
                    if id(policy) not in self._ids:
                        self._ids[id(policy)] = (p, self.evaluator.add(p, policy))
            self._held.append(policies)
        weights = [np.zeros(size) for size in self.evaluator.sizes]
        for p, (member, probability) in enumerate(zip(policies, probabilities)):
            for policy, mass in zip(member, probability):
                weights[p][self.evaluator.ids[p].index(self._ids[id(policy)][1])] += mass
        return float(self.evaluator.gap(np.multiply.outer(*weights)).total / 2)


def run_metaeval(seed: int, iterations: int, episodes: int, sims: int, schedule: dict, log: Path) -> list[dict]:
    """metaeval's PSRO: per iteration the exploitability (by :class:`Exploitability`), the
    loop's own, and the cumulative wall and CPU seconds of its steps."""
    from metaeval.loops.psro import PSRO, PSROConfig
    from metaeval.responses import DQN
    from metaeval.training.meta_solvers import marginals
    from metaeval.training.oracles import learned

    run = PSRO(PSROConfig(game="leduc_2p", solver="nash", oracle="dqn", oracle_episodes=episodes,
                          oracle_target="psro", iterations=iterations, seed=seed),
               oracle=learned(DQN(**schedule), episodes, target="psro"))
    measure, evaluator, known = Exploitability(), run.evaluator, {}
    rows, wall, cpu = [], 0.0, 0.0
    for iteration in range(iterations):
        policies = [[known.setdefault((p, i), evaluator.policy(p, i)) for i in ids]
                    for p, ids in enumerate(evaluator.ids)]
        weights = marginals(evaluator.meta_distribution("nash"))
        wall_start, cpu_start = time.perf_counter(), time.process_time()
        record = run.step()
        wall += time.perf_counter() - wall_start
        cpu += time.process_time() - cpu_start
        rows.append({"iteration": iteration, "exploitability": measure(policies, weights),
                     "own_exploitability": record["exploitability"], "wall_seconds": wall, "cpu_seconds": cpu})
        write_rows(log, rows)
    return rows


def run_openspiel(seed: int, iterations: int, episodes: int, sims: int, schedule: dict, log: Path) -> list[dict]:
    """OpenSpiel's psro_v2 with the DQN rl_oracle, as its example sets it up, the DQN on ``schedule``."""
    import pyspiel
    from open_spiel.python import rl_environment
    from open_spiel.python.algorithms.psro_v2 import psro_v2, rl_oracle, strategy_selectors

    np.random.seed(seed)
    game = pyspiel.load_game_as_turn_based(GAME, {"players": 2})
    measure = Exploitability()
    wall_start, cpu_start = time.perf_counter(), time.process_time()
    env = rl_environment.Environment(game)
    kwargs = {"state_representation_size": env.observation_spec()["info_state"][0],
              "num_actions": env.action_spec()["num_actions"], **openspiel_dqn(schedule, episodes, seed)}
    policy_class = dqn_policy_class()
    oracle = rl_oracle.RLOracle(env, policy_class, kwargs, number_training_episodes=episodes,
                                self_play_proportion=0.0, sigma=0.0)
    agents = [policy_class(env, player, **kwargs) for player in range(2)]
    for agent in agents:
        agent.freeze()
    solver = psro_v2.PSROSolver(
        game, oracle, initial_policies=agents, training_strategy_selector=strategy_selectors.probabilistic,
        rectifier="", sims_per_entry=sims, number_policies_selected=1, meta_strategy_method="nash",
        prd_iterations=50000, prd_gamma=1e-10, sample_from_marginals=True, symmetric_game=False)
    rows, wall, cpu = [], 0.0, 0.0
    for iteration in range(iterations):
        if iteration:
            wall_start, cpu_start = time.perf_counter(), time.process_time()
            solver.iteration()
        wall += time.perf_counter() - wall_start
        cpu += time.process_time() - cpu_start
        rows.append({"iteration": iteration,
                     "exploitability": measure(solver.get_policies(), solver.get_meta_strategies()),
                     "own_exploitability": None, "wall_seconds": wall, "cpu_seconds": cpu})
        write_rows(log, rows)
    return rows


def dqn_policy_class():
    """psro_v2's ``DQNPolicy`` on OpenSpiel's JAX DQN with two of its faults mended (OpenSpiel
    2.0.2), so that it can run on the shared schedule; nothing else of it changes:

    - ``dqn.linear_schedule`` takes Python's ``max`` of a value traced by ``jax.jit`` and raises
      ``TracerBoolConversionError`` at the first step: the linear epsilon decay is computed
      with ``jnp.maximum`` instead;
    - ``learn`` reads the length of a replay buffer made by the first stored transition, which
      a step before it (``learn_every`` of 1 or 2) does not have: it learns nothing then.

    psro_v2 makes each new policy as ``type(agent)(**its arguments)``, so every DQN of a run
    is of this class."""
    import jax
    import jax.numpy as jnp
    from open_spiel.python.algorithms.psro_v2 import rl_policy
    from open_spiel.python.jax import dqn

    class MendedDQN(dqn.DQN):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            start, end = kwargs["epsilon_start"], kwargs["epsilon_end"]
            slope = (end - start) / kwargs["epsilon_decay_duration"]
            self.epsilon_schedule = jax.jit(lambda t: jnp.maximum(start + slope * t, end))

        def learn(self):
            return None if self._replay_buffer is None else super().learn()

    return rl_policy.rl_policy_factory(MendedDQN)


RUNNERS = {"metaeval": run_metaeval, "openspiel": run_openspiel}


def write_rows(log: Path, rows: list[dict]) -> None:
    """A run's rows so far (rewritten after every iteration: an interrupted bench keeps them)."""
    pd.DataFrame(rows).to_csv(log, index=False)


def run_sides(runs: list[tuple[str, int]], args) -> pd.DataFrame:
    """Every (side, seed) run, each in a fresh process, ``args.parallel`` at a time; their rows."""
    logs = args.out / "per_run"
    logs.mkdir(parents=True, exist_ok=True)
    context = multiprocessing.get_context("spawn")
    frames = []
    with concurrent.futures.ProcessPoolExecutor(args.parallel, mp_context=context, max_tasks_per_child=1) as pool:
        futures = {pool.submit(RUNNERS[side], seed, args.iterations, args.episodes, args.sims, args.schedule,
                               logs / f"{side}-{seed}.csv"): (side, seed) for side, seed in runs}
        for future in concurrent.futures.as_completed(futures):
            side, seed = futures[future]
            frame = pd.DataFrame(future.result())
            frame.insert(0, "seed", seed)
            frame.insert(0, "side", side)
            frames.append(frame)
            last = frame.iloc[-1]
            print(f"{side} seed {seed}: exploitability {last.exploitability:.4g} after {last.iteration} iterations, "
                  f"{last.wall_seconds:.1f} s wall, {last.cpu_seconds:.1f} s CPU", flush=True)
    return pd.concat(frames, ignore_index=True).sort_values(["side", "seed", "iteration"], ignore_index=True)


def summary(runs: pd.DataFrame) -> pd.DataFrame:
    """Per iteration and side: the mean exploitability over seeds, its range, mean seconds."""
    grouped = runs.groupby(["iteration", "side"])
    table = grouped.agg(exploitability=("exploitability", "mean"), low=("exploitability", "min"),
                        high=("exploitability", "max"), wall=("wall_seconds", "mean"),
                        cpu=("cpu_seconds", "mean")).unstack("side")
    table.columns = [f"{side} {column}" for column, side in table.columns]
    return table.reset_index()


def goal_met(table: pd.DataFrame) -> bool | None:
    """Lower mean exploitability than psro_v2's at every iteration from FROM_ITERATION on, in
    less mean wall time; None when a side is missing or stopped short."""
    if "openspiel exploitability" not in table or "metaeval exploitability" not in table:
        return None
    later = table[table.iteration >= FROM_ITERATION]
    if later.empty or later.isna().any(axis=None):
        return None  # a side stopped short (an interrupted run): nothing to decide
    lower = bool((later["metaeval exploitability"] < later["openspiel exploitability"]).all())
    faster = bool(table["metaeval wall"].iloc[-1] < table["openspiel wall"].iloc[-1])
    return lower and faster


def plot(runs: pd.DataFrame, out: Path, title: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = {"metaeval": "metaeval psro, DQN oracle", "openspiel": "OpenSpiel psro_v2 + rl_oracle, DQN"}
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for side, colour in zip(SIDES, ("tab:blue", "tab:orange")):
        frame = runs[runs.side == side]
        if frame.empty:
            continue
        for seed, one in frame.groupby("seed"):
            axes[0].plot(one.iteration, one.exploitability, color=colour, alpha=0.25, lw=0.8)
            axes[1].plot(one.wall_seconds, one.exploitability, color=colour, alpha=0.25, lw=0.8)
        mean = frame.groupby("iteration").mean(numeric_only=True)
        axes[0].plot(mean.index, mean.exploitability, color=colour, lw=2, label=f"{labels[side]} (mean)")
        axes[1].plot(mean.wall_seconds, mean.exploitability, color=colour, lw=2, label=labels[side])
    axes[0].set_xlabel("iteration")
    axes[1].set_xlabel("wall seconds (cumulative, mean over seeds)")
    axes[1].set_xscale("log")
    axes[0].set_ylabel("exploitability of the meta-Nash mixture")
    for ax in axes:
        ax.grid(alpha=0.3, which="both")
    axes[0].legend(frameon=False, fontsize=8)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    path = out / "exploitability.png"
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return path


def main(argv=None) -> pd.DataFrame:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--first-seed", type=int, default=3, help="seeds FIRST..FIRST+SEEDS-1 (the schedule "
                        "was chosen on seeds 0 to 2 and 100 to 101: report others)")
    parser.add_argument("--iterations", type=int, default=21, help="rows 0..N-1: N-1 PSRO iterations after the start")
    parser.add_argument("--episodes", type=int, default=1000, help="DQN training episodes per player per oracle call")
    parser.add_argument("--sims", type=int, default=1000, help="psro_v2's episodes per meta-game entry")
    parser.add_argument("--sides", default=",".join(SIDES), help="comma-separated: metaeval, openspiel")
    parser.add_argument("--parallel", type=int, default=1, help="runs at a time (each in its own process)")
    parser.add_argument("--schedule", type=json.loads, default={}, help="JSON object replacing some of "
                        "SCHEDULE's settings for both sides, e.g. '{\"learning_rate\": 0.01}' (to tune on other seeds)")
    parser.add_argument("--report", action="store_true", help="run nothing: tabulate and plot the rows in "
                        "--out's per_run/ (of an interrupted bench too; give its --episodes and --sims)")
    parser.add_argument("--out", type=Path, default=Path("docs/results/rl_oracle"))
    args = parser.parse_args(argv)
    unknown = set(args.schedule) - set(SCHEDULE)
    if unknown:
        parser.error(f"--schedule: unknown settings {', '.join(sorted(unknown))}; known: {', '.join(SCHEDULE)}")
    args.schedule = {**SCHEDULE, **args.schedule}
    sides = args.sides.split(",")
    if "openspiel" in sides and not openspiel_available():
        print("OpenSpiel's psro_v2 RL policies do not import (pip install -e '.[bench-openspiel-rl]'); "
              "running metaeval's side only")
        sides = [side for side in sides if side != "openspiel"]
    args.out.mkdir(parents=True, exist_ok=True)
    if not args.report:
        print(f"DQN schedule of both sides: {args.schedule}; psro_v2's DQN arguments from it: "
              f"{openspiel_dqn(args.schedule, args.episodes, args.first_seed)}", flush=True)
    if args.report:
        names = [(path, *path.stem.rsplit("-", 1)) for path in sorted((args.out / "per_run").glob("*.csv"))]
        runs = pd.concat([pd.read_csv(path).assign(side=side, seed=int(seed)) for path, side, seed in names],
                         ignore_index=True)
        args.seeds = runs.seed.nunique()
    else:
        seeds = range(args.first_seed, args.first_seed + args.seeds)
        runs = run_sides([(side, seed) for seed in seeds for side in sides], args)
        (args.out / "schedule.json").write_text(json.dumps(args.schedule, indent=1) + "\n")
    runs.to_csv(args.out / "runs.csv", index=False)
    table = summary(runs)
    table.to_csv(args.out / "summary.csv", index=False)
    title = (f"leduc_2p PSRO, Nash meta-solver, DQN oracle: {args.episodes} episodes per player per iteration, "
             f"{args.seeds} seeds (psro_v2: {args.sims} episodes per meta-game entry)")
    print(f"\n{title}")
    print(table.to_string(index=False, float_format=lambda x: f"{x:.4g}"))
    met = goal_met(table)
    if met is None:
        print(f"goal undecided: a side has no rows for some iterations from {FROM_ITERATION} on")
    else:
        print(f"metaeval lower at every iteration from {FROM_ITERATION} on and faster: {met}; total wall "
              f"{table['metaeval wall'].iloc[-1]:.1f} s against {table['openspiel wall'].iloc[-1]:.1f} s "
              f"({table['openspiel wall'].iloc[-1] / table['metaeval wall'].iloc[-1]:.1f}x), CPU "
              f"{table['metaeval cpu'].iloc[-1]:.1f} s against {table['openspiel cpu'].iloc[-1]:.1f} s")
    plot(runs, args.out, title)
    return runs


if __name__ == "__main__":
    main()
