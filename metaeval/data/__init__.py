"""Adapters from evaluation data (score tables, battles) to MetaGames (SPEC 6)."""
