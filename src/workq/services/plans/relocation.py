"""Moving a database's plan files into its own plans folder.

Earlier releases wrote plan files under ``plans/`` of the folder the client started the
server in, so two databases used from one folder shared (and mixed up) their plans. A plan
row names its file by absolute path, so those plans keep working where they are; this moves
them home. A file is copied, never moved or overwritten: the old one may be another
database's too (the second database "kept" the first one's file), and a file already at
the new place is left alone, its plan then named as kept where it was.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from sqlalchemy import Connection, select, update

from workq.db.tables import plans
from workq.services.handle import Queue
from workq.services.plans import plan_files


class Relocated(NamedTuple):
    slug: str
    old: str
    new: str | None  # None: left where it was
    why: str  # "copied", "already there", "a different file is there", "missing"


def relocate(q: Queue, folder: Path) -> list[Relocated]:
    """Copy the file of every plan outside ``folder`` into it, and point the plan at the
    copy; what happened to each. Files are copied outside any transaction; each plan's row
    changes only if it still names the old file."""
    with q.db.read() as conn:
        rows = list(conn.execute(select(plans.c.id, plans.c.slug, plans.c.path)))
    home = folder.expanduser().resolve()
    done: list[Relocated] = []
    moves: dict[str, tuple[str, str]] = {}
    for row in rows:
        old = Path(row.path)
        if old.parent == home:
            continue
        text = plan_files.read(old)
        if text is None:
            done.append(Relocated(row.slug, row.path, None, "missing"))
            continue
        target, made = plan_files.create(home, row.slug, text)
        if not made and plan_files.read(target) != text:
            done.append(Relocated(row.slug, row.path, None, "a different file is there"))
            continue
        moves[row.id] = (row.path, str(target))
        done.append(
            Relocated(row.slug, row.path, str(target), "copied" if made else "already there")
        )

    def work(conn: Connection) -> None:
        for plan_id, (old_path, new_path) in moves.items():
            conn.execute(
                update(plans)
                .where(plans.c.id == plan_id, plans.c.path == old_path)
                .values(path=new_path)
            )

    if moves:
        q.db.write(work)
    return done
