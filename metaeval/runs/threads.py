"""One BLAS thread around code made of many small matrix products, where threads cost more than they give."""

from __future__ import annotations

import sys

from threadpoolctl import ThreadpoolController

_cache: dict = {}


def one_blas_thread():
    """A context manager limiting every loaded BLAS to one thread, as
    ``threadpoolctl.threadpool_limits(1, user_api="blas")`` does, without its cost per call:
    that scans the process's shared libraries each time (about 10 ms, a third of a small
    population loop's iteration). The scan here is redone only when modules have been
    imported since the last one, which is when a new BLAS can have been loaded.

    Returns:
        The context manager.
    """
    if _cache.get("modules") != len(sys.modules):
        _cache["controller"], _cache["modules"] = ThreadpoolController(), len(sys.modules)
    return _cache["controller"].limit(limits=1, user_api="blas")
