"""When a training writes its checkpoint: at an epoch's end once `every_seconds` have passed since the last one.

A checkpoint (cdgt_keras.checkpoint) writes every weight and every optimizer's moments: on debtags' default
preset about 0.8 GB, 10 s on a 2-core VM where an epoch's steps take 11 s, so a checkpoint at every epoch's end
doubled a short run's time (bench/learner_notes.md, round 63). Checkpointing on a clock instead bounds what a kill
loses (the interval and one epoch) and costs long runs a few percent. TensorFlow's Estimator saved every 600 s by
default; `CHECKPOINT_EVERY_SECONDS`, the default of both roads (`cdgt train --checkpoint-every`, the TFX Trainer's
custom config `checkpoint_every`), is half that. 0 checkpoints at every epoch's end.

Without TensorFlow, so that the command line reads the default without loading it.

    >>> cadence = Cadence(every_seconds=250, start=0.0)  # epochs that end every 100 s
    >>> [cadence.due(now) for now in (100.0, 200.0, 300.0, 400.0, 500.0, 600.0)]
    [False, False, True, False, False, True]
"""

from __future__ import annotations

import math
import time

CHECKPOINT_EVERY_SECONDS = 300.0


class Cadence:
    """A clock that says, at each epoch's end, whether a checkpoint is due; a due checkpoint restarts it."""

    def __init__(self, every_seconds: float = CHECKPOINT_EVERY_SECONDS, start: float | None = None) -> None:
        if not (every_seconds >= 0 and math.isfinite(every_seconds)):
            raise ValueError(f"checkpoint every {every_seconds} seconds: must be 0 (every epoch) or a finite number "
                             "of seconds")
        self.every_seconds = float(every_seconds)
        self.last = time.monotonic() if start is None else start

    def restart(self, now: float | None = None) -> None:
        """Count the interval from `now` (default: the clock's now), as at the training's start."""
        self.last = time.monotonic() if now is None else now

    def due(self, now: float | None = None) -> bool:
        """Whether a checkpoint is due at `now` (default: the clock's now); if so, the interval counts from it.

            >>> Cadence(0, start=5.0).due(5.0)  # 0: every epoch
            True
        """
        now = time.monotonic() if now is None else now
        if now - self.last < self.every_seconds:
            return False
        self.last = now
        return True
