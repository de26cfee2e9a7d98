"""Rollout best response: approximate policy iteration on forked rollouts against the known opponents.

For games whose responder information states are too many to visit (the table of
[`Search`][metaeval.responses.search.Search] then sees most states once or never), the
values are generalised by a network. Each round plays root episodes with a behaviour
policy b against the opponents (the joint profile j drawn per episode, chance and the
opponents' actions drawn from their known probabilities). At every decision of the
responder p on a root episode, the history *forks*: one copy per legal action a, each
played on to the end with b and the same random numbers (common random numbers: the copies
differ by a, not by the luck of the draw). The copies' returns are samples of

    Q_b(I, a) = E[ u_p(z) | p's information state I, p plays a, then b ]      (beliefs over j
                                                                             and the hidden
                                                                             state: the draws)

for every legal a at once, from a history drawn with its true probability given I. A
network Q(x) (x: the information-state tensor) is fitted to them by least squares, and the
next round's behaviour is epsilon-greedy in Q: rollout policy improvement (Bertsekas &
Tsitsiklis 1996, "Neuro-dynamic programming", section 6.1; Lagoudakis & Parr 2003,
"Reinforcement learning as classification: leveraging modern classifiers") with the
simulator reset to the very histories the responder meets, which is what knowing the
opponents buys and what a learner that only plays episodes (DQN, PPO) cannot do.

Why the value is a lower bound. The responder's policy (greedy in the fitted Q) is one
fixed policy of the full game; its value measured on fresh episodes is an unbiased estimate
of a number at most the best response's value. The fitted values themselves are never
reported.

Histories advance in lock-step (opponent policies answer a batch of decisions at once),
each round in a fixed number of seeded shards concatenated in shard order, on Ray workers
when asked: the same seed gives the same response for any number of workers. The budget
counts ended histories: a root episode with k forked decisions of n legal actions each ends
``1 + k (n - 1)`` of them.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np

from metaeval import games
from metaeval.distributed.replicates import actor_scope
from metaeval.errors import MetaEvalError
from metaeval.responses.dqn import GreedyQNetwork
from metaeval.responses.episodes import OpponentPolicies, play_to_decisions
from metaeval.responses.gap import ResponderShard, run_round, shard_sizes
from metaeval.responses.hyperparameters import adam, check_hyperparameters
from metaeval.responses.opponents import Opponents
from metaeval.runs.progress import Progress
from metaeval.runs.threads import one_blas_thread
from metaeval.spiel.batched import DecisionBatch, observation_size
from metaeval.spiel.lockstep import draw_actions
from metaeval.spiel.mlp import HIDDEN, MLPPolicy, _network, _to_numpy


@dataclass
class _History:
    """A history being played: its state, opponent profile, random stream, and the
    (sample, action) pairs whose value its return is (a root's every decision; one for a
    fork's copy)."""

    state: object
    profile: int
    rng: np.random.Generator
    targets: list = field(default_factory=list)
    root: bool = True


@dataclass
class RolloutSamples:
    """The responder's decisions in one round: tensors ``x [K, D]``, which actions' returns
    were observed ``observed [K, A]`` (the action taken; every legal one where the history
    forked) and those returns ``returns [K, A]`` (0 where not observed)."""

    x: np.ndarray
    observed: np.ndarray
    returns: np.ndarray

    @classmethod
    def concatenate(cls, parts: list[RolloutSamples]) -> RolloutSamples:
        """The samples of ``parts`` one after another.

        Args:
            parts: samples of one game and player.

        Returns:
            The samples.
        """
        return cls(*(np.concatenate([getattr(part, name) for part in parts])
                     for name in ("x", "observed", "returns")))


def rollout_shard(game, player: int, opponents: Opponents, episodes: int, rng: np.random.Generator,
                  behaviour: MLPPolicy | None, epsilon: float, fork: float, num_envs: int = 256) -> RolloutSamples:
    """The responder's decisions in root episodes played until about ``episodes`` histories
    have ended (module docstring), a root forking at each of its decisions with probability
    ``fork``. The behaviour is uniform without ``behaviour``, else its greedy action with
    probability ``1 - epsilon`` and a uniform legal one otherwise."""
    answers = OpponentPolicies(game, opponents)
    blocks: list[np.ndarray] = []  # the decisions' tensors, one block per lock-step
    outcomes: list[tuple[int, int, float]] = []  # (decision, action, the return that followed)
    live: list[_History] = []
    started = ended = 0

    def decide(mover, group):
        return answers.decide(mover, [h.state for h in group], [h.profile for h in group], uniforms=_uniforms(group))

    def on_end(history, value):  # its return is the value of every (decision, action) it stands for
        nonlocal ended
        outcomes.extend((sample, action, value) for sample, action in history.targets)
        ended += 1

    while True:
        while len(live) < num_envs and started < episodes and ended + len(live) < episodes:
            profile = int(rng.choice(len(opponents.probabilities), p=opponents.probabilities))
            live.append(_History(game.new_initial_state(), profile, np.random.default_rng(rng.integers(2**63))))
            started += 1
        if not live:
            break
        deciding = play_to_decisions(player, live, decide, uniform=lambda history: history.rng.random(), on_end=on_end)
        live = _decide(game, player, deciding, answers, behaviour, epsilon, fork, blocks)
    width = game.num_distinct_actions()
    x = np.concatenate(blocks) if blocks else np.zeros((0, observation_size(game)), np.float32)
    observed, returns = np.zeros((len(x), width), bool), np.zeros((len(x), width), np.float32)
    if outcomes:
        rows, actions, values = (np.asarray(column) for column in zip(*outcomes))
        observed[rows, actions], returns[rows, actions] = True, values
    return RolloutSamples(x.astype(np.float32), observed, returns)


def _uniforms(histories) -> np.ndarray:
    return np.array([h.rng.random() for h in histories])


def _decide(game, player, deciding, answers, behaviour, epsilon, fork, blocks) -> list:
    """The histories after ``player``'s decisions, each decision a sample (its tensor added
    to ``blocks``): the behaviour's action everywhere, and where a root forks a copy for
    every other legal action, all on one new random stream."""
    if not deciding:
        return []
    batch = DecisionBatch(game, player, [h.state for h in deciding], answers.reader)
    first = sum(len(block) for block in blocks)
    blocks.append(batch.observations)
    probabilities = batch.legal / batch.legal.sum(axis=1, keepdims=True)
    if behaviour is not None:
        greedy = behaviour.batch_probabilities(batch.observations, batch.legal)
        probabilities = epsilon * probabilities + (1 - epsilon) * greedy
    chosen = draw_actions(probabilities, _uniforms(deciding)).tolist()
    together = [h for h in deciding if h.state.is_simultaneous_node()]
    joint = {}
    if together:  # the opponents' moves, drawn once for a fork's every copy
        moves = np.zeros((len(together), game.num_players()), dtype=np.int64)
        with one_blas_thread():
            for q in range(game.num_players()):
                if q != player:
                    moves[:, q] = answers.decide(q, [h.state for h in together], [h.profile for h in together],
                                                 uniforms=_uniforms(together))
        joint = {id(h): row for h, row in zip(together, moves.tolist())}
    after = []
    for row, history in enumerate(deciding):
        sample, actions = first + row, [chosen[row]]
        forks = history.root and history.rng.random() < fork
        if forks:
            actions += [a for a in np.flatnonzero(batch.legal[row]).tolist() if a != chosen[row]]
            seed = int(history.rng.integers(2**63))
        states = [history.state] + [history.state.clone() for _ in actions[1:]]
        for i, (action, state) in enumerate(zip(actions, states)):
            if id(history) in joint:
                moves = list(joint[id(history)])
                moves[player] = action
                state.apply_actions(moves)
            else:
                state.apply_action(action)
            if i == 0:
                history.targets.append((sample, action))
                if forks:
                    history.rng = np.random.default_rng(seed)
                after.append(history)
            else:
                after.append(_History(state, history.profile, np.random.default_rng(seed), [(sample, action)], False))
    return after


@dataclass(frozen=True)
class Rollout(GreedyQNetwork):
    """The rollout best response (module docstring): its budget in ended histories split over
    ``rounds`` rounds (uniform behaviour in the first, epsilon-greedy in the fitted Q after),
    each round's Q fitted by ``epochs`` passes of Adam over its samples in minibatches of
    ``batch_size``, starting from the previous round's weights; each round in ``shards``
    seeded shards on ``workers`` Ray workers (at ``address``) when more than one."""

    hidden: tuple = HIDDEN
    rounds: int = 8
    epsilon: float = 0.1
    fork: float = 0.25
    learning_rate: float = 1e-3
    epochs: int = 10
    batch_size: int = 512
    shards: int = 4
    num_envs: int = 256
    workers: int = 1
    address: str | None = None

    def __post_init__(self):
        check_hyperparameters(self, {"learning_rate": self.learning_rate > 0, "epsilon": 0 < self.epsilon <= 1,
                                     "fork": 0 <= self.fork <= 1},
                              ("rounds", "epochs", "batch_size", "shards", "num_envs", "workers"))

    def train(self, game, player: int, opponents: Opponents, episodes: int, rng: np.random.Generator,
              values=None) -> dict:
        """Q-network weights after ``episodes`` ended histories against ``opponents``.

        Args:
            game: a ``pyspiel.Game`` or a name for [`metaeval.games.load`][metaeval.games.load].
            player: the player who learns.
            opponents: the distribution its opponents are drawn from.
            episodes: the budget, in ended histories.
            rng: the generator of every random choice.
            values: weights to start from (their greedy policy is then the first round's
                behaviour).

        Returns:
            The weights.
        """
        game = games.load(game)
        if isinstance(episodes, bool) or not isinstance(episodes, (int, np.integer)) or episodes < 1:
            raise MetaEvalError(f"episodes must be a positive int, got {episodes!r}")
        fitted = values is not None
        params = values if fitted else self.initial_values(game, player, rng)
        seed = int(rng.integers(2**63))
        with actor_scope(self.workers, self.address), \
                Progress(int(episodes), f"rollout, player {player}", "episode") as shown:
            for round_, budget in enumerate(shard_sizes(int(episodes), self.rounds)):
                behaviour = self.policy(game, player, params) if fitted else None
                task = ResponderShard(rollout_shard, str(game), player, opponents,
                                      (behaviour, self.epsilon, self.fork, self.num_envs))
                samples = RolloutSamples.concatenate(run_round(task, budget, self.shards, seed, round_,
                                                               self.workers, self.address, shown.advance))
                if len(samples.x):
                    params = self._fit(game, params, samples, np.random.default_rng([seed, round_]))
                    fitted = True
        return _to_numpy(params)

    def _fit(self, game, params, samples: RolloutSamples, rng: np.random.Generator):
        update = _update(self.hidden, game.num_distinct_actions())
        optimiser_state = adam(self.learning_rate).init(params)
        count = len(samples.x)
        size = min(self.batch_size, count)
        for _ in range(self.epochs):
            order = rng.permutation(count)
            for start in range(0, count - size + 1, size):
                rows = order[start:start + size]
                params, optimiser_state = update(params, optimiser_state, samples.x[rows], samples.observed[rows],
                                                 samples.returns[rows])
        return params


@functools.lru_cache(maxsize=None)
def _update(hidden: tuple, num_actions: int):
    """The jitted least-squares step of one network shape: the mean over the observed
    actions of ``(Q(x)_a - return_a)^2``, plus, on the forked decisions, the mean of the same
    error with its mean over the decision's actions taken out: the copies' common random
    numbers cancel from the differences between actions, which is all the greedy policy
    uses, while the absolute error keeps the level."""
    import jax
    import jax.numpy as jnp
    import optax

    module, _ = _network(hidden, num_actions)
    optimiser = adam()

    def loss(params, x, observed, returns):
        q = module.apply({"params": params}, x)
        error = jnp.where(observed, q - returns, 0.0)
        count = observed.sum(axis=1, keepdims=True)
        centred = jnp.where(observed, error - error.sum(axis=1, keepdims=True) / jnp.maximum(count, 1), 0.0)
        forked = count > 1
        return (error**2).sum() / observed.sum() + (centred**2).sum() / jnp.maximum((forked * observed).sum(), 1)

    @jax.jit
    def update(params, optimiser_state, x, observed, returns):
        grads = jax.grad(loss)(params, x, observed, returns)
        changes, optimiser_state = optimiser.update(grads, optimiser_state)
        return optax.apply_updates(params, changes), optimiser_state

    return update
