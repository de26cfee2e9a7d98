"""Policies are asked with BLAS limited to one thread wherever episodes are played in one
process: a NumPy policy's small matrix products cost more on several threads than on one."""

import numpy as np
import pytest
from open_spiel.python import policy as policy_lib
from threadpoolctl import threadpool_info, threadpool_limits

from metaeval import games
from metaeval.responses.gap import deviation_returns
from metaeval.spiel.lockstep import play_episodes
from metaeval.spiel.sampled import play_one_by_one
from metaeval.responses.episodes import TrainingEpisodes
from metaeval.responses.opponents import Opponents


def blas_threads() -> int:
    return max(info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas")


class ThreadsSeen(policy_lib.Policy):
    """Uniform over the legal actions, noting the BLAS threads at each call (batched or per state)."""

    def __init__(self, game):
        super().__init__(game, list(range(game.num_players())))
        self.seen = []

    def batch_probabilities(self, observations, legal):
        self.seen.append(blas_threads())
        return legal / legal.sum(axis=1, keepdims=True)

    def action_probabilities(self, state, player_id=None):
        self.seen.append(blas_threads())
        actions = state.legal_actions(player_id)
        return {action: 1 / len(actions) for action in actions}


def learner_episodes(game, opponent, rng):
    """Episodes of a uniformly random learner (player 0) against ``opponent``."""
    env = TrainingEpisodes(game, 0, Opponents([(None, opponent)], [1.0]), budget=8, num_envs=4, rng=rng)
    while env.running():
        batch, live = env.decisions()
        actions = np.zeros(len(live), dtype=np.int64)
        actions[live] = [rng.choice(np.flatnonzero(row)) for row in batch.legal]
        env.act(actions)


PLAYS = {
    "lock-step episodes": lambda game, policy, rng: play_episodes(game, [policy, policy], 0, 8, batch_size=4),
    "episodes one by one": lambda game, policy, rng: play_one_by_one(game, [policy, policy], 0, 4),
    "a learner's opponents": learner_episodes,
    "the approximate gap's deviations": lambda game, policy, rng: deviation_returns(
        game, 0, policy, Opponents([(None, ThreadsSeen(game))], [1.0]), 4, np.random.SeedSequence(0)),
}


@pytest.mark.parametrize("play", PLAYS, ids=list(PLAYS))
def test_policies_are_asked_with_one_blas_thread(play):
    game = games.load("kuhn_2p")
    policy = ThreadsSeen(game)
    with threadpool_limits(limits=2, user_api="blas"):
        if blas_threads() < 2:
            pytest.skip("BLAS runs one thread here whatever is asked")
        PLAYS[play](game, policy, np.random.default_rng(0))
        assert blas_threads() == 2  # restored after play
    assert policy.seen and set(policy.seen) == {1}
