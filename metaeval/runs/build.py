"""The build a run is made with, recorded beside its results.

Results are reproducible bit for bit on one build; across builds their last bits can
move (another NumPy, or the same OpenBLAS running other kernels on another CPU), and a
check that finds a run differing from its record needs to know which of the two it is.
"""

from __future__ import annotations

import platform
import sys
from importlib import metadata

from threadpoolctl import threadpool_info

import metaeval

PACKAGES = ("numpy", "scipy", "open_spiel", "ortools", "highspy", "cvxpy", "ray", "pygambit", "pandas")


def build_versions() -> dict:
    """Python, metaeval and the numerical packages' versions, the machine, and each BLAS
    loaded with the kernels it runs (threadpoolctl's ``architecture``, e.g. Haswell)."""
    versions = {"python": sys.version.split()[0], "metaeval": metaeval.__version__}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    versions["machine"] = platform.machine()
    versions["blas"] = sorted(
        f"{lib['internal_api']} {lib['version']} {lib.get('architecture')}"
        for lib in threadpool_info() if lib["user_api"] == "blas"
    )
    return versions
