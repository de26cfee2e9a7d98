"""Episodes in lock-step in which one player learns: what the neural learners step.

    episodes = TrainingEpisodes(game, player, opponents, budget=5000, num_envs=32, rng=rng)
    while episodes.running():
        observations, legal, live = episodes.observe()      # [B, D], [B, A], [B]
        rewards, done = episodes.act(actions)                # actions [B] (ignored where not live)

``num_envs`` episodes run at once. Between two decisions of the learner, each episode
advances on its own: chance outcomes are drawn, and every opponent decision is answered by
the policy of the opponent profile drawn for that episode (from [`Opponents`][metaeval.responses.opponents.Opponents]), each
policy asked once per step for all the episodes where it acts
([`metaeval.spiel.batched.as_batched`][metaeval.spiel.as_batched]). At a simultaneous node the learner's action and
its opponents' are applied together. A finished episode is replaced by a new one, with a new
opponent profile, until ``budget`` episodes have started; then its slot stops (``live``
false). ``rewards`` are what the learner received since its previous decision (OpenSpiel's
``state.rewards()``, summed); where ``done``, the row's next observation is the first of a
new episode and the learner must not bootstrap through it.

Nothing walks the game tree. All randomness (opponent profiles, chance, opponents' actions)
comes from ``rng``, so training is reproducible from its seed for a given ``num_envs``.
"""

from __future__ import annotations

import numpy as np

from metaeval.errors import MetaEvalError
from metaeval.runs.threads import one_blas_thread
from metaeval.spiel.batched import DecisionBatch, TensorReader, as_batched, observation_size
from metaeval.spiel.lockstep import chance_step, decide
from metaeval.responses.opponents import Opponents


class OpponentPolicies:
    """The opponents' policies, answering in batches: each profile's policy of a player is
    asked once for all the states where that profile plays."""

    def __init__(self, game, opponents: Opponents):
        self.game, self.opponents = game, opponents
        self.reader = TensorReader(game)
        self._answers: dict[tuple[int, int], object] = {}

    def _answer(self, profile: int, player: int):
        key = (profile, player)
        if key not in self._answers:
            self._answers[key] = as_batched(self.opponents.profiles[profile][player], self.game, player)
        return self._answers[key]

    def decide(self, player: int, states: list, profiles, rng: np.random.Generator | None = None,
               uniforms: np.ndarray | None = None) -> np.ndarray:
        """Actions of ``player`` at ``states`` (``profiles[i]``: the profile playing at
        ``states[i]``), drawn with ``rng``'s uniforms one profile at a time, or with the
        given ``uniforms[i]`` (one per state)."""
        chosen = np.zeros(len(states), dtype=np.int64)
        by_profile: dict[int, list[int]] = {}
        for row, profile in enumerate(profiles):
            by_profile.setdefault(int(profile), []).append(row)
        for profile, rows in by_profile.items():
            batch = DecisionBatch(self.game, player, [states[r] for r in rows], self.reader)
            u = rng.random(len(rows)) if uniforms is None else np.asarray(uniforms)[rows]
            chosen[rows] = decide(self._answer(profile, player), batch, u)
        return chosen


def play_to_decisions(player: int, histories: list, decide, uniform, on_end) -> list:
    """Play ``histories`` (each with a ``state``) on to a decision of ``player``, in lock-step.

    Chance outcomes are drawn with ``uniform(history)``; the opponents' actions come from
    ``decide(mover, group)``, one call per mover for every history where it acts; a history
    that ends is passed to ``on_end(history, player's return)`` when it ends.

    Args:
        player: the responder.
        histories: the histories to advance.
        decide: ``(mover, histories) -> actions``, the opponents' answers.
        uniform: ``history -> float`` in [0, 1), the draw of its next chance outcome.
        on_end: called with each history that ends and ``player``'s return.

    Returns:
        The histories at a decision of ``player`` (or a simultaneous node), in the order reached.
    """
    deciding, pending = [], histories
    with one_blas_thread():  # the opponents' many small matrix products, as in TrainingEpisodes
        while pending:
            turns: dict[int, list] = {}
            for history in pending:
                state = history.state
                while state.is_chance_node():
                    chance_step(state, uniform(history))
                if state.is_terminal():
                    on_end(history, state.returns()[player])
                elif state.is_simultaneous_node() or state.current_player() == player:
                    deciding.append(history)
                else:
                    turns.setdefault(state.current_player(), []).append(history)
            pending = []
            for mover, group in turns.items():
                for history, action in zip(group, decide(mover, group).tolist()):
                    history.state.apply_action(action)
                pending.extend(group)
    return deciding


class TrainingEpisodes:
    """``num_envs`` episodes of ``game`` in which ``player`` learns against ``opponents``."""

    def __init__(self, game, player: int, opponents: Opponents, budget: int, num_envs: int,
                 rng: np.random.Generator, advance=None):
        if not 0 <= player < game.num_players():
            raise MetaEvalError(f"player must be in 0..{game.num_players() - 1}, got {player}")
        for name, value in (("budget", budget), ("num_envs", num_envs)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise MetaEvalError(f"{name} must be a positive int, got {value!r}")
        for profile in opponents.profiles:
            for q, policy in enumerate(profile):
                if q != player and isinstance(policy, np.ndarray):
                    raise MetaEvalError("neural learners train against policy objects, not policy tables; "
                                        "pass OpenSpiel policies (e.g. spiel.tabular_policy(table))")
        self.game, self.player, self.opponents, self.rng = game, player, opponents, rng
        self._tell = advance  # told how many episodes each step ended (progress)
        self.budget, self.started = int(budget), 0
        self.returns: list[float] = []  # the learner's return of every finished episode, in order
        self.finished_slots: list[int] = []  # the slot each of those episodes was played in
        self._policies = OpponentPolicies(game, opponents)
        self._states: list = [None] * num_envs
        self._profile = np.zeros(num_envs, dtype=np.int64)
        self._gathered = np.zeros(num_envs)  # rewards since the learner's last decision
        self._final = np.zeros(num_envs)  # those of the last transition of a finished episode
        self._episode_return = np.zeros(num_envs)
        self.live = np.zeros(num_envs, dtype=bool)
        for slot in range(num_envs):
            self._start(slot)
        self._advance(np.flatnonzero(self.live))

    # -- the learner's side ----------------------------------------------------------
    def running(self) -> bool:
        """Whether any episode is still being played."""
        return bool(self.live.any())

    def decisions(self):
        """The learner's pending decisions as a `DecisionBatch` of the live rows, and
        the live mask ``[B]``."""
        live = self.live.copy()
        states = [self._states[slot] for slot in np.flatnonzero(live)]
        return DecisionBatch(self.game, self.player, states, self._policies.reader), live

    def observe(self):
        """The learner's pending decisions: observations ``[B, D]``, legal masks ``[B, A]``
        and which rows are live (rows not live hold zeros)."""
        batch, live = self.decisions()
        observations = np.zeros((len(live), observation_size(self.game)), dtype=np.float32)
        legal = np.zeros((len(live), self.game.num_distinct_actions()), dtype=bool)
        if live.any():
            observations[live], legal[live] = batch.observations, batch.legal
        return observations, legal, live

    def act(self, actions):
        """Apply the learner's ``actions [B]`` in the live rows and play on to its next
        decisions. Returns ``rewards [B]`` since the decision and ``done [B]``."""
        actions = np.asarray(actions)
        rows = np.flatnonzero(self.live)
        simultaneous = [s for s in rows if self._states[s].is_simultaneous_node()]
        joint = self._opponent_actions(simultaneous) if simultaneous else {}
        for slot in rows:
            state = self._states[slot]
            if slot in joint:
                joint[slot][self.player] = int(actions[slot])
                state.apply_actions(joint[slot])
            else:
                state.apply_action(int(actions[slot]))
            self._collect(slot)
        done = self._advance(rows)
        rewards = np.where(done, self._final, self._gathered)
        self._gathered[~done] = 0.0  # where done, it holds what the new episode gave before its first decision
        return rewards, done

    # -- the episodes' side ----------------------------------------------------------
    def _start(self, slot: int) -> None:
        if self.started >= self.budget:
            self.live[slot] = False
            return
        self.started += 1
        self._states[slot] = self.game.new_initial_state()
        self._profile[slot] = self.rng.choice(len(self.opponents.probabilities), p=self.opponents.probabilities)
        self._episode_return[slot] = 0.0
        self.live[slot] = True

    def _collect(self, slot: int) -> None:
        reward = self._states[slot].rewards()[self.player]
        self._gathered[slot] += reward
        self._episode_return[slot] += reward

    def _decide(self, player: int, slots) -> dict[int, int]:
        """Actions of opponent ``player`` in ``slots``, each policy asked once for its slots."""
        actions = self._policies.decide(player, [self._states[s] for s in slots], self._profile[slots], self.rng)
        return dict(zip(slots, actions.tolist()))

    def _opponent_actions(self, slots) -> dict[int, list[int]]:
        joint = {slot: [0] * self.game.num_players() for slot in slots}
        with one_blas_thread():  # as in _advance
            for q in range(self.game.num_players()):
                if q != self.player:
                    for slot, action in self._decide(q, slots).items():
                        joint[slot][q] = action
        return joint

    def _advance(self, rows) -> np.ndarray:
        """Play ``rows`` on to the learner's next decision; a finished episode is recorded,
        marked done and replaced. Returns ``done [B]``."""
        done = np.zeros(len(self._states), dtype=bool)
        pending, ended = list(rows), len(self.returns)
        with one_blas_thread():  # the opponents' many small matrix products: BLAS threads cost more than they give
            while pending:
                turns: dict[int, list[int]] = {}
                for slot in pending:
                    state = self._states[slot]
                    while state.is_chance_node():
                        chance_step(state, self.rng.random())
                        self._collect(slot)
                    if state.is_terminal():
                        done[slot] = True
                        self._final[slot], self._gathered[slot] = self._gathered[slot], 0.0
                        self.returns.append(float(self._episode_return[slot]))
                        self.finished_slots.append(slot)
                        self._start(slot)
                        if self.live[slot]:
                            turns.setdefault(-1, []).append(slot)  # the new episode plays on
                    elif not state.is_simultaneous_node() and state.current_player() != self.player:
                        turns.setdefault(state.current_player(), []).append(slot)
                pending = turns.pop(-1, [])
                for player, slots in turns.items():
                    for slot, action in self._decide(player, slots).items():
                        self._states[slot].apply_action(action)
                        self._collect(slot)
                    pending.extend(slots)
        if self._tell is not None:
            self._tell(len(self.returns) - ended)
        return done
