"""One conversion of datetimes to and from the database, on both paths: SQLAlchemy's
(``UTCDateTime``) and the hot path's prepared statements (``Prepared``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import Column, Integer, MetaData, Table, bindparam, create_engine, insert, select

from workq.db.prepared import Prepared
from workq.db.times import UTCDateTime, from_sqlite, to_sqlite

zones = st.builds(
    timezone, st.timedeltas(min_value=timedelta(hours=-23), max_value=timedelta(hours=23))
)
moments = st.datetimes(
    min_value=datetime(1000, 1, 2), max_value=datetime(9999, 12, 30), timezones=zones
)

meta = MetaData()
stamps = Table("stamps", meta, Column("id", Integer, primary_key=True), Column("at", UTCDateTime))
_by_prepared = Prepared(select(stamps.c.at).where(stamps.c.id == bindparam("id")))
_insert_prepared = Prepared(insert(stamps).values(id=bindparam("id"), at=bindparam("at")))


@given(moments)
def test_sqlite_text_round_trips_and_sorts_as_time(moment: datetime) -> None:
    stored = to_sqlite(moment)
    assert from_sqlite(stored) == moment
    assert from_sqlite(stored).tzinfo is UTC
    later = to_sqlite(moment + timedelta(microseconds=1))
    assert stored < later


def test_a_naive_datetime_is_refused() -> None:
    with pytest.raises(ValueError, match="naive"):
        to_sqlite(datetime(2026, 1, 1))


@settings(max_examples=60, deadline=None)
@given(moments)
def test_both_paths_store_and_read_the_same(
    tmp_path_factory: pytest.TempPathFactory, moment: datetime
) -> None:
    path: Path = tmp_path_factory.mktemp("times") / "t.db"
    engine = create_engine(f"sqlite:///{path}")
    meta.create_all(engine)
    try:
        with engine.begin() as conn:
            conn.execute(insert(stamps).values(id=1, at=moment))  # through UTCDateTime
            _insert_prepared.count(conn, {"id": 2, "at": moment})  # through Prepared
            stored = [r[0] for r in conn.exec_driver_sql("SELECT at FROM stamps ORDER BY id")]
            assert stored[0] == stored[1] == to_sqlite(moment)
            for row_id in (1, 2):
                by_core = conn.execute(select(stamps.c.at).where(stamps.c.id == row_id)).scalar()
                by_prepared = _by_prepared.rows(conn, {"id": row_id})[0].at
                assert by_core == by_prepared == moment
                assert by_core is not None and by_core.tzinfo is UTC
    finally:
        engine.dispose()
