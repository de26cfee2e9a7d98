"""Per-iteration progress of a population loop, on stderr.

A tqdm bar with the latest values (the CCE gap, ...) when stderr is a terminal, one line
per iteration when it is not (logs, CI, pipes), nothing when quiet.
"""

from __future__ import annotations

import sys

from tqdm.auto import tqdm


class LoopProgress:
    """Progress of ``done`` of ``total`` iterations.

    Args:
        done: iterations already done (a resumed run).
        total: iterations in all.
        desc: what runs (``"kuhn_3p jpsro mgcce seed 0"``).
        unit: ``"it"``, ``"step"``, ``"run"``.
        progress: None or True: a bar on a terminal, else a line per iteration;
            False: nothing.
    """

    def __init__(self, done: int, total: int, desc: str, unit: str = "it", progress: bool | None = None):
        self.done, self.total, self.desc, self.unit = done, total, desc, unit
        self.show = progress is not False
        self._bar = None
        if self.show and sys.stderr.isatty():
            # every iteration drawn (mininterval 0): iterations are slow, and the last one must show
            self._bar = tqdm(total=total, initial=done, desc=desc, unit=unit, leave=False, file=sys.stderr,
                             mininterval=0)

    def advance(self, **values) -> None:
        """One more iteration done; ``values`` (floats formatted to 3 digits) shown beside it,
        but for those that are None (a sampled run's CCE gap)."""
        self.done += 1
        shown = {k: f"{v:.3g}" if isinstance(v, float) else str(v) for k, v in values.items() if v is not None}
        if self._bar is not None:
            self._bar.set_postfix(shown, refresh=False)
            self._bar.update()
        elif self.show:
            fields = "".join(f", {k} {v}" for k, v in shown.items())
            print(f"{self.desc}: {self.unit} {self.done}/{self.total}{fields}", file=sys.stderr, flush=True)

    def write(self, message: str) -> None:
        """A message on stderr that does not break the bar."""
        tqdm.write(message, file=sys.stderr)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()

    def __enter__(self) -> LoopProgress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
