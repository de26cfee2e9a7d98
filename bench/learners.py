"""Q-learning episodes per second: metaeval's driver against OpenSpiel's usual loop.

    python -m bench.learners

Both train tabular Q-learning (player 0 of kuhn_3p, epsilon 0.2, step size 0.1) against
the same fixed random opponents. The reference is the loop of OpenSpiel's examples: an
``rl_environment.Environment`` stepping the game, OpenSpiel's ``QLearner`` keyed by the
information-state tensor and exploring through ``np.random.choice``, opponents' actions
drawn from their tables. metaeval walks a cache of the game's histories, keys the learner
by the information-state string, steps QLearner's update itself (the same values as
``QLearner`` bit for bit, tested) and draws exploration from a seeded generator
(:mod:`metaeval.responses.qlearning`). A second table times metaeval's driver with its own
learner against the same driver stepping OpenSpiel's ``QLearner`` through ``TimeStep``
objects (``tests/training/learners/reference.py``, which gives the same values bit for bit), on
kuhn_3p and sheriff. Times are medians of 3 (CPU seconds, so that other work on the
machine counts less).
"""

from __future__ import annotations

import time

import numpy as np
from open_spiel.python import rl_environment
from open_spiel.python.algorithms.tabular_qlearner import QLearner

from bench.timing import median_time
from metaeval import games, spiel
from metaeval.responses import Opponents, QLearning
from tests.responses import reference as qlearner_step

EPISODES = 2000


def openspiel_loop(game, opponents, episodes: int, seed: int) -> None:
    np.random.seed(seed)
    env = rl_environment.Environment(game)
    agent = QLearner(0, game.num_distinct_actions())
    lookups = [spiel.game_tree(game).players[q].template.state_lookup for q in range(3)]
    rng = np.random.default_rng(seed)
    for _ in range(episodes):
        time_step = env.reset()
        while not time_step.last():
            player = time_step.observations["current_player"]
            if player == 0:
                action = agent.step(time_step).action
            else:
                state = env.get_state
                row = lookups[player][state.information_state_string(player)]
                probabilities = opponents[player].action_probability_array[row]
                action = int(rng.choice(len(probabilities), p=probabilities))
            time_step = env.step([action])
        agent.step(time_step)


def main() -> None:
    game = games.load("kuhn_3p")
    opponents = [spiel.random_policy(game, q, np.random.default_rng(q)) for q in range(3)]
    profile = Opponents([tuple(opponents)], [1.0])
    learner = QLearning()
    reference, _ = median_time(lambda: openspiel_loop(game, opponents, EPISODES, 0), 3, time.process_time)
    ours, _ = median_time(lambda: learner.train(game, 0, profile, EPISODES, np.random.default_rng(0)), 3,
                          time.process_time)
    print(f"kuhn_3p, {EPISODES} Q-learning episodes against fixed random opponents (CPU s, median of 3)")
    print(f"{'loop':<40}{'seconds':>9}{'episodes/s':>12}")
    print(f"{'rl_environment + QLearner (OpenSpiel)':<40}{reference:>9.3f}{EPISODES / reference:>12.0f}")
    print(f"{'metaeval QLearning.train':<40}{ours:>9.3f}{EPISODES / ours:>12.0f}")
    print(f"speed-up: {reference / ours:.2f}x")
    print(f"\n{EPISODES} episodes, player 0 against random opponents: the learner stepped by metaeval "
          "against QLearner.step (CPU s, median of 3)")
    print(f"{'game':<10}{'QLearner.step':>15}{'metaeval':>10}{'speed-up':>10}")
    for name in ["kuhn_3p", "sheriff"]:
        game = games.load(name)
        rng = np.random.default_rng(1)
        profile = Opponents([tuple(spiel.random_policy(game, q, rng) for q in range(game.num_players()))], [1.0])
        step, theirs = median_time(lambda: qlearner_step.train(learner, game, 0, profile, EPISODES,
                                                               np.random.default_rng(0)), 3, time.process_time)
        ours, values = median_time(lambda: learner.train(game, 0, profile, EPISODES, np.random.default_rng(0)), 3,
                                   time.process_time)
        assert np.array_equal(values, theirs), f"{name}: the learners' values differ"
        print(f"{name:<10}{step:>15.3f}{ours:>10.3f}{step / ours:>9.2f}x")


if __name__ == "__main__":
    main()
