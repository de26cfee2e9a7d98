"""The OpenSpiel side: policies, populations, exact and sampled meta-games, full-game CCE gap."""
