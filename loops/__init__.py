"""Population loops: evolve (and later PSRO, PBT)."""
