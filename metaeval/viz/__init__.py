"""Figures: population runs and ratings with their intervals."""
