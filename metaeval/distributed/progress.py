"""Progress of a build (counted in meta-game entries) or of a CCE gap (in terminals)."""

from __future__ import annotations

from tqdm.auto import tqdm


class Progress:
    """A tqdm bar over entries, or a callback.

    Args:
        progress: None shows a bar on a terminal only (quiet in CI and logs), True
            or False force it on or off, and a callable ``progress(done, total)``
            is called instead of a bar after each finished shard.
        total: entries to evaluate.
        desc, unit: the bar's label and unit.
    """

    def __init__(self, progress, total: int, desc: str = "meta-game", unit: str = "entry"):
        self.done, self.total = 0, total
        self._callback = progress if callable(progress) else None
        disable = True if self._callback or total == 0 else None if progress is None else not progress
        self._bar = tqdm(total=total, unit=unit, desc=desc, disable=disable, leave=False)

    def advance(self, entries: int) -> None:
        self.done += entries
        self._bar.update(entries)
        if self._callback is not None:
            self._callback(self.done, self.total)

    def close(self) -> None:
        self._bar.close()
