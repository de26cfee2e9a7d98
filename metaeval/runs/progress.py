"""Progress of metaeval's long pieces of work, on stderr: the population loops, meta-game
builds, CCE gaps, bootstraps, learners and searches.

The loops, meta-game builds, CCE gaps and bootstraps take ``progress``; learners, searches
and the episodes of an approximate gap follow the work they run in (or `asked`):

- ``True`` (what the ``metaeval`` command asks for, unless ``--quiet``): a bar on a
  terminal; when stderr is not a terminal (a log, CI, a pipe), plain lines instead: one
  per iteration of a loop, and for any other piece of work that runs longer than
  ``FIRST_LINE`` seconds, a line then and every ``LINE_EVERY`` seconds after (done of
  total; the rate and time left once a hundredth is done).
- ``None``, the default: as the work it runs inside was asked (a loop's builds, gaps and
  learners follow the loop; the command's work follows the command); outside any, a bar
  when stderr is a terminal and nothing otherwise, so metaeval used as a library in a
  script, a test or a service writes nothing unless asked.
- ``False``: nothing, from this work or the work inside it.
- A meta-game build and a CCE gap also take a callable ``progress(done, total)``,
  called instead as the work gets done.

Progress only reports: it reads a clock and writes to stderr, and never changes a result.
"""

from __future__ import annotations

import contextvars
import numbers
import sys
import time

#: Seconds of work before its first line (stderr not a terminal), and between two lines.
FIRST_LINE = 3.0
LINE_EVERY = 30.0

#: The clock the rates and the lines' times are read from (a test may replace it).
clock = time.monotonic

_asked: contextvars.ContextVar[bool | None] = contextvars.ContextVar("metaeval_progress", default=None)


class Progress:
    """Progress of ``done`` of ``total`` units of work; use it as a context manager.

    Inside the ``with`` block, work whose ``progress`` is None follows this one's setting.

    Args:
        total: units of work in all.
        desc: what runs (``"meta-game"``, ``"kuhn_3p jpsro mgcce seed 0"``).
        unit: ``"episode"``, ``"entry"``, ``"it"``, ``"step"``, ...
        progress: True, None, False or a callable (module docstring).
        done: units already done (a resumed run).
        each: a line at every `advance` (a loop's iterations) rather than timed lines.
    """

    def __init__(self, total: int, desc: str, unit: str = "it", progress=None, done: int = 0,
                 each: bool = False):
        # a total that is no count shows nothing: the work itself refuses it in one line
        self.total = int(total) if isinstance(total, numbers.Integral) else 0
        self.desc, self.unit, self.done, self.each = desc, unit, int(done), each
        self._callback = progress if callable(progress) else None
        self.asked = False if self._callback else _asked.get() if progress is None else bool(progress)
        self._bar, self._lines, self._token = None, False, None
        if self.asked is not False and self.total > self.done:
            if sys.stderr.isatty():
                self._bar = _bar(self)
            else:
                self._lines = self.asked is True
        self._started, self._initial = clock(), self.done
        self._next_line = self._started + FIRST_LINE

    def advance(self, count: int = 1, **values) -> None:
        """``count`` more units done (0: none, but the time to say so may have come);
        ``values`` (floats to 3 digits) are shown beside a loop's count, but for those
        that are None (a sampled run's CCE gap)."""
        self.done += count
        if self._callback is not None:
            if count:
                self._callback(self.done, self.total)
        elif self._bar is not None:
            if values:
                self._bar.set_postfix(_shown(values), refresh=False)
            self._bar.update(count)
        elif self._lines and self.each:
            fields = "".join(f", {k} {v}" for k, v in _shown(values).items())
            print(f"{self.desc}: {self.unit} {self.done}/{self.total}{fields}", file=sys.stderr, flush=True)
        elif self._lines and clock() >= self._next_line:
            print(self.line(), file=sys.stderr, flush=True)
            self._next_line = clock() + LINE_EVERY

    def line(self) -> str:
        """``meta-game: 1,523/64,000 episodes (2%), 25 episodes/s, about 42 min left``; before
        a hundredth is done (episodes played in lock-step end together), the time so far."""
        elapsed = clock() - self._started
        units = _plural(self.unit)
        text = f"{self.desc}: {self.done:,}/{self.total:,} {units}"
        if elapsed <= 0 or (self.done - self._initial) * 100 < self.total - self._initial:
            return f"{text}, {_duration(elapsed)} so far"
        rate = (self.done - self._initial) / elapsed
        shown_rate = f"{rate:,.0f}" if rate >= 10 else f"{rate:.2g}"
        left = _duration((self.total - self.done) / rate)
        return f"{text} ({self.done / self.total:.0%}), {shown_rate} {units}/s, about {left} left"

    def write(self, message: str) -> None:
        """A message on stderr that does not break the bar."""
        if self._bar is not None:
            self._bar.write(message, file=sys.stderr)
        else:
            print(message, file=sys.stderr, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self) -> Progress:
        if self.asked is not None:
            self._token = _asked.set(self.asked)
        return self

    def __exit__(self, *exc) -> None:
        if self._token is not None:
            _asked.reset(self._token)
            self._token = None
        self.close()


def asked(progress: bool | None) -> Progress:
    """A context in which work whose ``progress`` is None follows ``progress`` (the command's
    setting for all its work; None changes nothing). It shows nothing itself."""
    return Progress(0, "", progress=progress)


def _bar(progress: Progress):
    from tqdm.auto import tqdm  # only when a bar is drawn

    # a loop's bar drawn at every iteration (mininterval 0): iterations are slow, and the last one must show
    return tqdm(total=progress.total, initial=progress.done, desc=progress.desc, unit=progress.unit, leave=False,
                file=sys.stderr, mininterval=0 if progress.each else 0.1)


def _shown(values: dict) -> dict:
    return {k: f"{v:.3g}" if isinstance(v, float) else str(v) for k, v in values.items() if v is not None}


def _plural(unit: str) -> str:
    return unit[:-1] + "ies" if unit.endswith("y") else unit if unit in ("it", "s") else unit + "s"


def _duration(seconds: float) -> str:
    """``45 s``, ``12 min``, ``3 h 5 min``."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    minutes = round(seconds / 60)
    return f"{minutes} min" if minutes < 90 else f"{minutes // 60} h {minutes % 60} min"
