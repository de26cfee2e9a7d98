"""A policy's snapshot: a copy of its parameters, so that changing the policy object
later (a learner that keeps training it) cannot change what was evaluated.

- a ``TabularPolicy``: its probability array is copied (its lookup tables are shared);
- a ``pyspiel`` tabular policy: its table is copied (``policy_table()``, by information
  state, without enumerating the game), kept in `PyspielTable`;
- a plain Python function (e.g. the ``fn`` of a [`CallablePolicy`][metaeval.spiel.CallablePolicy]):
  a new function over deep copies of its closure's variables; the module globals it reads
  are shared (Python cannot copy them), so keep its parameters in its closure, in its
  defaults or in an object;
- any other object: ``copy.deepcopy``, with OpenSpiel's ``_random_state`` (the generator
  of ``Policy.sample_action``, which metaeval never calls) seeded: ``policy.Policy`` makes
  it unseeded, so identical runs would otherwise save policies that differ in it.

An object that cannot be copied (a ``pyspiel`` policy without a table, one holding a lock
or an open file) is refused with a one-line ``MetaEvalError`` naming it.
"""

from __future__ import annotations

import copy
import types

import numpy as np
import pyspiel
from open_spiel.python import policy as policy_lib

from metaeval.errors import MetaEvalError

SAMPLING_SEED = 0
"""The seed of a snapshot's ``_random_state`` (OpenSpiel's generator for ``sample_action``)."""


class PyspielTable(policy_lib.Policy):
    """A copy of a ``pyspiel`` tabular policy, answering through ``pyspiel.TabularPolicy``
    (rebuilt from the table where it is unpickled, e.g. on a Ray actor)."""

    def __init__(self, table: dict):
        super().__init__(None, None)
        self.table = table
        self._policy = pyspiel.TabularPolicy(table)

    def action_probabilities(self, state, player_id=None):
        return self._policy.action_probabilities(state)

    def __getstate__(self):
        return {"table": self.table, "game": None, "player_ids": None}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._policy = pyspiel.TabularPolicy(self.table)


def snapshot(policy):
    """A copy of ``policy`` that nothing done to ``policy`` later can change."""
    if isinstance(policy, policy_lib.TabularPolicy):
        if not policy.action_probability_array.flags.writeable:
            return policy  # read-only already (metaeval's own tables)
        return policy.__copy__(copy_action_probability_array=True)
    if isinstance(policy, pyspiel.Policy):
        try:
            return PyspielTable(policy.policy_table())
        except (AttributeError, TypeError, RuntimeError):
            raise MetaEvalError(
                f"cannot snapshot the pyspiel policy {type(policy).__name__}: only pyspiel tabular policies can be "
                "copied; wrap it in a Python policy (e.g. spiel.CallablePolicy) whose parameters can be"
            ) from None
    try:
        copied = copy.deepcopy(policy, {id(f): _function_copy(f) for f in _functions(policy)})
    except Exception as exc:  # deepcopy fails in many types (locks, files, C extensions)
        raise MetaEvalError(
            f"cannot snapshot the policy {type(policy).__name__} (copy.deepcopy failed: {exc}); make it copyable "
            "(e.g. define __deepcopy__) so that what is evaluated cannot change after it is added"
        ) from None
    if isinstance(getattr(copied, "_random_state", None), np.random.RandomState):
        copied._random_state = np.random.RandomState(SAMPLING_SEED)
    return copied


def _functions(policy) -> list[types.FunctionType]:
    """The plain functions among the policy itself and its attributes."""
    candidates = [policy, *getattr(policy, "__dict__", {}).values()]
    return [f for f in candidates if isinstance(f, types.FunctionType)]


def _function_copy(function: types.FunctionType) -> types.FunctionType:
    """``function`` over deep copies of its closure and defaults (``deepcopy`` shares functions)."""
    closure = None
    if function.__closure__ is not None:
        closure = tuple(types.CellType(copy.deepcopy(cell.cell_contents)) for cell in function.__closure__)
    result = types.FunctionType(function.__code__, function.__globals__, function.__name__,
                                copy.deepcopy(function.__defaults__), closure)
    result.__kwdefaults__ = copy.deepcopy(function.__kwdefaults__)
    result.__dict__.update(function.__dict__)
    return result
