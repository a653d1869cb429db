"""Quality gates the server runs on an issue's checkout, and the evidence they leave: the
one name the faces and the merge steps import, over three modules.

- gate_table.py: which gates are in effect. What decides a merge belongs to the owner: the
  table committed on the repository's default branch (``workq.toml [gates]``, else
  ``pyproject.toml [tool.workq.gates]``, else the server's preset), never the branch under
  test's own; a branch's change to it takes effect once merged. ``init`` writes a starter
  table.
- gate_runs.py: running them (the holder's act, asked of the door before they run and again
  in the transaction that stores them) and storing each run (``gate_runs``, event
  ``gates_run``). A gate's environment is an allow-list that never carries a token, a
  database URL or a ``WORKQ_*`` setting (services/coding/commands.py, domain/gates.py).
- gate_evidence.py: what the stored runs show; ``require_passed``, what the tests gate
  (``advance_workflow``) and the merge steps ask (``merge_gate``).
"""

from __future__ import annotations

from workq.services.coding.gate_evidence import (
    MergeCandidate,
    check_work,
    evidence,
    merge_gate,
    require_passed,
)
from workq.services.coding.gate_runs import EVENT_KIND, checkout_for, held_issue, locate, run
from workq.services.coding.gate_table import (
    EVIDENCE,
    HOW_TO_ADD,
    NONE,
    TRUST,
    Configuration,
    in_effect,
    init,
    owner,
    pending,
    proposed,
    settings,
    unconfigured,
)

__all__ = [
    "EVENT_KIND",
    "EVIDENCE",
    "HOW_TO_ADD",
    "NONE",
    "TRUST",
    "Configuration",
    "MergeCandidate",
    "check_work",
    "checkout_for",
    "evidence",
    "held_issue",
    "in_effect",
    "init",
    "locate",
    "merge_gate",
    "owner",
    "pending",
    "proposed",
    "require_passed",
    "run",
    "settings",
    "unconfigured",
]
