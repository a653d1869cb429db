"""The ways workq writes a moment (domain/dates.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from hypothesis import given
from hypothesis import strategies as st

from workq.domain import dates

MOMENT = datetime(2026, 11, 27, 18, 6, 7, tzinfo=UTC)
FRACTION = MOMENT.replace(microsecond=250000)
EAST = timezone(timedelta(hours=2))


def test_each_purpose_has_its_form() -> None:
    assert dates.stamp(MOMENT) == "2026-11-27 18:06:07Z"
    assert dates.iso(MOMENT) == "2026-11-27T18:06:07+00:00"
    assert dates.iso(FRACTION) == "2026-11-27T18:06:07.250000+00:00"
    assert dates.iso_z(FRACTION) == "2026-11-27T18:06:07Z"
    assert dates.day(MOMENT) == "2026-11-27"


def test_a_naive_moment_is_utc() -> None:
    naive = MOMENT.replace(tzinfo=None)
    assert dates.utc(naive) == MOMENT
    assert dates.utc(naive).tzinfo is UTC
    for form in (dates.stamp, dates.iso, dates.iso_z, dates.day):
        assert form(naive) == form(MOMENT)


def test_an_aware_moment_is_shown_in_utc() -> None:
    elsewhere = MOMENT.astimezone(EAST)
    assert elsewhere.hour == 20
    assert dates.stamp(elsewhere) == "2026-11-27 18:06:07Z"
    assert dates.iso(elsewhere) == "2026-11-27T18:06:07+00:00"
    assert dates.iso_z(elsewhere) == "2026-11-27T18:06:07Z"
    assert dates.day(MOMENT.replace(hour=23).astimezone(EAST)) == "2026-11-27"


def test_iso_is_what_isoformat_writes_for_a_utc_moment() -> None:
    assert dates.iso(FRACTION) == FRACTION.isoformat()
    assert datetime.fromisoformat(dates.iso(FRACTION)) == FRACTION


@given(
    st.datetimes(
        min_value=datetime(1970, 1, 1),
        max_value=datetime(2200, 1, 1),
        timezones=st.sampled_from([UTC, EAST]),
    )
)
def test_every_form_names_the_same_utc_moment(moment: datetime) -> None:
    in_utc = moment.astimezone(UTC)
    assert datetime.fromisoformat(dates.iso(moment)) == moment
    assert datetime.strptime(dates.stamp(moment), "%Y-%m-%d %H:%M:%SZ").replace(
        tzinfo=UTC
    ) == in_utc.replace(microsecond=0)
    assert dates.iso_z(moment) == dates.stamp(moment).replace(" ", "T")
    assert dates.stamp(moment).startswith(dates.day(moment) + " ")
