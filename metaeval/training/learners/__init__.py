"""The responders of [`metaeval.responses`][metaeval.responses], importable from here too.

    LEARNERS["search"]()        # any responder by name, as metaeval.responses.RESPONDERS
"""

from metaeval.responses import DQN, PPO, Exact, Opponents, QLearning, Search
from metaeval.responses import RESPONDERS as LEARNERS

__all__ = ["DQN", "Exact", "LEARNERS", "Opponents", "PPO", "QLearning", "Search"]
