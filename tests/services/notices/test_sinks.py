"""Sinks: adding, listing, removing; every field checked before anything is written."""

from __future__ import annotations

import json
import os
import socket
import stat
import sys
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from tests.services.notices.receiver import SECRET, SECRET_VAR, receiver
from workq.db.tables import notify_sinks
from workq.domain.notices import names
from workq.errors import Conflict, InvalidInput, NotFound
from workq.services.handle import Queue
from workq.services.notices import sinks


def stored(q: Queue) -> list[dict[str, Any]]:
    with q.db.read() as conn:
        return [dict(r._mapping) for r in conn.execute(select(notify_sinks))]


def closed_port() -> int:
    """A port on 127.0.0.1 where nothing listens."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_webhook_is_added_listed_redacted_and_removed(
    queue: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SECRET_VAR, SECRET)
    with receiver() as r:
        added = sinks.add(
            queue, "team", url=r.url, events="blocked, stalled", secret_env=SECRET_VAR, actor="ann"
        )
    port = r.url.split(":")[2].split("/")[0]
    assert added.kind == "webhook"
    assert added.target == f"http://127.0.0.1:{port}/…"  # the path may be the secret
    assert added.events == ["stalled", "blocked"]  # the notices' own order
    assert added.secret_env == SECRET_VAR and added.created_by == "ann"
    [row] = stored(queue)
    assert row["target"] == r.url and row["events"] == "stalled,blocked"
    assert SECRET not in json.dumps(row, default=str)  # the secret's name, never its value
    assert sinks.list_sinks(queue) == [added]
    assert sinks.get(queue, "team") == added
    assert "secret-path" not in added.model_dump_json()
    assert sinks.remove(queue, "team") == 0
    assert stored(queue) == []
    with pytest.raises(NotFound):
        sinks.get(queue, "team")


def test_a_command_is_stored_as_its_argv(queue: Queue, tmp_path: Path) -> None:
    script = tmp_path / "tell.sh"
    script.write_text("#!/bin/sh\ncat >/dev/null\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    added = sinks.add(queue, "desk", command="./tell.sh 'two words' --flag", events="all")
    assert json.loads(stored(queue)[0]["target"]) == [str(script), "two words", "--flag"]
    assert added.target == f"{script} 'two words' --flag"
    assert added.events == names("all")
    found = sinks.add(queue, "py", command=f"{Path(sys.executable).name} -c pass", events="drained")
    assert found.kind == "command"


def test_redacted_urls() -> None:
    assert sinks.redact("https://hooks.slack.com/services/T0/B0/XYZ") == "https://hooks.slack.com/…"
    assert sinks.redact("https://example.org") == "https://example.org/"
    assert sinks.redact("http://[::1]:8080/x?token=1") == "http://[::1]:8080/…"
    assert sinks.redact("http://host/?key=1") == "http://host/…"


BAD_ADDS: list[tuple[str, dict[str, Any], str]] = [
    ("Team", {"url": "http://127.0.0.1:1/", "check": False}, "is not a sink name"),
    ("a" * 65, {"url": "http://127.0.0.1:1/", "check": False}, "is not a sink name"),
    ("x y", {"url": "http://127.0.0.1:1/", "check": False}, "is not a sink name"),
    ("ok", {}, "give a URL or a command"),
    ("ok", {"url": "http://h/", "command": "cat"}, "give a URL or a command"),
    ("ok", {"url": "ftp://h/", "check": False}, "must start with http:// or https://"),
    ("ok", {"url": "hooks.slack.com/x", "check": False}, "must start with http"),
    ("ok", {"url": "https:///path", "check": False}, "names no host"),
    ("ok", {"url": "https://u:p@h/x", "check": False}, "holds a user or password"),
    ("ok", {"url": "https://h:99999/", "check": False}, "cannot be read"),
    ("ok", {"url": "https://h/a b", "check": False}, "spaces"),
    ("ok", {"url": "http://127.0.0.1:{closed}/hook"}, "cannot reach 127.0.0.1:{closed}: "),
    ("ok", {"command": "no-such-program-here --x"}, "not found on PATH"),
    ("ok", {"command": "./missing.sh"}, "is not an executable file"),
    ("ok", {"command": "'unclosed"}, "cannot be split"),
    ("ok", {"command": "  "}, "the command is empty"),
    ("ok", {"command": "cat", "events": "blocked,nonsense"}, "unknown event 'nonsense'"),
    ("ok", {"command": "cat", "events": " , "}, "name at least one event"),
    ("ok", {"command": "cat", "secret_env": SECRET_VAR}, "a command sink is not signed"),
    ("ok", {"url": "http://h/", "check": False, "secret_env": "lower"}, "not a variable name"),
    ("ok", {"url": "http://h/", "check": False, "secret_env": "UNSET_VAR_X"}, "is not set here"),
    ("ok", {"url": "http://h/", "check": False, "secret_env": "SHORT_SECRET"}, "shorter than 16"),
]


@pytest.mark.parametrize(("name", "given", "said"), BAD_ADDS)
def test_bad_input_is_refused_in_one_line_and_changes_nothing(
    queue: Queue, monkeypatch: pytest.MonkeyPatch, name: str, given: dict[str, Any], said: str
) -> None:
    monkeypatch.setenv("SHORT_SECRET", "x" * 15)
    monkeypatch.delenv("UNSET_VAR_X", raising=False)
    monkeypatch.setenv(SECRET_VAR, SECRET)
    sinks.add(queue, "kept", command="cat", events="all")
    before = stored(queue)
    closed = closed_port()
    kwargs: dict[str, Any] = {"events": "all", **given}
    if "url" in kwargs:
        kwargs["url"] = kwargs["url"].replace("{closed}", str(closed))
    with pytest.raises(InvalidInput) as caught:
        sinks.add(queue, name, **kwargs)
    message = caught.value.message
    assert said.replace("{closed}", str(closed)) in message
    assert "\n" not in message and caught.value.hint
    assert "secret-path" not in message and "u:p" not in message  # a URL is never echoed
    assert stored(queue) == before


def test_an_unreachable_url_says_how_to_add_it_anyway(queue: Queue) -> None:
    port = closed_port()
    with pytest.raises(InvalidInput) as caught:
        sinks.add(queue, "x", url=f"http://127.0.0.1:{port}/h", events="all")
    assert caught.value.hint == "check the URL, or add it with --no-check"
    added = sinks.add(queue, "x", url=f"http://127.0.0.1:{port}/h", events="all", check=False)
    assert added.name == "x"


def test_a_taken_name_is_a_conflict(queue: Queue) -> None:
    sinks.add(queue, "one", command="cat", events="all")
    before = stored(queue)
    with pytest.raises(Conflict) as caught:
        sinks.add(queue, "one", url="http://127.0.0.1:1/", events="all", check=False)
    assert "workq notify remove one" in (caught.value.hint or "")
    assert stored(queue) == before


def test_removing_an_unknown_sink_is_not_found(queue: Queue) -> None:
    with pytest.raises(NotFound) as caught:
        sinks.remove(queue, "nobody")
    assert caught.value.hint == sinks.LIST_HINT


def test_a_program_that_is_not_executable_is_refused(queue: Queue, tmp_path: Path) -> None:
    script = tmp_path / "plain.sh"
    script.write_text("#!/bin/sh\n")
    os.chmod(script, 0o644)
    with pytest.raises(InvalidInput, match="not an executable file"):
        sinks.add(queue, "x", command=str(script), events="all")
    assert stored(queue) == []
