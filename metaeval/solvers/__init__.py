"""Solver plumbing with no OpenSpiel in it: LPs, Markov chains, equilibria and their gaps,
MECCE/MGCCE, constraint reduction and columns, social-choice methods."""
