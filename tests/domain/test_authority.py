"""The authority value: who may change a claim, and an override that must say why."""

from __future__ import annotations

import pytest

from workq.domain.authority import Authority, as_authority


def test_a_holder_acts_only_on_its_own_claims() -> None:
    by = Authority.of({"run-a", "agent-1"}, fence=3)
    assert by.allows("run-a") and by.allows("agent-1")
    assert not by.allows("run-b") and not by.allows(None)
    assert by.fence == 3 and by.plan_runs == {"run-a", "agent-1"}  # plan mode: its own runs
    assert by.shown() == "agent-1, run-a"


def test_no_run_id_is_no_one() -> None:
    nobody = Authority.of(())
    assert not nobody.allows("run-a") and nobody.shown() == "no run id"


def test_an_override_acts_on_any_claim_and_names_its_reason() -> None:
    admin = Authority.overriding("workq release --force", fence=2)
    assert admin.allows("run-b") and admin.allows(None) and admin.fence == 2
    assert admin.override == "workq release --force" and admin.plan_runs == frozenset()
    with pytest.raises(ValueError, match="reason"):
        Authority.overriding("  ")


def test_run_ids_read_as_a_holders_authority() -> None:
    assert as_authority(["run-a"]) == Authority.of({"run-a"})
    built = Authority.of({"x"}, plan_runs=())
    assert as_authority(built) is built and built.plan_runs == frozenset()
