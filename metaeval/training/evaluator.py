"""The Evaluator: what a training loop talks to.

It holds a game and a population per player, and keeps their meta-game current:

    ev = metaeval.Evaluator(game)                 # mode="auto" | "exact" | "sampled", workers, address, seed
    pid = ev.add(player, policy)                  # any OpenSpiel policy, snapshotted
    ev.metagame()                                 # only joints touching new policies are evaluated
    ev.rate("deviation"); ev.select("deviation", k); ev.prune("deviation", keep)
    sigma = ev.meta_distribution("mgcce")         # a joint distribution over the population
    ev.gap(sigma).total; ev.nash_conv()           # full-game CCE gap; NashConv (2-player zero-sum)
    ev.save(dir); metaeval.Evaluator.load(dir)

Every policy is snapshotted when added, so a caller changing its own policy object later
(a learner that keeps training it) cannot change what was evaluated. In exact mode the
snapshot is a read-only table on the game's information states
(`metaeval.spiel.policies`); in sampled mode it is a copy of the object itself
(`metaeval.spiel.snapshot`), and nothing enumerates the game tree: any game that
can be simulated, any policy. Ids are unique per player and never reused, as in
[`metaeval.spiel.Population`][metaeval.spiel.Population], which is what the meta-game caches key on.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyspiel
from open_spiel.python import policy as policy_lib

from metaeval import games, spiel
from metaeval.training import matchmaking
from metaeval.training import meta_solvers
from metaeval.runs import rundir
from metaeval.distributed import build_metagame, cce_gap
from metaeval.distributed.build import check_limits
from metaeval.distributed.pool import MAX_RETRIES, SHARD_TIMEOUT
from metaeval.errors import DamagedFileError, MetaEvalError
from metaeval.game import MetaGame
from metaeval.ratings import Rating, rate
from metaeval.training.selection import lowest_rated, rank_order
from metaeval.spiel.best_response import drawn_choices, pure_table
from metaeval.responses.gap import ApproximateGap, approximate_cce_gap
from metaeval.spiel.mode import resolve_mode, tree_refusal
from metaeval.spiel.policies import policy_table, tabular_policy
from metaeval.spiel.population import identical_policies_warned, warn_identical
from metaeval.spiel.tree import game_tree
from metaeval.spiel.snapshot import snapshot

FILE_FORMAT = "metaeval.training.evaluator/1"
STATE_FILE = "evaluator.json"


@dataclass(frozen=True)
class Pruned:
    """What [`Evaluator.prune`][metaeval.training.evaluator.Evaluator.prune] did: per player, the ids removed (in population order),
    their names and the tie-break keys drawn (empty for a player already within the cap);
    the rating the choice was made on, and the ids that were protected."""

    removed: list[list[int]]
    names: list[list[str]]
    tie_break_keys: list[list[float]]
    rating: Rating
    protected: list[list[int]]


class Evaluator:
    """A game, one population per player, and their meta-game kept current.

    Args:
        game: a ``pyspiel.Game`` or a name for [`metaeval.games.load`][metaeval.games.load].
        mode: ``"exact"`` meta-games (the game is enumerated; policies are stored as tables;
            the CCE gap and best responses walk the tree), ``"sampled"`` from ``episodes``
            per joint (any game that can be simulated; policies are stored as objects; no
            tree, so no exact gap or best response), or ``"auto"``: exact when the game can
            be enumerated, else sampled, said in one line; so is, in exact mode chosen by
            ``"auto"``, the first policy asked at every information state to make its table.
        episodes: episodes per joint in sampled mode.
        workers: Ray actors building the meta-game (see ``build_metagame``) and
            computing the CCE gap (``metaeval.distributed.cce_gap``).
        address: the Ray cluster those actors run on (None: an embedded Ray, or ``$RAY_ADDRESS``).
        seed: seeds sampled entries and the generator that breaks rating ties.
        population: an initial [`metaeval.spiel.Population`][metaeval.spiel.Population] (kept with its ids).
        metagame: a meta-game built earlier for this population's lineage (e.g. kept
            in a checkpoint; strategy names ``"policy <id>"``): the next build copies
            its entries and evaluates only joints touching policies it lacks.
        log_dir: where an embedded Ray writes its logs.
        shard_timeout: seconds a policy may take to answer one call in a build before the
            build fails naming it; max_retries: resubmissions of a shard whose Ray actor was
            lost (see ``build_metagame``).
    """

    def __init__(self, game, mode: str = "auto", episodes: int = 1000, workers: int = 1,
                 address: str | None = None, seed: int = 0, population: spiel.Population | None = None,
                 metagame: MetaGame | None = None, log_dir=None, shard_timeout: float = SHARD_TIMEOUT,
                 max_retries: int = MAX_RETRIES):
        self.game = games.load(game)
        if isinstance(episodes, bool) or not isinstance(episodes, (int, np.integer)) or episodes < 2:
            raise MetaEvalError(f"episodes must be an int of at least 2 (for a standard error), got {episodes!r}")
        check_limits(max_retries, shard_timeout)
        self.mode = resolve_mode(self.game, mode)
        self._tabulation_unsaid = mode == "auto" and self.mode == "exact"
        self.episodes, self.workers, self.address = int(episodes), workers, address
        self.shard_timeout, self.max_retries = shard_timeout, max_retries
        self.seed = spiel.population.check_seed(seed)
        self.log_dir = log_dir
        self.rng = np.random.default_rng(self.seed)
        self._exact_evaluator = None  # for the CCE gap (exact mode); caches reach columns by id
        if self.mode == "exact":
            self._exact_evaluator = spiel.ExactEvaluator(self.game)
        num_players = self.game.num_players()
        self._policies: list[list] = [[] for _ in range(num_players)]
        self._ids: list[list[int]] = [[] for _ in range(num_players)]
        self._next_ids = [0] * num_players
        self._names: list[dict[int, str]] = [{} for _ in range(num_players)]
        self._population: spiel.Population | None = None  # cache of the current population
        self._metagame: MetaGame | None = None  # the last build (strategy names from ids)
        self._built: tuple | None = None  # the ids the last build was of
        self._gap_cache: tuple | None = None
        self._solutions: dict[tuple, np.ndarray] = {}  # meta_distribution results for the current ids
        if population is not None:
            self._adopt(population, metagame)
        elif metagame is not None:
            raise MetaEvalError("a meta-game can only be given with the population it was built from")

    def _adopt(self, population: spiel.Population, metagame: MetaGame | None) -> None:
        if population.game_string != str(self.game):
            raise MetaEvalError(f"the population is for {population.game_string}, the evaluator for {self.game}")
        for p in range(self.num_players):
            self._policies[p] = [self._stored(p, pi) for pi in population.policies[p]]
            self._ids[p] = list(population.ids[p])
        self._next_ids = list(population.next_ids)
        if metagame is not None:
            self._metagame, self._built = metagame, _ids_of(metagame)

    # -- the population ------------------------------------------------------------
    @property
    def num_players(self) -> int:
        return len(self._policies)

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(len(p) for p in self._policies)

    @property
    def ids(self) -> tuple[tuple[int, ...], ...]:
        return tuple(tuple(p) for p in self._ids)

    @property
    def population(self) -> spiel.Population:
        """The current population (every player needs at least one policy)."""
        empty = [p for p, k in enumerate(self.sizes) if k == 0]
        if empty:
            raise MetaEvalError(f"player(s) {empty} have no policy yet; add one per player first")
        if self._population is None:
            with identical_policies_warned():  # add warned already, by the policies' names
                self._population = spiel.Population(self.game, self._policies, self._ids, self._next_ids)
        return self._population

    def name(self, player: int, policy_id: int) -> str:
        """The name of a policy (``"policy <id>"`` unless one was given to [`add`][metaeval.training.evaluator.Evaluator.add]).

        Args:
            player: the policy's player.
            policy_id: its id.

        Returns:
            The name.
        """
        self._index(player, policy_id)
        return self._names[player].get(policy_id, f"policy {policy_id}")

    def add(self, player: int, policy, name: str | None = None) -> int:
        """Add an OpenSpiel policy (``TabularPolicy``, a ``policy.Policy`` subclass, a ``pyspiel``
        policy, a function wrapped as ``spiel.CallablePolicy(fn)``) for ``player``, as a snapshot
        taken now; returns its new id. A policy whose table equals one the player holds is
        named in an [`IdenticalPoliciesWarning`][metaeval.errors.IdenticalPoliciesWarning].

        Args:
            player: the player the policy plays.
            policy: the policy.
            name: its name in meta-games and tables (unique among the player's); default:
                ``"policy <id>"``.

        Returns:
            The policy's id.
        """
        self._check_player(player)
        stored = self._stored(player, policy)
        policy_id = self._next_ids[player]
        if name is not None:
            name = str(name)
            taken = {self.name(player, i) for i in self._ids[player]}
            if name in taken:
                raise MetaEvalError(f"player {player} already has a policy named {name!r}")
            default = re.fullmatch(r"policy (\d+)", name)
            if default and int(default[1]) != policy_id:
                raise MetaEvalError(f"{name!r} is the default name of policy id {default[1]}, not of the new "
                                    f"policy (id {policy_id}); choose another name")
            self._names[player][policy_id] = name
        self._policies[player].append(stored)
        self._ids[player].append(policy_id)
        self._next_ids[player] += 1
        self._changed()
        names = [self.name(player, i) for i in self._ids[player]]
        warn_identical(player, names, self._policies[player], {len(names) - 1}, stacklevel=3)
        return policy_id

    def remove(self, player: int, ids: Sequence[int]) -> None:
        """Remove the policies with these ids from ``player``'s population.

        Args:
            player: the player.
            ids: the ids of the policies to remove.
        """
        indices = sorted({self._index(player, i) for i in ids}, reverse=True)
        for index in indices:
            self._names[player].pop(self._ids[player][index], None)
            del self._policies[player][index], self._ids[player][index]
        self._changed()

    def replace(self, player: int, ids: Sequence[int], policies: Sequence) -> list[int]:
        """Put ``policies`` in the places of the policies with ``ids`` (same order), under
        fresh ids, which are returned; the population keeps its order otherwise.

        Args:
            player: the player.
            ids: the ids of the policies replaced.
            policies: the new policies, one per id.

        Returns:
            The new policies' ids.
        """
        ids, policies = list(ids), list(policies)
        if len(ids) != len(policies):
            raise MetaEvalError(f"replace: {len(ids)} ids but {len(policies)} policies")
        indices = [self._index(player, i) for i in ids]
        if len(set(indices)) != len(indices):
            raise MetaEvalError(f"replace: repeated id in {ids}")
        snapshots = [self._stored(player, pi) for pi in policies]
        new_ids = []
        for index, stored in zip(indices, snapshots):
            self._names[player].pop(self._ids[player][index], None)
            self._policies[player][index] = stored
            self._ids[player][index] = self._next_ids[player]
            new_ids.append(self._next_ids[player])
            self._next_ids[player] += 1
        self._changed()
        return new_ids

    def policy(self, player: int, policy_id: int):
        """The stored snapshot with this id (a read-only ``TabularPolicy`` in exact mode).

        Args:
            player: the policy's player.
            policy_id: its id.

        Returns:
            The snapshot.
        """
        return self._policies[player][self._index(player, policy_id)]

    # -- the meta-game and what is computed from it -------------------------------
    def metagame(self) -> MetaGame:
        """The meta-game of the current population, built incrementally from the last one.

        Returns:
            The meta-game; strategy names are the policies' names.
        """
        population = self.population
        if self._built != self._key():
            self._metagame = build_metagame(
                self.game, population, mode=self.mode, episodes=self.episodes, workers=self.workers,
                seed=self.seed, address=self.address, previous=self._metagame, log_dir=self.log_dir,
                shard_timeout=self.shard_timeout, max_retries=self.max_retries,
            )
            self._built = self._key()
        if not any(self._names):
            return self._metagame
        mg = self._metagame
        names = [[self.name(p, i) for i in ids] for p, ids in enumerate(self._ids)]
        return MetaGame(mg.payoffs, strategy_names=names, player_names=mg.player_names,
                        counts=mg.counts, stderr=mg.stderr)

    def rate(self, rater: str, **options) -> Rating:
        """Rate the current meta-game with any rater in [`metaeval.RATERS`][metaeval.ratings.RATERS].

        Args:
            rater: the rater's name.
            **options: as [`metaeval.rate`][metaeval.ratings.rate] takes them.

        Returns:
            The Rating of the current meta-game.
        """
        return rate(self.metagame(), rater, **options)

    def check_rater(self, rater: str, **options) -> None:
        """Refuse a rater (with its options) that cannot rate this game's meta-games, by
        rating the current one: a loop calls this before it writes anything.

        Args:
            rater: the rater's name.
            **options: its options.

        Raises:
            MetaEvalError: the rater cannot rate this game's meta-games; the message says why.
        """
        try:
            self.rate(rater, **options)
        except MetaEvalError as exc:
            raise MetaEvalError(f"rater {rater!r} cannot rate the meta-games of {self.game}: {exc}") from None

    def select(self, rater: str, k: int, rng: np.random.Generator | None = None, **options) -> list[list[int]]:
        """The ids of each player's ``k`` best-rated policies, best first (all when fewer);
        ties within ``TIE_DECIMALS`` are ordered by keys from ``rng`` (default: the evaluator's).

        Args:
            rater: the rater's name.
            k: how many policies to select per player.
            rng: the generator of the tie-break keys.
            **options: the rater's options.

        Returns:
            Per player, the selected ids.
        """
        k = _count("k", k)
        rating = self.rate(rater, **options)
        rng = self.rng if rng is None else rng
        chosen = []
        for p, ratings in enumerate(rating.ratings):
            order, _ = rank_order(-ratings, rng)
            chosen.append([self._ids[p][i] for i in order[:k]])
        return chosen

    def prune(self, rater: str, keep: int, rng: np.random.Generator | None = None,
              protect: Sequence[Sequence[int]] | None = None, **options) -> Pruned:
        """Remove each player's lowest-rated policies until it has at most ``keep``.

        Ratings equal to ``TIE_DECIMALS`` decimals are tied; ties are broken by keys
        drawn from ``rng`` (default: the evaluator's seeded generator), as in the loop.
        ``protect``: per player, ids removed only when more than ``keep`` of them remain,
        and then their lowest-rated (e.g. the support of the meta-distribution); the
        others go first, exactly their lowest-rated.

        Args:
            rater: the rater's name.
            keep: the most policies a player keeps.
            rng: the generator of the tie-break keys.
            protect: per player, the ids removed last.
            **options: the rater's options.

        Returns:
            What was removed, and why.
        """
        keep = _count("keep", keep)
        rating = self.rate(rater, **options)
        rng = self.rng if rng is None else rng
        protect = [[] for _ in range(self.num_players)] if protect is None else list(protect)
        if len(protect) != self.num_players:
            raise MetaEvalError(f"protect needs one list of ids per player ({self.num_players}), got {len(protect)}")
        protect = [{self._ids[p][self._index(p, i)] for i in ids} for p, ids in enumerate(protect)]
        removed, keys = [], []
        for p, ratings in enumerate(rating.ratings):
            if len(ratings) <= keep:
                removed.append([])
                keys.append([])
                continue
            protected = np.array([i in protect[p] for i in self._ids[p]])
            lowest, tie_keys = lowest_rated(ratings, len(ratings) - keep, rng, protected)
            removed.append([self._ids[p][i] for i in lowest])
            keys.append(tie_keys.tolist())
        names = [[self.name(p, i) for i in ids] for p, ids in enumerate(removed)]
        for p, ids in enumerate(removed):
            if ids:
                self.remove(p, ids)
        return Pruned(removed, names, keys, rating, [sorted(ids) for ids in protect])

    def meta_distribution(self, solver="mecce", **options) -> np.ndarray:
        """A joint distribution over the population (an array of the meta-game's shape):
        a name in [`metaeval.training.meta_solvers.SOLVERS`][metaeval.training.meta_solvers.SOLVERS] (``uniform``, ``nash``, ``alpharank``,
        ``mecce``, ``mgcce``, ``deviation``) or a callable ``solver(metagame, **options)``.

        Args:
            solver: the meta-solver.
            **options: its options.

        Returns:
            The joint distribution.
        """
        metagame = self.metagame()
        if callable(solver):
            return meta_solvers.solve(metagame, solver, **options)
        key = (self._key(), solver, json.dumps(options, sort_keys=True, default=repr))
        if key not in self._solutions:  # named solvers are deterministic: solve once per population
            self._solutions = {k: v for k, v in self._solutions.items() if k[0] == key[0]}
            self._solutions[key] = meta_solvers.solve(metagame, solver, **options)
            self._solutions[key].setflags(write=False)
        return self._solutions[key]

    def opponents(self, player: int, rule: str = "uniform", member: int | None = None, **options) -> np.ndarray:
        """Whom ``player``'s policy ``member`` (an id; None: the whole population) trains
        against: a distribution over the other players' joint profiles, an array of the
        meta-game's shape without ``player``'s axis (see [`metaeval.training.matchmaking`][metaeval.training.matchmaking]).

        - ``"uniform"``: every profile equally likely;
        - ``"pfsp"``: prioritised fictitious self-play, weight ``(1 - x)^exponent`` with ``x``
          the member's payoff against the profile rescaled from the game's utility range to
          [0, 1] (its win probability in a +1/-1 game); option ``exponent`` (default 2);
        - a meta-solver name (``"nash"``, ``"mecce"``, ``"deviation"``, ...): the conditional
          of [`meta_distribution`][metaeval.training.evaluator.Evaluator.meta_distribution] given that ``player`` plays ``member`` (its opponents'
          marginal when ``member`` is None or has no mass); options go to the solver.

        Args:
            player: the player who trains.
            rule: ``"uniform"``, ``"pfsp"`` or a meta-solver's name.
            member: the id of the policy that trains (None: the whole population).
            **options: the rule's options.

        Returns:
            The distribution over the other players' joint profiles.
        """
        self._check_player(player)
        index = None if member is None else self._index(player, member)
        metagame = self.metagame()
        if rule == "pfsp":
            utility_range = (self.game.min_utility(), self.game.max_utility())
            return matchmaking.pfsp(metagame, player, utility_range, index, **options)
        if rule == "uniform" and not options:
            return matchmaking.uniform(metagame, player, index)
        if rule in meta_solvers.SOLVERS:
            return matchmaking.conditional(metagame, player, self.meta_distribution(rule, **options), index)
        raise MetaEvalError(
            f"unknown matchmaking rule {rule!r}; choose pfsp or a meta-solver ({', '.join(meta_solvers.SOLVERS)})"
        )

    def gap(self, sigma) -> spiel.CCEGap:
        """The full-game CCE gap of ``sigma`` (maths, section 4), with each player's best response
        to the opponents' joint marginal of sigma (cached for the last sigma); on the Ray
        actors with ``workers > 1`` or an address, with the same result. Exact mode only.

        Args:
            sigma: a joint distribution over the population, of the meta-game's shape.

        Returns:
            The gap, its per-player terms and the best responses' values and actions.
        """
        exact = self._exact("the full-game CCE gap")
        population = self.population
        sigma = np.asarray(sigma, dtype=np.float64)
        key = (self._key(), sigma.shape, sigma.tobytes())
        if self._gap_cache is None or self._gap_cache[0] != key:
            self._gap_cache = (key, cce_gap(self.game, population, sigma, workers=self.workers, address=self.address,
                                            evaluator=exact, log_dir=self.log_dir, max_retries=self.max_retries,
                                            shard_timeout=self.shard_timeout))
        return self._gap_cache[1]

    def approximate_gap(self, sigma, learner="search", episodes: int = 100_000, evaluation_episodes: int = 2000,
                        rng: np.random.Generator | None = None) -> ApproximateGap:
        """An estimated lower bound on the full-game CCE gap of ``sigma``, for any game that can
        be simulated: each player's deviation found by ``learner`` (a name in
        [`metaeval.responses.RESPONDERS`][metaeval.responses.RESPONDERS], e.g. ``"search"``, which simulates the game
        against the known policies, or a responder such as [`metaeval.responses.PPO`][metaeval.responses.ppo.PPO])
        with ``episodes`` episodes, values from ``evaluation_episodes`` fresh episodes
        ([`metaeval.responses.gap.approximate_cce_gap`][metaeval.responses.gap.approximate_cce_gap]), on this evaluator's Ray workers
        when it has several. ``rng`` defaults to one seeded by the evaluator's seed.

        Args:
            sigma: a joint distribution over the population, of the meta-game's shape.
            learner: a responder or its name.
            episodes: each player's training episodes.
            evaluation_episodes: episodes of each value estimate.
            rng: the generator of the episodes.

        Returns:
            The estimate, with its standard error.
        """
        if rng is None:
            rng = np.random.default_rng(self.seed)
        return approximate_cce_gap(self.game, self.population.policies, sigma, learner, episodes,
                                   evaluation_episodes, rng, workers=self.workers, address=self.address)

    def best_response(self, player: int, sigma, rng: np.random.Generator) -> policy_lib.TabularPolicy:
        """A pure best response of ``player`` to the opponents' joint marginal of ``sigma``
        (read off the cached [`gap`][metaeval.training.evaluator.Evaluator.gap]): at every state one of the actions within
        ``spiel.gap.TIE_TOLERANCE`` of the best, drawn uniformly by ``rng``.

        Drawn, not the lowest: ties are common (at a state the opponents never reach every
        action ties), and the lowest would give every call the same response (a loop
        replacing several policies would add copies) and the same play wherever the
        value leaves it open. Tied within the tolerance, not by rounding, so a run does not
        depend on the build of the linear algebra (README, "Bit for bit").

        Args:
            player: the player who responds.
            sigma: a joint distribution over the population, of the meta-game's shape.
            rng: the generator that draws among tied actions.

        Returns:
            The best response, a deterministic ``TabularPolicy``.
        """
        self._check_player(player)
        exact = self._exact("an exact best response")
        if not isinstance(rng, np.random.Generator):
            raise MetaEvalError(f"best_response draws among tied actions with rng, a numpy Generator; got {rng!r}")
        choices = drawn_choices(self.gap(sigma).best_actions[player], rng)
        tree = exact.tree
        return tabular_policy(tree.players[player], pure_table(tree, player, choices))

    def openspiel_best_response(self, player: int, sigma) -> policy_lib.TabularPolicy:
        """The best response OpenSpiel's JPSRO would add for ``player`` against sigma
        ([`metaeval.spiel.openspiel_best_response`][metaeval.spiel.openspiel_best_response]).

        Args:
            player: the player who responds.
            sigma: a joint distribution over the population, of the meta-game's shape.

        Returns:
            The best response, a ``TabularPolicy``.
        """
        self._check_player(player)
        exact = self._exact("OpenSpiel's best response")
        return spiel.openspiel_best_response(self.game, self.population, sigma, player, evaluator=exact)

    @property
    def built_metagame(self) -> MetaGame | None:
        """The last meta-game built (of this or an earlier population), strategies named by
        policy id: what a checkpoint keeps so that a resumed loop builds incrementally."""
        return self._metagame

    @property
    def two_player_zero_sum(self) -> bool:
        """Whether the game is a 2-player zero-sum game (where NashConv is reported)."""
        return self.num_players == 2 and self.game.get_type().utility == pyspiel.GameType.Utility.ZERO_SUM

    def nash_conv(self) -> float:
        """NashConv of the meta-Nash mixture in the full game (2-player zero-sum games):
        sum over players of the best response's value against the other player's mixture
        minus the mixture's own value. OpenSpiel's ``exploitability`` is half of it.

        Returns:
            NashConv.
        """
        if not self.two_player_zero_sum:
            raise MetaEvalError(f"NashConv of the meta-Nash is defined here for 2-player zero-sum games, not {self.game}")
        self._exact("NashConv")
        # For a product distribution the CCE gap is exactly NashConv: each best response
        # faces the other player's mixture, and the floor at 0 never binds.
        return self.gap(self.meta_distribution("nash")).total

    def exploitability(self) -> float:
        """``nash_conv() / 2``: OpenSpiel's exploitability of the meta-Nash mixture.

        Returns:
            The exploitability.
        """
        return self.nash_conv() / self.num_players

    # -- persistence ----------------------------------------------------------------
    def save(self, directory) -> Path:
        """Write the population (tables, ids), names, settings, the last meta-game and the
        generator's state to ``directory``; [`load`][metaeval.training.evaluator.Evaluator.load] restores them exactly. The files
        become current when ``evaluator.json`` naming them is replaced (atomically).

        Args:
            directory: the directory to write (created if needed).

        Returns:
            The directory.
        """
        directory = Path(directory)
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise MetaEvalError(f"cannot write the evaluator to {directory}: {exc.strerror or exc}") from None
        population = self.population
        tag = f"{self._next_tag(directory):06d}"
        files = {"population": f"population-{tag}.npz"}
        population.save(directory / files["population"], tables=self.mode == "exact")
        if self._metagame is not None:
            files["metagame"] = f"metagame-{tag}.npz"
            self._metagame.save(directory / files["metagame"])
        state = {
            "format": FILE_FORMAT, "game": str(self.game), "mode": self.mode, "episodes": self.episodes,
            "workers": self.workers, "address": self.address, "shard_timeout": self.shard_timeout,
            "max_retries": self.max_retries, "seed": self.seed, "tag": int(tag),
            "names": [{str(i): n for i, n in names.items()} for names in self._names],
            "rng": self.rng.bit_generator.state, **files,
        }
        rundir.write_json(directory / STATE_FILE, state)
        for old in [*directory.glob("population-*.npz"), *directory.glob("metagame-*.npz")]:
            if old.name not in files.values():
                old.unlink()
        return directory

    @classmethod
    def load(cls, directory, workers: int | None = None, address: str | None = None,
             shard_timeout: float | None = None, max_retries: int | None = None) -> Evaluator:
        """An evaluator saved by [`save`][metaeval.training.evaluator.Evaluator.save] (optionally on other workers or cluster, with
        another shard timeout or retry count).

        Args:
            directory: a directory [`save`][metaeval.training.evaluator.Evaluator.save] wrote.
            workers: Ray actors for the builds (default: as saved).
            address: the Ray cluster (default: as saved).
            shard_timeout: seconds per policy call in a build (default: as saved).
            max_retries: resubmissions of a lost shard (default: as saved).

        Returns:
            The evaluator.
        """
        directory = Path(directory)
        path = directory / STATE_FILE
        if not path.exists():
            raise MetaEvalError(f"{directory} holds no saved evaluator (no {STATE_FILE})")
        state = rundir.read_json(path)
        if not isinstance(state, dict) or state.get("format") != FILE_FORMAT:
            raise MetaEvalError(f"{path} is not a saved evaluator (format {FILE_FORMAT})")
        try:
            population = spiel.Population.load(directory / state["population"])
            metagame = None
            if "metagame" in state:
                metagame = MetaGame.load(directory / state["metagame"])
            evaluator = cls(
                state["game"], mode=state["mode"], episodes=state["episodes"],
                workers=state["workers"] if workers is None else workers,
                address=state["address"] if address is None else address,
                seed=state["seed"], population=population, metagame=metagame,
                shard_timeout=state.get("shard_timeout", SHARD_TIMEOUT) if shard_timeout is None else shard_timeout,
                max_retries=state.get("max_retries", MAX_RETRIES) if max_retries is None else max_retries,
            )
            evaluator._names = [{int(i): n for i, n in names.items()} for names in state["names"]]
            evaluator.rng.bit_generator.state = state["rng"]
        except MetaEvalError:  # names the file at fault
            raise
        except (KeyError, TypeError, ValueError) as exc:
            raise DamagedFileError(f"{path} is damaged ({exc!r})") from None
        return evaluator

    @staticmethod
    def _next_tag(directory: Path) -> int:
        path = directory / STATE_FILE
        if not path.exists():
            return 0
        state = rundir.read_json(path)
        return int(state.get("tag", 0)) + 1 if isinstance(state, dict) else 0

    # -- helpers -------------------------------------------------------------------
    def _key(self) -> tuple[tuple[int, ...], ...]:
        return self.ids

    def _changed(self) -> None:
        self._population = None

    def _check_player(self, player) -> None:
        if isinstance(player, bool) or not isinstance(player, (int, np.integer)) or not 0 <= player < self.num_players:
            raise MetaEvalError(f"no player {player!r} in {self.game} ({self.num_players} players)")

    def _index(self, player: int, policy_id: int) -> int:
        self._check_player(player)
        try:
            if isinstance(policy_id, bool) or not isinstance(policy_id, (int, np.integer)):
                raise TypeError  # int() would take 1.5 for id 1
            return self._ids[player].index(int(policy_id))
        except (ValueError, TypeError):
            raise MetaEvalError(f"player {player} has no policy with id {policy_id!r} (ids {self._ids[player]})") from None

    def _exact(self, what: str) -> spiel.ExactEvaluator:
        """The exact evaluator, or (sampled mode) the refusal of ``what``, which needs the tree."""
        if self._exact_evaluator is None:
            raise tree_refusal(what)
        return self._exact_evaluator

    def _stored(self, player: int, policy):
        """What is kept of ``policy``: its read-only table (exact mode) or its snapshot (sampled)."""
        if not isinstance(policy, (policy_lib.Policy, pyspiel.Policy)):
            hint = "; wrap a function as spiel.CallablePolicy(fn)" if callable(policy) else ""
            raise MetaEvalError(
                f"player {player}: expected an OpenSpiel policy (policy.Policy or pyspiel.Policy), "
                f"got {type(policy).__name__}{hint}"
            )
        own_game = getattr(policy, "game", None)
        if own_game is not None and str(own_game) != str(self.game):
            raise MetaEvalError(f"the policy is for {own_game}, the evaluator for {self.game}")
        if self.mode == "sampled":
            return snapshot(policy)
        layout = self._exact_evaluator.tree.players[player]
        if (isinstance(policy, policy_lib.TabularPolicy) and policy.state_lookup is layout.template.state_lookup
                and not policy.action_probability_array.flags.writeable):
            return policy  # already one of ours: read-only, on this player's layout
        start = time.perf_counter()
        try:
            table = policy_table(layout, policy, player)
        except MetaEvalError:
            raise
        except Exception as exc:  # a policy asked about states of a game it does not know
            raise MetaEvalError(f"cannot read the policy for player {player} of {self.game}: {exc}") from None
        if self._tabulation_unsaid and not isinstance(policy, policy_lib.TabularPolicy):  # it was asked state by state
            self._tabulation_unsaid = False
            rundir.log.warning(
                f"metaeval: mode='auto' chose exact mode for {self.game}, which keeps each policy as a table: "
                f"player {player}'s {type(policy).__name__} was asked at its {len(layout.keys):,} information "
                f"states ({time.perf_counter() - start:.3g} s); mode='sampled' keeps the policy object instead")
        return tabular_policy(layout, table)


def _count(label: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise MetaEvalError(f"{label} must be a positive int, got {value!r}")
    return int(value)


def _ids_of(metagame: MetaGame) -> tuple[tuple[int, ...], ...]:
    """The policy ids along a built meta-game's axes, read from its ``"policy <id>"`` names."""
    try:
        return tuple(tuple(int(name.removeprefix("policy ")) for name in names) for names in metagame.strategy_names)
    except ValueError:
        raise MetaEvalError("the meta-game given was not built from a population (names are not 'policy <id>')") from None
