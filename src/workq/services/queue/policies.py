"""Reading and setting the queue's policies (domain/policies.py names them): a repository's
own value wins for its issues, then the queue-wide one, then the default."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Connection, delete, select

from workq.db import dialect
from workq.db.tables import policies, repositories
from workq.domain import policies as rules
from workq.errors import InvalidInput, NotFound
from workq.services.handle import Queue

QUEUE = ""  # the scope of a queue-wide value


@dataclass(frozen=True)
class Setting:
    name: str
    value: str
    scope: str  # "default", "queue" or "repository NAME"
    help: str


def _check_name(name: str) -> rules.Policy:
    found = rules.POLICIES.get(name)
    if found is None:
        raise InvalidInput(
            f"no policy {name!r}",
            hint="the policies are " + ", ".join(rules.POLICIES),
            field="name",
        )
    return found


def _check_repository(conn: Connection, repository: str | None) -> str:
    if repository is None:
        return QUEUE
    found = conn.execute(
        select(repositories.c.name).where(repositories.c.name == repository)
    ).first()
    if found is None:
        raise NotFound(
            f"repository {repository!r} is not registered",
            hint="see the registered ones with: workq repo list",
        )
    return repository


def value(conn: Connection, name: str, repository: str | None = None) -> str:
    """Policy ``name`` as it holds for an issue of ``repository`` (None: in none)."""
    scopes = [QUEUE] if repository is None else [repository, QUEUE]
    found = {
        r.scope: r.value
        for r in conn.execute(
            select(policies.c.scope, policies.c.value).where(
                policies.c.name == name, policies.c.scope.in_(scopes)
            )
        )
    }
    for scope in scopes:
        if scope in found:
            return str(found[scope])
    return rules.POLICIES[name].default


def seconds(conn: Connection, name: str, repository: str | None = None) -> int:
    """A duration policy in seconds (0: off)."""
    return rules.duration(value(conn, name, repository))


def count(conn: Connection, name: str, repository: str | None = None) -> int:
    return int(value(conn, name, repository))


def settle(
    q: Queue, name: str, given: str, *, repository: str | None = None, actor: str | None = None
) -> Setting:
    """Set policy ``name`` to ``given`` queue-wide, or for ``repository``.

    Raises:
        InvalidInput: no such policy, or a value it does not take (nothing changed).
        NotFound: no such repository.
    """
    policy = _check_name(name)
    try:
        stored = rules.normal(name, given)
    except ValueError:
        raise InvalidInput(
            f"{name}={given!r} is not valid",
            hint=f"{name} takes {rules.accepts(name)}",
            field="value",
        ) from None

    def write(conn: Connection) -> str:
        scope = _check_repository(conn, repository)
        stmt = dialect.insert_for(q.db.dialect)(policies).values(
            scope=scope, name=name, value=stored, set_by=actor, set_at=q.now()
        )
        conn.execute(
            stmt.on_conflict_do_update(
                index_elements=[policies.c.scope, policies.c.name],
                set_={"value": stored, "set_by": actor, "set_at": q.now()},
            )
        )
        return scope

    scope = q.db.write(write)
    return Setting(name, stored, _scope_name(scope), policy.help)


def unset(q: Queue, name: str, *, repository: str | None = None) -> Setting:
    """Drop the queue-wide (or ``repository``'s) value of ``name``; what holds now."""
    _check_name(name)

    def write(conn: Connection) -> None:
        scope = _check_repository(conn, repository)
        conn.execute(delete(policies).where(policies.c.scope == scope, policies.c.name == name))

    q.db.write(write)
    return shown(q, repository)[name]


def shown(q: Queue, repository: str | None = None) -> dict[str, Setting]:
    """Every policy as it holds (for ``repository``, if given), and where its value is from."""
    with q.db.read() as conn:
        scope = _check_repository(conn, repository)
        rows = conn.execute(
            select(policies.c.scope, policies.c.name, policies.c.value).where(
                policies.c.scope.in_({QUEUE, scope})
            )
        ).all()
    stored = {(r.scope, r.name): r.value for r in rows}
    out: dict[str, Setting] = {}
    for name, policy in rules.POLICIES.items():
        for where in dict.fromkeys([scope, QUEUE]):
            if (where, name) in stored:
                out[name] = Setting(name, stored[(where, name)], _scope_name(where), policy.help)
                break
        else:
            out[name] = Setting(name, policy.default, "default", policy.help)
    return out


def _scope_name(scope: str) -> str:
    return "queue" if scope == QUEUE else f"repository {scope}"
