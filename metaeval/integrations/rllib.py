"""RLlib league self-play on OpenSpiel games, with metaeval's ratings and matchmaking.

RLlib trains multi-agent policies on OpenSpiel games through its wrapper
``ray.rllib.env.wrappers.open_spiel.OpenSpielEnv``; its own league examples freeze copies
of the trained module when its win rate passes a threshold and draw opponents uniformly.
[`LeagueCallback`][metaeval.integrations.rllib.LeagueCallback] does the same with metaeval's
maths instead, in any RLlib algorithm of the new API stack whose trained module (``main``)
plays every seat:

- every ``every`` training iterations it *snapshots* ``main``: a copy of its weights,
  frozen as a new RLlib module of the league, and, in a [`metaeval.Evaluator`][metaeval.training.evaluator.Evaluator],
  the table of action probabilities it plays at every information state of each player
  (the softmax of its action logits at the state's observation, the mass of illegal actions
  spread over the legal ones as the wrapper plays them). The module is named by a hash of
  that content, so a snapshot identical to a member is not added twice, and nothing of a
  snapshot refers to the live weights;
- the league's meta-game (exact: the game tree is walked) is rated by any rater, and when
  the league holds more than ``capacity`` members the lowest-rated one (never the newest)
  leaves it, in the Evaluator and in RLlib, so memory stays bounded;
- ``main``'s opponents in the next episodes are drawn by a matchmaking rule (``pfsp``,
  ``uniform``, or a meta-solver such as ``nash``) for the seat it plays, from the newest
  snapshot's point of view; its seat is drawn uniformly;
- every result dict gets flat keys: ``metaeval_rating`` (the newest snapshot's rating,
  averaged over the seats), ``metaeval_league_size``, ``metaeval_ratings`` (per member),
  and when asked ``exploitability`` (of the league's meta-Nash mixture, exact, 2-player
  zero-sum games) and ``approximate_cce_gap`` (a learned lower bound on the league's CCE gap).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

from metaeval.errors import MetaEvalError
from metaeval.integrations.tune import check_rater_and_matchmaking, content_hash

try:  # RLlib is an extra: without it the settings and tables still import
    from ray.rllib.callbacks.callbacks import RLlibCallback
except ImportError:  # pragma: no cover - the rllib extra is not installed
    RLlibCallback = object

PREFIX = "league-"
"""The start of every league member's RLlib module id (the rest is its content hash)."""


@dataclass(frozen=True)
class League:
    """What the league callback does.

    Args:
        game: the OpenSpiel game the environment wraps (a preset name or a game string).
        main: the id of the trained RLlib module.
        capacity: the most members the league keeps.
        every: snapshot ``main`` every this many training iterations.
        rater: the rater of the league's meta-game (a name in ``metaeval.RATERS``).
        rater_options: the rater's options.
        matchmaking: how ``main``'s opponents are drawn: uniform, pfsp, or a meta-solver.
        exploitability: also report the meta-Nash mixture's exact ``exploitability``.
        approximate_gap: episodes of each learned deviation behind ``approximate_cce_gap``
            (0: not reported).
        seed: seeds the draws of seats and opponents.
    """

    game: str
    main: str = "main"
    capacity: int = 8
    every: int = 1
    rater: str = "deviation"
    rater_options: dict = field(default_factory=dict)
    matchmaking: str = "pfsp"
    exploitability: bool = False
    approximate_gap: int = 0
    seed: int = 0

    def __post_init__(self):
        from metaeval import games

        for name, least in (("capacity", 2), ("every", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise MetaEvalError(f"a league's {name} must be an int of at least {least}, got {value!r}")
        check_rater_and_matchmaking(self.rater, self.matchmaking)
        players = games.load(self.game).num_players()
        if players != 2:
            raise MetaEvalError(f"a league plays 2-player games; {self.game} has {players} players")


def module_table(module, layout, player: int) -> np.ndarray:
    """The ``[S, A]`` table an RLlib module plays at ``player``'s information states.

    Args:
        module: an RLlib module whose ``forward_inference`` gives ``action_dist_inputs``
            (categorical logits) from ``obs`` (the OpenSpiel observation tensor).
        layout: the player's table layout (``metaeval.spiel.tree.game_tree(game).players[player]``).
        player: the player.

    Returns:
        Per information state, the softmax of the logits at its observation, with the
        probability of illegal actions spread evenly over the legal ones.
    """
    import torch

    observations = np.array([state.observation_tensor(player) for state in layout.template.states], dtype=np.float32)
    with torch.no_grad():
        logits = module.forward_inference({"obs": torch.from_numpy(observations)})["action_dist_inputs"].numpy()
    logits = logits.astype(np.float64)
    probabilities = np.exp(logits - logits.max(axis=1, keepdims=True))
    probabilities /= probabilities.sum(axis=1, keepdims=True)
    legal = layout.legal
    illegal_mass = np.where(legal, 0.0, probabilities).sum(axis=1, keepdims=True)
    return np.where(legal, probabilities + illegal_mass / legal.sum(axis=1, keepdims=True), 0.0)


class Matchmaker:
    """An RLlib agent-to-module mapping: per episode, ``main`` takes a seat drawn uniformly
    and the other seat a league member drawn from that seat's opponent distribution.

    Args:
        main: the trained module's id.
        members: per seat, the module ids ``main`` can meet there (the other seat's members).
        weights: per seat, their probabilities.
        seed: seeds the draws (with ``version``, its own stream per league).
        version: how many times the league has changed.
    """

    def __init__(self, main: str, members: list[list[str]], weights: list[np.ndarray], seed: int, version: int):
        self.main, self.members, self.weights = main, members, [np.asarray(w, dtype=float) for w in weights]
        self.rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(version,)))
        self.drawn: dict = {}

    def __call__(self, agent_id, episode, **kwargs) -> str:
        key = episode.id_
        if key not in self.drawn:
            seat = int(self.rng.integers(len(self.members)))
            opponent = str(self.rng.choice(self.members[seat], p=self.weights[seat]))
            self.drawn[key] = {"seat": seat, "opponent": opponent, "unmapped": len(self.members)}
        entry = self.drawn[key]
        entry["unmapped"] -= 1
        if not entry["unmapped"]:  # every seat mapped: the episode's entry is done
            del self.drawn[key]
        return self.main if agent_id == entry["seat"] else entry["opponent"]


class LeagueCallback(RLlibCallback):
    """The RLlib callback of a metaeval league (see the module docstring).

    Give it to an algorithm config as ``config.callbacks(functools.partial(LeagueCallback, league))``.

    Args:
        league: what it does.
    """

    def __init__(self, league: League):
        super().__init__()
        self.league = league
        self.evaluator = None  # made with the algorithm (RLlib also makes callbacks for its env runners)
        self.members: list[str] = []  # module ids, in the Evaluator's order (the same for both players)
        self.version = 0
        self.metrics: dict = {}

    @classmethod
    def of(cls, algorithm) -> "LeagueCallback":
        """The league callback of an RLlib algorithm.

        Args:
            algorithm: the algorithm.

        Returns:
            Its callback of this class (its league, evaluator and members).
        """
        callbacks = algorithm.callbacks if isinstance(algorithm.callbacks, list) else [algorithm.callbacks]
        found = [c for c in callbacks if isinstance(c, cls)]
        if len(found) != 1:
            raise MetaEvalError(f"the algorithm has {len(found)} league callbacks, not one")
        return found[0]

    # -- RLlib's hooks ----------------------------------------------------------------
    def on_algorithm_init(self, *, algorithm, metrics_logger=None, **kwargs) -> None:
        from metaeval.training.evaluator import Evaluator

        self.evaluator = Evaluator(self.league.game, mode="exact", seed=self.league.seed)
        self.snapshot(algorithm)

    def on_train_result(self, *, algorithm, metrics_logger=None, result: dict, **kwargs) -> None:
        if algorithm.iteration % self.league.every == 0:
            self.snapshot(algorithm)
        result.update(self.metrics)

    # -- the league -------------------------------------------------------------------
    def snapshot(self, algorithm) -> str:
        """Add ``main`` as it is now to the league (unless a member holds the same content),
        drop the lowest-rated member beyond the capacity, and draw ``main``'s opponents anew.

        Args:
            algorithm: the RLlib algorithm.

        Returns:
            The member's module id.
        """
        from ray.rllib.core.rl_module.rl_module import RLModuleSpec

        from metaeval.spiel.policies import tabular_policy
        from metaeval.spiel.tree import game_tree

        main = self.league.main
        weights = {key: np.array(value, copy=True)
                   for key, value in algorithm.learner_group.get_weights(module_ids=[main])[main].items()}
        spec = RLModuleSpec.from_module(algorithm.get_module(main))
        frozen = spec.build()
        frozen.set_state(weights)
        tree = game_tree(self.evaluator.game)
        tables = [module_table(frozen, tree.players[p], p) for p in range(2)]
        member = PREFIX + hashlib.sha256("".join(content_hash(t) for t in tables).encode()).hexdigest()[:16]
        if member in self.members:
            return member
        for p, table in enumerate(tables):
            self.evaluator.add(p, tabular_policy(tree.players[p], table), name=member)
        self.members.append(member)
        leaving = self._over_capacity()
        self.version += 1
        mapping = self._matchmaker()
        algorithm.add_module(module_id=member, module_spec=spec, new_agent_to_module_mapping_fn=mapping)
        algorithm.set_state({"learner_group": {"learner": {"rl_module": {member: weights}}}})
        # set on every env runner itself: a weight sync from the learners carries their sequence
        # number, which env runners already have after an iteration, and they would ignore it
        algorithm.env_runner_group.foreach_env_runner(lambda runner: runner.module[member].set_state(weights),
                                                      local_env_runner=True)
        for gone in leaving:
            algorithm.remove_module(module_id=gone, new_agent_to_module_mapping_fn=mapping)
        self.metrics = self._metrics()
        return member

    def _over_capacity(self) -> list[str]:
        """Remove the lowest-rated members (never the newest) beyond the capacity; their ids."""
        from metaeval.training.selection import lowest_rated

        excess = len(self.members) - self.league.capacity
        if excess <= 0:
            return []
        ev = self.evaluator
        mean = np.mean(ev.rate(self.league.rater, **self.league.rater_options).ratings, axis=0)
        newest = np.arange(len(self.members)) == len(self.members) - 1
        lowest, _ = lowest_rated(mean, excess, ev.rng, protected=newest)
        leaving = [self.members[i] for i in lowest]
        for p in range(2):
            ev.remove(p, [ev.ids[p][i] for i in lowest])
        self.members = [m for m in self.members if m not in leaving]
        return leaving

    def _matchmaker(self) -> Matchmaker:
        ev = self.evaluator
        weights = [ev.opponents(p, self.league.matchmaking, member=ev.ids[p][-1]) for p in range(2)]
        return Matchmaker(self.league.main, [list(self.members), list(self.members)], weights, self.league.seed,
                          self.version)

    def _metrics(self) -> dict:
        ev = self.evaluator
        mean = np.mean(ev.rate(self.league.rater, **self.league.rater_options).ratings, axis=0)
        metrics = {"metaeval_rating": float(mean[-1]), "metaeval_league_size": len(self.members),
                   "metaeval_ratings": {m: float(r) for m, r in zip(self.members, mean)}}
        if self.league.exploitability:
            metrics["exploitability"] = float(ev.exploitability())
        if self.league.approximate_gap:
            estimate = ev.approximate_gap(ev.meta_distribution("mecce"), learner="ppo",
                                          episodes=self.league.approximate_gap)
            metrics["approximate_cce_gap"] = float(estimate.bound)
        return metrics
