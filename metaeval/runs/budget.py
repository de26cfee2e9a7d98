"""The memory budget: work that grows with its input is estimated first and refused if too big.

Every allocation whose size grows with the input (tree enumeration, policy tables,
reach matrices, meta-game tensors, constraint matrices and LP models) calls
`check` with an estimate of its bytes before allocating. Over the budget, it
raises a [`MetaEvalError`][metaeval.errors.MetaEvalError] with the estimate and the limit instead of letting
the process grow until the machine swaps or the kernel kills it.

The budget is ``METAEVAL_MAX_MEMORY`` (bytes, or a number with K, M, G or T, powers
of 1024), set for one command by ``metaeval ... --max-memory 16G``; by default
`DEFAULT_MAX_MEMORY`. It bounds each allocation (one array, one model), not
the process as a whole.
"""

from __future__ import annotations

import os
import re

from metaeval.errors import MetaEvalError

VARIABLE = "METAEVAL_MAX_MEMORY"
DEFAULT_MAX_MEMORY = 4 << 30
"""4 GiB: a few times what the largest supported experiments need."""

FLOAT = 8
"""Bytes of one float64."""

RUN_BYTES = 1024
"""Bookkeeping of one run of a comparison or study before it starts (its config and
directory: about 640 bytes measured)."""

_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_size(text: str) -> int:
    """``"512M"`` -> 536870912; bytes, or a number with K, M, G or T (powers of 1024)."""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([KMGT]?)i?B?\s*", str(text), re.IGNORECASE)
    if not match or float(match[1]) <= 0:
        raise MetaEvalError(f"a memory size is a positive number of bytes, optionally with K, M, G or T; got {text!r}")
    return int(float(match[1]) * _UNITS[match[2].upper()])


def max_memory() -> int:
    """The budget in bytes: ``$METAEVAL_MAX_MEMORY`` if set, else `DEFAULT_MAX_MEMORY`."""
    text = os.environ.get(VARIABLE)
    if not text:
        return DEFAULT_MAX_MEMORY
    try:
        return parse_size(text)
    except MetaEvalError as exc:
        raise MetaEvalError(f"{VARIABLE}: {exc}") from None


def describe(nbytes: float) -> str:
    """``1.5 GiB``, ``179 GiB``, ``3.2e+12 TiB``."""
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= size:
            value = nbytes / size
            return f"{value:.3g} {unit}" if value < 1e6 else f"{value:.2g} {unit}"
    return f"{nbytes:.0f} B"


def check(nbytes: float, what: str, advice: str = "") -> None:
    """Refuse ``what`` (a description with its sizes) if ``nbytes`` exceed the budget."""
    limit = max_memory()
    if nbytes > limit:
        advice = f"{advice}; " if advice else ""
        raise MetaEvalError(
            f"{what} needs about {describe(nbytes)}, over the memory budget of {describe(limit)}; "
            f"{advice}raise the budget with --max-memory or {VARIABLE} if the machine has the memory"
        )


def check_joints(sizes, floats_per_joint: int, what: str, strategies: str = "policies") -> None:
    """Refuse ``floats_per_joint`` float64s for every joint of ``sizes`` strategies per player
    (``N`` for a payoff tensor, ``sum(sizes)`` for the CCE constraints over the joints);
    ``strategies`` names them in the message (policies, agents and tasks, ...)."""
    joints = 1
    for size in sizes:
        joints *= int(size)
    shape = " x ".join(str(int(k)) for k in sizes)
    check(FLOAT * joints * floats_per_joint, f"{what} over {shape} {strategies} ({joints:.3g} joints)",
          f"use fewer {strategies.split()[0]}")
