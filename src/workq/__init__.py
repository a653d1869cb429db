"""workq: a local, offline-first work queue for autonomous coding agents."""

__version__ = "0.1.0"
