"""Benchmarks against reference implementations; run as `python -m bench.NAME`."""
