"""Q-learning through OpenSpiel's own ``QLearner.step``, the reference for metaeval's learner.

The same episodes as ``QLearning.train`` (same histories, opponents and draws from the
caller's generator), but the learner is OpenSpiel's ``QLearner``, fed a
``rl_environment.TimeStep`` at each of its moves and at the end, as OpenSpiel's examples
do. Only its epsilon-greedy draw is replaced (``_get_action_probs``, the hook QLearner
provides for that) by one from the caller's generator.
"""

import numpy as np
from open_spiel.python import rl_environment, rl_tools
from open_spiel.python.algorithms.tabular_qlearner import QLearner

from metaeval import games
from metaeval.responses.qlearning import (_categorical, _History, _load_values, _opponent_tables, _read_values,
                                         _root, _Uniforms)
from metaeval.spiel.tree import game_tree


class SeededQLearner(QLearner):
    """``QLearner`` whose epsilon-greedy choice takes one draw from ``uniforms``: a uniform
    legal action with probability epsilon, else a uniform one among the greedy actions."""

    def __init__(self, player, num_actions, uniforms: _Uniforms, **options):
        super().__init__(player, num_actions, **options)
        self._uniforms = uniforms

    def _get_action_probs(self, info_state, legal_actions, epsilon):
        values = self._q_values[info_state]
        best = max(values[a] for a in legal_actions)
        greedy = [a for a in legal_actions if values[a] == best]
        u = self._uniforms.draw()
        if u < epsilon:
            return legal_actions[min(int(u / epsilon * len(legal_actions)), len(legal_actions) - 1)], None
        return greedy[min(int((u - epsilon) / (1 - epsilon) * len(greedy)), len(greedy) - 1)], None


def train(learner, game, player, opponents, episodes, rng, values=None) -> np.ndarray:
    """``learner.train(game, player, opponents, episodes, rng, values)`` with OpenSpiel's
    ``QLearner`` doing the learning."""
    game = games.load(game)
    layout = game_tree(game).players[player]
    uniforms = _Uniforms(rng)
    agent = SeededQLearner(player, game.num_distinct_actions(), uniforms, step_size=learner.step_size,
                           epsilon_schedule=rl_tools.ConstantSchedule(learner.epsilon))
    if values is not None:
        _load_values(agent._q_values, layout, values)
    tables = _opponent_tables(game, player, opponents)
    lookups = [game_tree(game).players[q].template.state_lookup for q in range(game.num_players())]
    profiles = _categorical(opponents.probabilities)
    for _ in range(episodes):
        episode(_root(str(game)), player, agent, tables[uniforms.choice(profiles)], lookups, uniforms)
    return _read_values(agent._q_values, layout)


def episode(root, player, agent, tables, lookups, uniforms) -> None:
    node, reward = root, 0.0
    while not node.terminal:
        if node.player == _History.CHANCE:
            node = node.child(node.outcomes[uniforms.choice(node.chance)])
            continue
        if node.player == player:
            step = rl_environment.TimeStep(
                observations={"info_state": {player: node.key}, "legal_actions": {player: node.legal}},
                rewards={player: reward}, discounts={player: 1.0}, step_type=rl_environment.StepType.MID)
            reward = 0.0
            node = node.child(agent.step(step).action)
        else:
            node = node.child(uniforms.choice(tables[node.player][lookups[node.player][node.key]]))
        reward += node.rewards[player]
    agent.step(rl_environment.TimeStep(
        observations={"info_state": {player: None}, "legal_actions": {player: []}},
        rewards={player: reward}, discounts={player: 0.0}, step_type=rl_environment.StepType.LAST))
