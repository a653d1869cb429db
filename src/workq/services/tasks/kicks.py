"""How a process tells its own waker (waker.py) that it made a task: an idle waker then
looks at once instead of at its next round (a task made by another process is seen
within ``waker.IDLE_SECONDS``; its own process's waker has it at once)."""

from __future__ import annotations

import threading

_KICK = threading.Condition()
_kicks = 0


def kick() -> None:
    global _kicks
    with _KICK:
        _kicks += 1
        _KICK.notify_all()


def count() -> int:
    with _KICK:
        return _kicks


def wait_past(seen: int, timeout: float) -> bool:
    """Sleep until a kick after ``seen`` or ``timeout`` seconds; whether one came."""
    with _KICK:
        return _KICK.wait_for(lambda: _kicks != seen, max(0.0, timeout))
