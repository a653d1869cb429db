"""The policies' values (domain/policies.py) and the notice names (domain/notices.py)."""

from __future__ import annotations

import pytest

from workq.domain import notices, policies


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90), ("45m", 2700), ("2h", 7200), ("1d", 86400), ("120", 120), (" OFF ", 0), ("0", 0)],
)
def test_durations(text: str, seconds: int) -> None:
    assert policies.duration(text) == seconds


@pytest.mark.parametrize("text", ["", "m", "10x", "-5m", "1.5h", "5 minutes", "1e3"])
def test_not_durations(text: str) -> None:
    with pytest.raises(ValueError, match="a duration such as"):
        policies.duration(text)


def test_stored_forms_and_bounds() -> None:
    assert policies.normal("stall_after", "90m") == "90m"
    assert policies.normal("stall_after", "3600") == "1h"
    assert policies.normal("stall_after", "off") == "off"
    assert policies.normal("stall_policy", " Release ") == "release"
    assert policies.normal("max_landing_rounds", "07") == "7"
    for name, bad in [
        ("stall_after", "400d"),
        ("stall_policy", "pause"),
        ("max_landing_rounds", "0"),
        ("gate_failures", "many"),
    ]:
        with pytest.raises(ValueError):
            policies.normal(name, bad)
    with pytest.raises(KeyError):
        policies.normal("nope", "1")
    for name, policy in policies.POLICIES.items():  # every default is its own stored form
        assert policies.normal(name, policy.default) == policy.default


def test_notice_names() -> None:
    assert notices.names("blocked, stalled stalled") == ["stalled", "blocked"]
    assert notices.names("all") == list(notices.NOTICES)
    with pytest.raises(ValueError, match="unknown event 'stall'; the events are stalled"):
        notices.names("stall")
    with pytest.raises(ValueError, match="at least one"):
        notices.names(" , ")
    # Each raising kind belongs to one notice.
    kinds = [k for n in notices.NOTICES.values() for k in n.kinds]
    assert len(kinds) == len(set(kinds)) == len(notices.BY_KIND)
