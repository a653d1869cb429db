"""Commands that run until stopped (``workq sync github --watch``, ``workq notify run``):
their log on stderr, and Ctrl-C or SIGTERM as a request to stop."""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


def log_to_stderr(*names: str) -> None:
    """Show the INFO log of the loggers ``names`` on stderr (once per logger)."""
    for name in names:
        logger = logging.getLogger(name)
        if not logger.handlers:
            handler = logging.StreamHandler()
            handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
            logger.addHandler(handler)
            logger.setLevel(logging.INFO)


@contextmanager
def stop_on_signals(stop: threading.Event) -> Iterator[None]:
    """Set ``stop`` on SIGTERM or Ctrl-C while the block runs."""

    def handler(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    except KeyboardInterrupt:
        stop.set()
    finally:
        signal.signal(signal.SIGTERM, previous)
