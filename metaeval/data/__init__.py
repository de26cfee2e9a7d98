"""Adapters from evaluation data (score tables, judgements, rankings) to MetaGames and
preference profiles (maths, section 6)."""

from metaeval.data.games import agent_vs_agent_vs_task, agent_vs_task, king_of_the_hill
from metaeval.data.profiles import Profile
from metaeval.data.tables import (
    complete, from_long, load_table, normalise, read_long, read_scores, source_line,
)

__all__ = [
    "Profile", "agent_vs_agent_vs_task", "agent_vs_task", "complete", "from_long",
    "king_of_the_hill", "load_table", "normalise", "read_long", "read_scores", "source_line",
]
