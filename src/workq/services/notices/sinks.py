"""Where notices go: sinks, a webhook (a URL a JSON body is POSTed to) or a local command
(the body on its stdin), each taking the notices named in its ``events``.

Every field is checked before anything is written, so a refused ``add`` changes nothing:
the name, the URL (and, unless told not to, that its host answers on its port), the command
(its program must be found), the events, and the signing secret's variable (it must be set
here, long enough; its value is never stored or shown: a sink keeps only its name).

A webhook URL is itself often a secret (a Slack or Mattermost incoming webhook lets anyone
who has it post), so a sink is shown with its URL cut to ``scheme://host/…``.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import SplitResult, urlsplit

from pydantic import BaseModel
from sqlalchemy import Connection, Row, delete, select

from workq.db.tables import notices, notify_sinks
from workq.domain import notices as notice_rules
from workq.errors import Conflict, InvalidInput, NotFound
from workq.services.handle import Queue, new_id

WEBHOOK = "webhook"
COMMAND = "command"
NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
SECRET_ENV = re.compile(r"[A-Z_][A-Z0-9_]{0,127}")
SECRET_MIN = 16  # characters of a signing secret, at least
URL_MAX = 2000
CHECK_SECONDS = 3.0  # how long `add` waits for a webhook's host to accept a connection
LIST_HINT = "see the sinks with: workq notify list"


class SinkInfo(BaseModel):
    """A sink as it is shown: a webhook's URL cut to its scheme and host."""

    name: str
    kind: str  # webhook | command
    target: str  # the URL, redacted, or the command line
    events: list[str]
    secret_env: str | None
    created_by: str | None
    created_at: datetime


@dataclass(frozen=True)
class Sink:
    """A stored sink as delivery reads it: the whole URL, or the argv."""

    id: str
    name: str
    kind: str
    url: str | None
    argv: tuple[str, ...]
    secret_env: str | None
    events: tuple[str, ...]


def add(
    q: Queue,
    name: str,
    *,
    url: str | None = None,
    command: str | None = None,
    events: str,
    secret_env: str | None = None,
    check: bool = True,
    actor: str | None = None,
) -> SinkInfo:
    """Add sink ``name``: a webhook (``url``) or a command (``command``, split as a shell
    would, run without one), taking the notices ``events`` names (``all``, or names joined
    by commas). A webhook signs its bodies with the secret in variable ``secret_env`` of the
    delivering process, if named. With ``check``, the URL's host must accept a connection.

    Raises:
        InvalidInput: a field is wrong (the message says which and why); nothing changed.
        Conflict: a sink of that name exists.
    """
    name = _name(name)
    if (url is None) == (command is None):
        raise InvalidInput(
            "a sink is a webhook or a command: give a URL or a command, one of them",
            hint="workq notify add NAME --url URL --events LIST (or --command CMD)",
            field="url",
        )
    chosen = _events(events)
    secret = _secret_env(secret_env, webhook=url is not None)
    with q.db.read() as conn:
        _free(conn, name)
    if url is not None:
        kind, target = WEBHOOK, _url(url)
        if check:
            reach(urlsplit(target))
    else:
        assert command is not None
        kind, target = COMMAND, json.dumps(_command(command))

    def write(conn: Connection) -> SinkInfo:
        _free(conn, name)
        now = q.now()
        row: dict[str, Any] = {
            "id": new_id(),
            "name": name,
            "kind": kind,
            "target": target,
            "secret_env": secret,
            "events": ",".join(chosen),
            "created_by": actor,
            "created_at": now,
        }
        conn.execute(notify_sinks.insert().values(**row))
        return _info(_sink(row), actor, now)

    return q.db.write(write)


def list_sinks(q: Queue) -> list[SinkInfo]:
    """Every sink, by name."""
    with q.db.read() as conn:
        rows = conn.execute(select(notify_sinks).order_by(notify_sinks.c.name)).all()
    return [_info(_sink(r._mapping), r.created_by, r.created_at) for r in rows]


def get(q: Queue, name: str) -> SinkInfo:
    """Sink ``name`` as it is shown, or NotFound."""
    with q.db.read() as conn:
        row = _row(conn, name)
    return _info(_sink(row._mapping), row.created_by, row.created_at)


def remove(q: Queue, name: str) -> int:
    """Remove sink ``name`` and its notices (delivered or not); how many notices went.

    Raises:
        NotFound: no such sink.
    """

    def write(conn: Connection) -> int:
        row = _row(conn, name)
        dropped = conn.execute(delete(notices).where(notices.c.sink_id == row.id)).rowcount
        conn.execute(delete(notify_sinks).where(notify_sinks.c.id == row.id))
        return int(dropped or 0)

    return q.db.write(write)


def stored(conn: Connection, sink_id: str) -> Sink | None:
    """The sink with this id, whole (for delivery), or None if it was removed."""
    row = conn.execute(select(notify_sinks).where(notify_sinks.c.id == sink_id)).first()
    return None if row is None else _sink(row._mapping)


def by_name(q: Queue, name: str) -> Sink:
    """Sink ``name`` whole (for a test delivery), or NotFound."""
    with q.db.read() as conn:
        return _sink(_row(conn, name)._mapping)


def redact(url: str) -> str:
    """``url`` cut to what may be shown: ``scheme://host[:port]/…`` (a path, a query or
    credentials can be the secret that lets anyone post)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return "(a URL that cannot be read)"
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    if port is not None:
        host += f":{port}"
    rest = "…" if parts.path not in ("", "/") or parts.query or parts.fragment else ""
    return f"{parts.scheme}://{host}/{rest}"


def reach(parts: SplitResult, timeout: float = CHECK_SECONDS) -> None:
    """Refuse a URL whose host does not accept a TCP connection on its port now."""
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except TimeoutError:
        _unreachable(host, port, f"no answer in {timeout:g} s")
    except OSError as exc:
        _unreachable(host, port, exc.strerror or str(exc))


def _unreachable(host: str, port: int, reason: str) -> None:
    raise InvalidInput(
        f"cannot reach {host}:{port}: {reason}",
        hint="check the URL, or add it with --no-check",
        field="url",
    )


# The checks of each field.


def _name(name: str) -> str:
    if not NAME.fullmatch(name):
        raise InvalidInput(
            f"{_shown(name)} is not a sink name",
            hint="a sink name is 1 to 64 of a-z, 0-9, '-' and '_', starting with a letter "
            "or digit (e.g. team-slack)",
            field="name",
        )
    return name


def _shown(text: str) -> str:
    return repr(text if len(text) <= 40 else text[:37] + "...")


def _events(text: str) -> list[str]:
    try:
        return notice_rules.names(text)
    except ValueError as exc:
        raise InvalidInput(
            str(exc), hint="--events all, or names joined by commas", field="events"
        ) from None


def _secret_env(name: str | None, *, webhook: bool) -> str | None:
    if name is None:
        return None
    if not webhook:
        raise InvalidInput(
            "a command sink is not signed: --secret-env is for webhooks",
            hint="leave out --secret-env",
            field="secret_env",
        )
    if not SECRET_ENV.fullmatch(name):
        raise InvalidInput(
            f"{_shown(name)} is not a variable name",
            hint="name the environment variable that holds the secret, such as "
            "WORKQ_WEBHOOK_SECRET (A-Z, 0-9, '_'), not the secret itself",
            field="secret_env",
        )
    value = os.environ.get(name)
    if value is None:
        raise InvalidInput(
            f"the variable {name} is not set here",
            hint=f"set {name} to the shared secret (16 characters or more) in this "
            "environment and in the one that delivers the notices (workq serve, workq "
            "notify run), then add the sink again",
            field="secret_env",
        )
    if len(value) < SECRET_MIN:
        raise InvalidInput(
            f"the secret in {name} is shorter than {SECRET_MIN} characters",
            hint="use a long random secret, e.g. from: openssl rand -hex 32",
            field="secret_env",
        )
    return name


def _free(conn: Connection, name: str) -> None:
    taken = conn.execute(select(notify_sinks.c.id).where(notify_sinks.c.name == name)).first()
    if taken is not None:
        raise Conflict(
            f"a sink named {name!r} exists",
            hint=f"choose another name, or remove it first: workq notify remove {name}",
            field="name",
        )


def _url(url: str) -> str:
    text = url.strip()
    bad = _url_fault(text)
    if bad is not None:
        raise InvalidInput(
            f"the URL {bad}",
            hint="give the whole URL of the webhook, e.g. https://hooks.slack.com/services/...",
            field="url",
        )
    return text


def _url_fault(text: str) -> str | None:
    """What is wrong with a webhook URL, in words (never its text: it may be a secret)."""
    if not text or len(text) > URL_MAX:
        return f"is empty or longer than {URL_MAX} characters"
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in text):
        return "holds spaces or control characters"
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018  (reading it checks it)
    except ValueError:
        return "cannot be read (a bad port or address)"
    if parts.scheme not in ("http", "https"):
        return f"must start with http:// or https://, not {parts.scheme or 'nothing'}"
    if not parts.hostname:
        return "names no host"
    if parts.username is not None or parts.password is not None:
        return "holds a user or password (user:password@host): use --secret-env to sign"
    return None


def _command(command: str) -> list[str]:
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise InvalidInput(
            f"the command cannot be split into words: {exc}",
            hint="quote it as a shell would, e.g. --command 'notify-send workq'",
            field="command",
        ) from None
    if not argv or not argv[0]:
        raise InvalidInput("the command is empty", hint="name a program", field="command")
    program = argv[0]
    if "/" in program:
        path = Path(program).expanduser()
        path = path if path.is_absolute() else (Path.cwd() / path).resolve()
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise InvalidInput(
                f"{program} is not an executable file",
                hint="give the path of a program (chmod +x a script), or a name on PATH",
                field="command",
            )
        argv[0] = str(path)  # delivery runs elsewhere: never relative to this directory
    elif shutil.which(program) is None:
        raise InvalidInput(
            f"program {program!r} not found on PATH",
            hint="install it, or give its full path",
            field="command",
        )
    return argv


# Rows to values.


def _row(conn: Connection, name: str) -> Row[Any]:
    row = conn.execute(select(notify_sinks).where(notify_sinks.c.name == name)).first()
    if row is None:
        raise NotFound(f"no sink named {name!r}", hint=LIST_HINT, field="name")
    return row


def _sink(data: Mapping[Any, Any]) -> Sink:
    target = str(data["target"])
    webhook = data["kind"] == WEBHOOK
    return Sink(
        id=str(data["id"]),
        name=str(data["name"]),
        kind=str(data["kind"]),
        url=target if webhook else None,
        argv=() if webhook else tuple(json.loads(target)),
        secret_env=data["secret_env"],
        events=tuple(e for e in str(data["events"]).split(",") if e),
    )


def _info(sink: Sink, created_by: str | None, created_at: datetime) -> SinkInfo:
    shown = redact(sink.url) if sink.url is not None else shlex.join(sink.argv)
    return SinkInfo(
        name=sink.name,
        kind=sink.kind,
        target=shown,
        events=list(sink.events),
        secret_env=sink.secret_env,
        created_by=created_by,
        created_at=created_at,
    )
