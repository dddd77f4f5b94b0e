"""Call a function every few seconds from a daemon thread while a block runs (a heartbeat, a memory sampler).

Example:
    >>> ticks = []
    >>> with every(0.01, lambda: ticks.append(1), "ticker"):
    ...     import time; time.sleep(0.1)
    >>> len(ticks) > 2
    True
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator


@contextlib.contextmanager
def every(seconds: float, action: Callable[[], None], name: str) -> Iterator[None]:
    """`action()` every `seconds` (first after one period) in a daemon thread named `name`, until the block ends;
    the thread is stopped and joined on the way out, also when the block raises."""
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(seconds):
            action()

    thread = threading.Thread(target=loop, name=name, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
