"""TensorBoard event files of a run's records (``--tensorboard DIR``).

Every number in a record becomes a scalar at the record's iteration, under the record's
own key, nested keys and list positions joined by ``/`` (``cce_gap``, ``seconds/total``,
``ratings/0/3``); text, missing values and booleans are left out. A resumed run purges
the events at or past the iteration it resumes from (TensorBoard's restart marker), so
the recomputed records replace them rather than doubling them.
"""

from __future__ import annotations

import numbers
import time
from pathlib import Path

from metaeval.errors import MetaEvalError


def scalars(record, prefix: str = "") -> dict[str, float]:
    """The numbers of ``record`` by flat key (see the module docstring).

    Args:
        record: a record (nested dicts and lists of numbers, text, None).
        prefix: the key of ``record`` itself ("" at the top).

    Returns:
        Every number in ``record`` (as a float) by its flat key.
    """
    if isinstance(record, dict):
        items = record.items()
    elif isinstance(record, (list, tuple)):
        items = enumerate(record)
    elif isinstance(record, numbers.Real) and not isinstance(record, bool):
        return {prefix: float(record)}
    else:
        return {}
    flat = {}
    for key, value in items:
        flat.update(scalars(value, f"{prefix}/{key}" if prefix else str(key)))
    return flat


def summary_writer():
    """tensorboardX's writer class, checked for before a run does any work.

    Returns:
        ``tensorboardX.SummaryWriter``.

    Raises:
        MetaEvalError: tensorboardX is not installed (the message says how to install it).
    """
    try:
        from tensorboardX import SummaryWriter
    except ImportError:
        raise MetaEvalError("--tensorboard needs tensorboardX: pip install 'metaeval[tensorboard]'") from None
    return SummaryWriter


class EventLog:
    """Event files in ``path`` of the records of one session of a run.

    Args:
        path: the TensorBoard log directory of the run.
    """

    def __init__(self, path: Path | str):
        self.path = Path(path)
        self._writer_class = summary_writer()  # fails before the run does any work
        self._writer = None

    def write(self, record: dict, step: int) -> None:
        """Log ``record``'s numbers at ``step`` and flush them; the session's first step
        purges any events at or past it that an earlier session left.

        Args:
            record: the record, as logged in ``iterations.jsonl``.
            step: its iteration.
        """
        if self._writer is None:
            # File names begin with the second the file was opened; the nanosecond suffix keeps
            # two sessions within one second in separate files, in the order TensorBoard reads.
            self._writer = self._writer_class(str(self.path), purge_step=step, flush_secs=3600,
                                              filename_suffix=f".{time.time_ns():020d}")
        for key, value in scalars(record).items():
            self._writer.add_scalar(key, value, global_step=step)
        self._writer.flush()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
