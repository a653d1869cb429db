"""A stateful stand-in for the GitHub REST API, for tests. It never talks to the internet.

In-process::

    with FakeGitHub() as gh:              # listens on 127.0.0.1, port chosen by the OS
        gh.url                            # base URL to hand to the client ("http://127.0.0.1:PORT")
        gh.token                          # a token it accepts
        gh.inject_fault("POST", "/repos/*/*/issues", kind="error", status=502, when="after")

As a process (so that tests can kill -9 workers, or the fake itself)::

    python -m tests.github_fake.server --port 0     # first line of stdout is the base URL

and drive it over HTTP under ``/_control/<operation>`` (POST, JSON keyword arguments), most
easily through :class:`RemoteFakeGitHub` or :class:`FakeGitHubProcess`, which offer the same
control methods as :class:`FakeGitHub` (they share :class:`ControlAPI`).

What it serves (GitHub's shapes, a subset of the fields): ``GET /user``, ``GET /rate_limit``,
``GET /repos/{o}/{r}``, issues (list with filters, ``Link`` pagination, weak ETag and 304;
create; get; patch), issue labels (GET/POST/PUT/DELETE), repository labels (422
``already_exists`` on duplicates, case-insensitive), comments, and pull requests
(``tests/github_fake/pulls.py``: create, get, the diff media type, reviews and their
comments on the diff, check runs with their output, ``GET /check-runs/{id}/annotations``,
combined commit statuses, ``PUT /pulls/{n}/merge`` (200; 405 not mergeable or a merge
conflict; 409 when ``sha`` is not the head; 422 for an unknown ``merge_method``), ``GET
/pulls/{n}/merge`` (204 merged, else 404) and ``PUT /pulls/{n}/update-branch`` (202; 422 when
``expected_head_sha`` is not the head or on a conflict)). With a bare git repository set by
``set_git_dir`` (the remote tests push to), merges and branch updates are real commits there,
head and base shas follow its branches and ``mergeable_state`` is computed; the control
operation ``protect_branch`` adds branch protection (required checks, up to date) and a
``pre-receive`` hook refusing pushes to the branch. Every API response carries
``x-ratelimit-*`` headers. 401 without a valid ``Authorization: Bearer|token <token>``; 404
for unknown repositories and routes; 410 for deleted issues and 301 for transferred ones.

Faults (``inject_fault``) apply to the next ``count`` requests matching a method and a path
pattern (segments separated by ``/``; ``*`` matches within one segment, ``**`` any number of
segments). Kinds:

- ``error``: answer ``status`` (default 500; a 502 comes as an HTML page, like GitHub's);
  ``when="before"`` leaves the state unchanged, ``when="after"`` applies the change first.
- ``timeout``: hold the request for ``delay`` seconds (longer than the client's timeout), or
  until ``clear_faults``, then drop the connection without an answer; before or after applying.
- ``disconnect``: drop the connection without an answer; before or after applying.
- ``rate_limit``: the primary limit: 403 (or ``status=429``), ``x-ratelimit-remaining: 0``
  and ``x-ratelimit-reset`` ``reset_in`` seconds ahead. Never applied.
- ``secondary_rate_limit``: 403 (or 429) "You have exceeded a secondary rate limit", with
  ``retry-after`` when ``retry_after`` is given. Never applied.

``set_write_budget(limit, window)`` makes writes beyond ``limit`` per ``window`` seconds fail
with a secondary rate limit (and a ``retry-after``), as GitHub does for content creation.
``advance_clock(seconds)`` moves the fake's clock (timestamps, rate-limit windows, budgets).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import fnmatch
import hashlib
import json
import math
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, ParamSpec, Self, TypeVar
from urllib.parse import parse_qs, quote, unquote, urlencode, urlsplit

from tests.github_fake.pulls import (
    ANNOTATION_LEVELS,
    CHECK_CONCLUSIONS,
    CHECK_STATUSES,
    DIFF_MEDIA_TYPE,
    MERGE_METHODS,
    MERGEABLE_STATES,
    PULL_OPS,
    REVIEW_STATES,
    STATUS_STATES,
    GitError,
    Protection,
    PullsControl,
    PullState,
    RepoPulls,
    Text,
    check_outcomes,
    checks_verdict,
    combined_state,
    commit_tree,
    fake_sha,
    git_branches,
    git_diff,
    is_ancestor,
    land,
    merge_tree,
    update_ref,
    write_protection_hook,
)

DEFAULT_TOKEN = "ghp_fake0000000000000000000000000000000000"
DEFAULT_LOGIN = "workq-bot"
DEFAULT_REPO = "acme/widgets"
HTML_BASE = "https://github.com"
DOCS = "https://docs.github.com/rest"
DEFAULT_RATE_LIMIT = 5000
RATE_WINDOW_SECONDS = 3600
SECONDARY_MESSAGE = (
    "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. "
    "If you reach out to GitHub Support for help, please include the request ID {rid}."
)
PRIMARY_MESSAGE = (
    "API rate limit exceeded for user ID {uid}. If you reach out to GitHub Support for help, "
    "please include the request ID {rid}."
)
FAULT_KINDS = ("error", "timeout", "disconnect", "rate_limit", "secondary_rate_limit")
WRITE_METHODS = frozenset({"POST", "PATCH", "PUT", "DELETE"})
STATE_REASONS = ("completed", "not_planned", "reopened", "duplicate")
PROJECT_ROOT = Path(__file__).resolve().parents[2]
_P = ParamSpec("_P")
_T = TypeVar("_T")


# --------------------------------------------------------------------------------------------
# Records shared by the in-process fake and its remote control


@dataclass
class LoggedRequest:
    """One API request the fake received (control-plane requests are not logged)."""

    seq: int
    method: str
    path: str  # as sent, percent-encoding kept, without the query and any path prefix
    query: dict[str, list[str]]
    body: Any  # parsed JSON, or the raw text if it was not JSON, or None
    headers: dict[str, str]  # lower-case names; the Authorization value is masked
    status: int | None = None  # what was answered; None when the connection was dropped
    fault: str | None = None  # the kind of fault injected into this request, if any
    applied: bool = False  # whether the request reached the state (a change may have happened)
    at: float = 0.0

    @property
    def is_write(self) -> bool:
        return self.method in WRITE_METHODS

    def param(self, name: str) -> str | None:
        values = self.query.get(name)
        return values[0] if values else None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LoggedRequest:
        return cls(**data)


@dataclass
class Fault:
    id: int
    method: str
    path: str
    kind: str
    when: str
    status: int
    count: int  # how many more requests it applies to
    delay: float
    retry_after: int | None
    reset_in: int
    message: str | None
    hits: int = 0

    def matches(self, method: str, path: str) -> bool:
        if self.method != "*" and self.method != method:
            return False
        return _path_matches(self.path, path)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _path_matches(pattern: str, path: str) -> bool:
    pat = [p for p in pattern.strip("/").split("/") if p != ""]
    segs = [unquote(s) for s in path.strip("/").split("/") if s != ""]

    def match(i: int, j: int) -> bool:
        if i == len(pat):
            return j == len(segs)
        if pat[i] == "**":
            return any(match(i + 1, k) for k in range(j, len(segs) + 1))
        if j == len(segs):
            return False
        return fnmatch.fnmatchcase(segs[j], pat[i]) and match(i + 1, j + 1)

    return match(0, 0)


# --------------------------------------------------------------------------------------------
# The control API, shared by the in-process fake and the remote (HTTP) control


class ControlAPI(PullsControl):
    """Operations a test uses to shape the fake and inspect it. Results are plain JSON data."""

    def _call(self, op: str, **kwargs: Any) -> Any:
        raise NotImplementedError

    # state
    def reset(self) -> None:
        """Back to the initial state: default repo and token, no faults, empty log, no budget."""
        self._call("reset")

    def set_token(self, token: str, login: str | None = None) -> None:
        """Accept only ``token`` from now on (as ``login``, default the current login)."""
        self._call("set_token", token=token, login=login)

    def add_token(self, token: str, login: str) -> None:
        """Accept ``token`` too, as another user."""
        self._call("add_token", token=token, login=login)

    def add_repo(
        self, full_name: str, *, push: bool = True, private: bool = False
    ) -> dict[str, Any]:
        return dict(self._call("add_repo", full_name=full_name, push=push, private=private))

    def seed_issue(
        self,
        title: str,
        *,
        repo: str | None = None,
        body: str | None = None,
        labels: Sequence[str] = (),
        state: str = "open",
        state_reason: str | None = None,
        user: str | None = None,
        created_at: datetime | str | None = None,
        updated_at: datetime | str | None = None,
        pull_request: bool = False,
    ) -> dict[str, Any]:
        """Put an issue (or a pull request) straight into the state; labels are created."""
        return dict(
            self._call(
                "seed_issue",
                title=title,
                repo=repo,
                body=body,
                labels=list(labels),
                state=state,
                state_reason=state_reason,
                user=user,
                created_at=_iso_or_none(created_at),
                updated_at=_iso_or_none(updated_at),
                pull_request=pull_request,
            )
        )

    def seed_pull_request(self, title: str, **kwargs: Any) -> dict[str, Any]:
        return self.seed_issue(title, pull_request=True, **kwargs)

    def seed_label(
        self,
        name: str,
        *,
        repo: str | None = None,
        color: str = "ededed",
        description: str | None = None,
    ) -> dict[str, Any]:
        return dict(
            self._call("seed_label", name=name, repo=repo, color=color, description=description)
        )

    def seed_comment(
        self, number: int, body: str, *, repo: str | None = None, user: str | None = None
    ) -> dict[str, Any]:
        return dict(self._call("seed_comment", number=number, body=body, repo=repo, user=user))

    def delete_issue(self, number: int, *, repo: str | None = None) -> None:
        """The issue is deleted: it answers 410 and leaves the lists."""
        self._call("delete_issue", number=number, repo=repo)

    def transfer_issue(
        self, number: int, to_repo: str, *, repo: str | None = None
    ) -> dict[str, Any]:
        """Move the issue to another repository: the old address answers 301."""
        return dict(self._call("transfer_issue", number=number, to_repo=to_repo, repo=repo))

    # inspection
    def issues(
        self, *, repo: str | None = None, include_pull_requests: bool = False
    ) -> list[dict[str, Any]]:
        """Every live issue of the repository, by number, in the API's shape."""
        return list(self._call("issues", repo=repo, include_pull_requests=include_pull_requests))

    def issue(self, number: int, *, repo: str | None = None) -> dict[str, Any]:
        return dict(self._call("issue", number=number, repo=repo))

    def labels(self, *, repo: str | None = None) -> list[dict[str, Any]]:
        return list(self._call("labels", repo=repo))

    def comments(self, number: int, *, repo: str | None = None) -> list[dict[str, Any]]:
        return list(self._call("comments", number=number, repo=repo))

    def requests(self) -> list[LoggedRequest]:
        """The API requests received so far, oldest first."""
        return [LoggedRequest.from_dict(r) for r in self._call("requests")]

    def writes(self) -> list[LoggedRequest]:
        """The POST/PATCH/PUT/DELETE requests received so far."""
        return [r for r in self.requests() if r.is_write]

    def clear_requests(self) -> None:
        self._call("clear_requests")

    # faults and limits
    def inject_fault(
        self,
        method: str = "*",
        path: str = "**",
        *,
        kind: str = "error",
        status: int | None = None,
        when: str = "before",
        count: int = 1,
        delay: float = 10.0,
        retry_after: int | None = None,
        reset_in: int = 60,
        message: str | None = None,
    ) -> dict[str, Any]:
        """Make the next ``count`` requests matching ``method`` and ``path`` fail (see module)."""
        return dict(
            self._call(
                "inject_fault",
                method=method,
                path=path,
                kind=kind,
                status=status,
                when=when,
                count=count,
                delay=delay,
                retry_after=retry_after,
                reset_in=reset_in,
                message=message,
            )
        )

    def faults(self) -> list[dict[str, Any]]:
        """Faults still pending (count > 0)."""
        return list(self._call("faults"))

    def clear_faults(self) -> None:
        self._call("clear_faults")

    def set_write_budget(self, limit: int | None, window: float = 60.0) -> None:
        """At most ``limit`` writes per ``window`` seconds; beyond it a secondary rate limit."""
        self._call("set_write_budget", limit=limit, window=window)

    def set_rate_limit(
        self, limit: int = DEFAULT_RATE_LIMIT, remaining: int | None = None, reset_in: int = 3600
    ) -> None:
        """Set the primary limit's counters; at 0 remaining every request gets a 403."""
        self._call("set_rate_limit", limit=limit, remaining=remaining, reset_in=reset_in)

    def advance_clock(self, seconds: float) -> None:
        self._call("advance_clock", seconds=seconds)

    def set_options(
        self, *, per_page_default: int | None = None, cursor_links: bool | None = None
    ) -> None:
        """``cursor_links``: ``Link`` next URLs carry an opaque ``after=`` cursor, not a page."""
        self._call("set_options", per_page_default=per_page_default, cursor_links=cursor_links)


def _iso_or_none(value: datetime | str | None) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return _iso(value)


def _iso(value: datetime) -> str:
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_time(value: str) -> datetime:
    parsed = datetime.fromisoformat(value.strip())
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


# --------------------------------------------------------------------------------------------
# The fake's state


@dataclass
class _Label:
    id: int
    name: str
    color: str
    description: str | None


@dataclass
class _Comment:
    id: int
    number: int
    body: str
    user: str
    created_at: datetime
    updated_at: datetime


@dataclass
class _Issue:
    id: int
    number: int
    title: str
    body: str | None
    user: str
    state: str
    state_reason: str | None
    labels: list[str]  # keys (lower-case names) into the repository's labels
    created_at: datetime
    updated_at: datetime
    closed_at: datetime | None
    is_pull_request: bool = False
    comments: int = 0
    deleted: bool = False
    moved_to: str | None = None  # the API URL it moved to


@dataclass
class _Repo:
    id: int
    owner: str
    name: str
    private: bool
    push: bool
    issues: dict[int, _Issue] = field(default_factory=dict)
    labels: dict[str, _Label] = field(default_factory=dict)
    comments: list[_Comment] = field(default_factory=list)
    next_number: int = 1
    pr: RepoPulls = field(default_factory=RepoPulls)

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"


class ApiError(Exception):
    def __init__(
        self,
        status: int,
        message: str,
        *,
        errors: list[dict[str, Any]] | None = None,
        headers: dict[str, str] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.payload: dict[str, Any] = {"message": message, "documentation_url": DOCS}
        if errors is not None:
            self.payload["errors"] = errors
        if extra:
            self.payload.update(extra)
        self.payload["status"] = str(status)
        self.headers = headers or {}


@dataclass
class _Response:
    status: int
    payload: Any = None  # JSON-able; None means no body
    headers: dict[str, str] = field(default_factory=dict)
    raw: bytes | None = None  # a non-JSON body (e.g. an HTML 502 page)
    content_type: str = "text/html; charset=utf-8"  # of raw
    drop: bool = False  # close the connection without answering


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    fake: FakeGitHub


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "GitHub.com"
    sys_version = ""
    timeout = 30  # idle keep-alive connections end on their own
    server: _Server

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in two writes; without this, Nagle's algorithm holds the
        # second for the client's delayed ACK (about 40 ms per response).
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.fake._track(self.connection, add=True)

    def finish(self) -> None:
        with contextlib.suppress(OSError):
            super().finish()
        self.server.fake._track(self.connection, add=False)

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _dispatch(self) -> None:
        self.server.fake._serve(self)

    do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = do_HEAD = _dispatch


class FakeGitHub(ControlAPI):
    """The in-process fake. Use as a context manager, or call start() and stop()."""

    def __init__(
        self,
        *,
        token: str = DEFAULT_TOKEN,
        login: str = DEFAULT_LOGIN,
        repos: Sequence[str] = (DEFAULT_REPO,),
        host: str = "127.0.0.1",
        port: int = 0,
        path_prefix: str = "",
    ) -> None:
        self._initial_token = token
        self._initial_login = login
        self._initial_repos = tuple(repos)
        self._host = host
        self._port = port
        self.path_prefix = "/" + path_prefix.strip("/") if path_prefix.strip("/") else ""
        self._lock = threading.RLock()
        self._stopping = threading.Event()
        self._release = threading.Event()  # set to let the requests a timeout holds go
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._connections: set[socket.socket] = set()
        self._conn_lock = threading.Lock()
        self._ids = 1000
        self._reset_state()

    # lifecycle ------------------------------------------------------------------------------

    def start(self) -> Self:
        self._stopping.clear()
        server = _Server((self._host, self._port), _Handler)
        server.fake = self
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        self._stopping.set()
        self._release.set()
        server.shutdown()
        with self._conn_lock:
            conns = list(self._connections)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def address(self) -> tuple[str, int]:
        """(host, port) it listens on (the configured ones before it starts)."""
        if self._server is None:
            return self._host, self._port
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    @property
    def root_url(self) -> str:
        """Where the server listens; the control plane is under ``/_control``."""
        host, port = self.address
        return f"http://{host}:{port}"

    @property
    def url(self) -> str:
        """The API base URL (with the path prefix, if any)."""
        return self.root_url + self.path_prefix

    @property
    def token(self) -> str:
        with self._lock:
            return next(iter(self._tokens))

    @property
    def login(self) -> str:
        with self._lock:
            return next(iter(self._tokens.values()))

    @property
    def repo(self) -> str:
        """The default repository, ``owner/name``."""
        return self._initial_repos[0]

    def _track(self, conn: socket.socket, *, add: bool) -> None:
        with self._conn_lock:
            if add:
                self._connections.add(conn)
            else:
                self._connections.discard(conn)

    # state ----------------------------------------------------------------------------------

    def _reset_state(self) -> None:
        with self._lock:
            self._tokens: dict[str, str] = {self._initial_token: self._initial_login}
            self._users: dict[str, int] = {}
            self._repos: dict[str, _Repo] = {}
            for full_name in self._initial_repos:
                self._add_repo(full_name)
            self._faults: list[Fault] = []
            self._log: list[LoggedRequest] = []
            self._seq = 0
            self._clock_offset = 0.0
            self._budget_limit: int | None = None
            self._budget_window = 60.0
            self._budget_times: list[float] = []
            self._rate_limit = DEFAULT_RATE_LIMIT
            self._rate_used = 0
            self._rate_reset = self._epoch() + RATE_WINDOW_SECONDS
            self._per_page_default = 30
            self._cursor_links = False

    def _next_id(self) -> int:
        self._ids += 1
        return self._ids

    def _epoch(self) -> float:
        return time.time() + self._clock_offset

    def _now(self) -> datetime:
        return datetime.fromtimestamp(int(self._epoch()), UTC)

    def _user_id(self, login: str) -> int:
        if login not in self._users:
            self._users[login] = 500 + len(self._users)
        return self._users[login]

    def _repo(self, full_name: str | None) -> _Repo:
        key = (full_name or self._initial_repos[0]).lower()
        if key not in self._repos:
            raise ApiError(404, "Not Found")
        return self._repos[key]

    def _ensure_label(self, repo: _Repo, name: str) -> str:
        key = name.lower()
        if key not in repo.labels:
            repo.labels[key] = _Label(self._next_id(), name, "ededed", None)
        return key

    # control operations (run under the lock) ------------------------------------------------

    _OPS = (
        frozenset(
            {
                "reset",
                "set_token",
                "add_token",
                "add_repo",
                "seed_issue",
                "seed_label",
                "seed_comment",
                "delete_issue",
                "transfer_issue",
                "issues",
                "issue",
                "labels",
                "comments",
                "requests",
                "clear_requests",
                "inject_fault",
                "faults",
                "clear_faults",
                "set_write_budget",
                "set_rate_limit",
                "advance_clock",
                "set_options",
            }
        )
        | PULL_OPS
    )

    def _call(self, op: str, **kwargs: Any) -> Any:
        if op not in self._OPS:
            raise ValueError(f"unknown control operation {op!r}")
        method: Callable[..., Any] = getattr(self, f"_op_{op}")
        with self._lock:
            try:
                return method(**kwargs)
            except ApiError as exc:
                raise ValueError(exc.payload["message"]) from None

    def _op_reset(self) -> None:
        self._reset_state()

    def _op_set_token(self, token: str, login: str | None = None) -> None:
        self._tokens = {token: login or self.login}

    def _op_add_token(self, token: str, login: str) -> None:
        self._tokens[token] = login

    def _add_repo(self, full_name: str, push: bool = True, private: bool = False) -> _Repo:
        owner, _, name = full_name.partition("/")
        if not owner or not name or "/" in name:
            raise ValueError(f"not an owner/name: {full_name!r}")
        repo = _Repo(self._next_id(), owner, name, private, push)
        self._repos[full_name.lower()] = repo
        return repo

    def _op_add_repo(
        self, full_name: str, push: bool = True, private: bool = False
    ) -> dict[str, Any]:
        return self._repo_json(self._add_repo(full_name, push, private))

    def _op_seed_issue(
        self,
        title: str,
        repo: str | None = None,
        body: str | None = None,
        labels: Sequence[str] = (),
        state: str = "open",
        state_reason: str | None = None,
        user: str | None = None,
        created_at: str | None = None,
        updated_at: str | None = None,
        pull_request: bool = False,
    ) -> dict[str, Any]:
        r = self._repo(repo)
        if state not in ("open", "closed"):
            raise ValueError(f"bad state {state!r}")
        created = _parse_time(created_at) if created_at else self._now()
        updated = _parse_time(updated_at) if updated_at else created
        if state == "closed" and state_reason is None:
            state_reason = "completed"
        issue = _Issue(
            id=self._next_id(),
            number=r.next_number,
            title=title,
            body=body,
            user=user or self.login,
            state=state,
            state_reason=state_reason,
            labels=[self._ensure_label(r, n) for n in labels],
            created_at=created,
            updated_at=updated,
            closed_at=updated if state == "closed" else None,
            is_pull_request=pull_request,
        )
        r.issues[issue.number] = issue
        r.next_number += 1
        return self._issue_json(r, issue)

    def _op_seed_label(
        self,
        name: str,
        repo: str | None = None,
        color: str = "ededed",
        description: str | None = None,
    ) -> dict[str, Any]:
        r = self._repo(repo)
        if name.lower() in r.labels:
            raise ValueError(f"label {name!r} already exists")
        label = _Label(self._next_id(), name, color.lstrip("#"), description)
        r.labels[name.lower()] = label
        return self._label_json(r, label)

    def _op_seed_comment(
        self, number: int, body: str, repo: str | None = None, user: str | None = None
    ) -> dict[str, Any]:
        r = self._repo(repo)
        issue = self._live_issue(r, number)
        return self._add_comment(r, issue, body, user or self.login)

    def _op_delete_issue(self, number: int, repo: str | None = None) -> None:
        self._live_issue(self._repo(repo), number).deleted = True

    def _op_transfer_issue(
        self, number: int, to_repo: str, repo: str | None = None
    ) -> dict[str, Any]:
        src = self._repo(repo)
        dst = self._repo(to_repo)
        old = self._live_issue(src, number)
        new = _Issue(
            id=old.id,
            number=dst.next_number,
            title=old.title,
            body=old.body,
            user=old.user,
            state=old.state,
            state_reason=old.state_reason,
            labels=[self._ensure_label(dst, src.labels[k].name) for k in old.labels],
            created_at=old.created_at,
            updated_at=self._now(),
            closed_at=old.closed_at,
        )
        dst.issues[new.number] = new
        dst.next_number += 1
        old.moved_to = self._issue_api_url(dst, new.number)
        return self._issue_json(dst, new)

    def _op_issues(
        self, repo: str | None = None, include_pull_requests: bool = False
    ) -> list[dict[str, Any]]:
        r = self._repo(repo)
        return [
            self._issue_json(r, i)
            for i in sorted(r.issues.values(), key=lambda i: i.number)
            if not i.deleted
            and i.moved_to is None
            and (include_pull_requests or not i.is_pull_request)
        ]

    def _op_issue(self, number: int, repo: str | None = None) -> dict[str, Any]:
        r = self._repo(repo)
        return self._issue_json(r, self._live_issue(r, number))

    def _op_labels(self, repo: str | None = None) -> list[dict[str, Any]]:
        r = self._repo(repo)
        return [self._label_json(r, lb) for lb in r.labels.values()]

    def _op_comments(self, number: int, repo: str | None = None) -> list[dict[str, Any]]:
        r = self._repo(repo)
        return [self._comment_json(r, c) for c in r.comments if c.number == number]

    def _op_requests(self) -> list[dict[str, Any]]:
        return [entry.to_dict() for entry in self._log]

    def _op_clear_requests(self) -> None:
        self._log.clear()

    def _op_inject_fault(
        self,
        method: str = "*",
        path: str = "**",
        kind: str = "error",
        status: int | None = None,
        when: str = "before",
        count: int = 1,
        delay: float = 10.0,
        retry_after: int | None = None,
        reset_in: int = 60,
        message: str | None = None,
    ) -> dict[str, Any]:
        if kind not in FAULT_KINDS:
            raise ValueError(f"kind must be one of {FAULT_KINDS}")
        if when not in ("before", "after"):
            raise ValueError("when must be 'before' or 'after'")
        if kind in ("rate_limit", "secondary_rate_limit") and when != "before":
            raise ValueError("rate limits are always answered before applying")
        if status is None:
            status = {"error": 500, "rate_limit": 403, "secondary_rate_limit": 403}.get(kind, 0)
        fault = Fault(
            id=self._next_id(),
            method=method.upper(),
            path=path,
            kind=kind,
            when=when,
            status=status,
            count=count,
            delay=delay,
            retry_after=retry_after,
            reset_in=reset_in,
            message=message,
        )
        self._faults.append(fault)
        return fault.to_dict()

    def _op_faults(self) -> list[dict[str, Any]]:
        return [f.to_dict() for f in self._faults if f.count > 0]

    def _op_clear_faults(self) -> None:
        self._faults.clear()
        held, self._release = self._release, threading.Event()
        held.set()  # the requests held by a timeout fault end now

    def _op_set_write_budget(self, limit: int | None, window: float = 60.0) -> None:
        self._budget_limit = limit
        self._budget_window = float(window)
        self._budget_times = []

    def _op_set_rate_limit(
        self, limit: int = DEFAULT_RATE_LIMIT, remaining: int | None = None, reset_in: int = 3600
    ) -> None:
        self._rate_limit = limit
        self._rate_used = 0 if remaining is None else max(0, limit - remaining)
        self._rate_reset = self._epoch() + reset_in

    def _op_advance_clock(self, seconds: float) -> None:
        self._clock_offset += float(seconds)

    def _op_set_options(
        self, per_page_default: int | None = None, cursor_links: bool | None = None
    ) -> None:
        if per_page_default is not None:
            self._per_page_default = per_page_default
        if cursor_links is not None:
            self._cursor_links = cursor_links

    # pull requests ----------------------------------------------------------------------------

    def _branches(self, repo: _Repo) -> dict[str, str]:
        if repo.pr.git_dir is not None:
            return {**repo.pr.branches, **git_branches(repo.pr.git_dir)}
        return repo.pr.branches

    def _op_seed_branch(self, name: str, sha: str | None = None, repo: str | None = None) -> str:
        r = self._repo(repo)
        r.pr.branches[name] = sha or fake_sha(f"{r.full_name}:{name}:{self._next_id()}")
        return r.pr.branches[name]

    def _op_set_git_dir(self, path: str, repo: str | None = None) -> None:
        r = self._repo(repo)
        r.pr.git_dir = path
        if r.pr.protection:
            write_protection_hook(path, r.pr.protection)

    def _op_protect_branch(
        self,
        name: str,
        required_checks: Sequence[str] = (),
        up_to_date: bool = False,
        repo: str | None = None,
    ) -> dict[str, Any]:
        r = self._repo(repo)
        if isinstance(required_checks, str):
            raise ValueError("required_checks must be a list of check names")
        rule = Protection(tuple(required_checks), bool(up_to_date))
        r.pr.protection[name] = rule
        hook = None
        if r.pr.git_dir is not None:
            hook = write_protection_hook(r.pr.git_dir, r.pr.protection)
        return {
            "branch": name,
            "required_checks": list(rule.required_checks),
            "up_to_date": rule.up_to_date,
            "hook": hook,
        }

    def _new_pull(
        self,
        r: _Repo,
        *,
        title: str,
        body: str | None,
        head: str,
        base: str,
        draft: bool,
        login: str,
    ) -> _Issue:
        branches = self._branches(r)
        now = self._now()
        issue = _Issue(
            id=self._next_id(),
            number=r.next_number,
            title=title,
            body=body,
            user=login,
            state="open",
            state_reason=None,
            labels=[],
            created_at=now,
            updated_at=now,
            closed_at=None,
            is_pull_request=True,
        )
        r.issues[issue.number] = issue
        r.next_number += 1
        r.pr.pulls[issue.number] = PullState(
            number=issue.number,
            head=head,
            head_sha=branches.get(head) or fake_sha(f"{r.full_name}:{head}"),
            base=base,
            base_sha=branches.get(base) or fake_sha(f"{r.full_name}:{base}"),
            draft=draft,
        )
        return issue

    def _op_seed_pull(
        self,
        title: str,
        head: str = "feature",
        base: str = "main",
        body: str | None = None,
        draft: bool = False,
        diff: str = "",
        repo: str | None = None,
    ) -> dict[str, Any]:
        r = self._repo(repo)
        issue = self._new_pull(
            r, title=title, body=body, head=head, base=base, draft=draft, login=self.login
        )
        r.pr.pulls[issue.number].diff = diff
        return self._pull_json(r, issue)

    def _pull_of(self, r: _Repo, number: int) -> tuple[_Issue, PullState]:
        issue = r.issues.get(number)
        pull = r.pr.pulls.get(number)
        if issue is None or pull is None or issue.deleted:
            raise ApiError(404, "Not Found")
        return issue, pull

    def _op_set_pull(self, number: int, changes: dict[str, Any], repo: str | None = None) -> None:
        _, pull = self._pull_of(self._repo(repo), number)
        for key in changes:
            if key not in ("mergeable", "mergeable_state", "diff", "draft"):
                raise ValueError(f"cannot set {key!r} of a pull request")
        if "mergeable_state" in changes:
            state = changes["mergeable_state"]
            if state is None:  # computed again, and so is mergeable
                pull.forced.clear()
            elif state in MERGEABLE_STATES:
                pull.forced["mergeable_state"] = state
            else:
                raise ValueError(f"bad mergeable_state {state!r}")
        if "mergeable" in changes:
            if changes["mergeable"] not in (True, False, None):
                raise ValueError(f"bad mergeable {changes['mergeable']!r}")
            pull.forced["mergeable"] = changes["mergeable"]
        if "diff" in changes:
            pull.diff = str(changes["diff"])
        if "draft" in changes:
            pull.draft = bool(changes["draft"])

    def _op_add_review(
        self,
        number: int,
        state: str,
        user: str = "reviewer",
        body: str = "",
        comments: Sequence[dict[str, Any]] = (),
        repo: str | None = None,
    ) -> dict[str, Any]:
        r = self._repo(repo)
        issue, pull = self._pull_of(r, number)
        self._follow_branches(r, issue, pull)
        if state not in REVIEW_STATES:
            raise ValueError(f"bad review state {state!r}")
        review_id = self._next_id()
        for given in comments:
            pull.review_comments.append(
                self._review_comment_json(r, number, pull, review_id, user, given)
            )
        review = {
            "id": review_id,
            "node_id": f"PRR_{review_id}",
            "user": self._user_json(user),
            "body": body,
            "state": state,
            "html_url": (f"{HTML_BASE}/{r.full_name}/pull/{number}#pullrequestreview-{review_id}"),
            "pull_request_url": f"{self._repo_api_url(r)}/pulls/{number}",
            "author_association": "CONTRIBUTOR",
            "submitted_at": None if state == "PENDING" else _iso(self._now()),
            "commit_id": pull.head_sha,
        }
        pull.reviews.append(review)
        return review

    def _review_comment_json(
        self,
        r: _Repo,
        number: int,
        pull: PullState,
        review_id: int,
        user: str,
        given: dict[str, Any],
    ) -> dict[str, Any]:
        """A review comment as ``GET /pulls/{n}/comments`` answers it."""
        unknown = set(given) - {"path", "line", "body"}
        if unknown or not isinstance(given.get("path"), str):
            raise ValueError(f"a review comment is {{path, line, body}}, not {given!r}")
        comment_id = self._next_id()
        line = given.get("line")
        html = f"{HTML_BASE}/{r.full_name}/pull/{number}"
        return {
            "url": f"{self._repo_api_url(r)}/pulls/comments/{comment_id}",
            "id": comment_id,
            "node_id": f"PRRC_{comment_id}",
            "pull_request_review_id": review_id,
            "diff_hunk": "@@ -1 +1 @@",
            "path": given["path"],
            "commit_id": pull.head_sha,
            "original_commit_id": pull.head_sha,
            "user": self._user_json(user),
            "body": str(given.get("body", "")),
            "created_at": _iso(self._now()),
            "updated_at": _iso(self._now()),
            "html_url": f"{html}#discussion_r{comment_id}",
            "pull_request_url": f"{self._repo_api_url(r)}/pulls/{number}",
            "author_association": "CONTRIBUTOR",
            "line": line,
            "original_line": line,
            "side": "RIGHT",
            "subject_type": "line",
        }

    def _op_add_check_run(
        self,
        sha: str,
        name: str,
        status: str = "completed",
        conclusion: str | None = "success",
        title: str | None = None,
        summary: str | None = None,
        annotations: Sequence[dict[str, Any]] = (),
        repo: str | None = None,
    ) -> dict[str, Any]:
        r = self._repo(repo)
        if status not in CHECK_STATUSES:
            raise ValueError(f"bad check run status {status!r}")
        if status == "completed" and conclusion not in CHECK_CONCLUSIONS:
            raise ValueError(f"bad conclusion {conclusion!r}")
        run_id = self._next_id()
        r.pr.annotations[run_id] = [self._annotation_json(r, sha, a) for a in annotations]
        run = {
            "id": run_id,
            "node_id": f"CR_{run_id}",
            "head_sha": sha,
            "external_id": "",
            "url": f"{self._repo_api_url(r)}/check-runs/{run_id}",
            "html_url": f"{HTML_BASE}/{r.full_name}/runs/{run_id}",
            "details_url": f"{HTML_BASE}/{r.full_name}/runs/{run_id}",
            "status": status,
            "conclusion": conclusion if status == "completed" else None,
            "started_at": _iso(self._now()),
            "completed_at": _iso(self._now()) if status == "completed" else None,
            "name": name,
            "output": {
                "title": title,
                "summary": summary,
                "text": None,
                "annotations_count": len(annotations),
                "annotations_url": f"{self._repo_api_url(r)}/check-runs/{run_id}/annotations",
            },
            "check_suite": {"id": run_id + 1},
            "app": {"id": 15368, "slug": "github-actions", "name": "GitHub Actions"},
            "pull_requests": [],
        }
        r.pr.check_runs.setdefault(sha, []).append(run)
        return run

    def _annotation_json(self, r: _Repo, sha: str, given: dict[str, Any]) -> dict[str, Any]:
        """An annotation as ``GET /check-runs/{id}/annotations`` answers it."""
        known = {"path", "start_line", "end_line", "annotation_level", "message", "title"}
        if set(given) - known or not isinstance(given.get("path"), str):
            raise ValueError(f"an annotation is {{path, start_line, message, ...}}: {given!r}")
        level = given.get("annotation_level", "failure")
        if level not in ANNOTATION_LEVELS:
            raise ValueError(f"bad annotation_level {level!r}")
        start = given.get("start_line", 1)
        return {
            "path": given["path"],
            "blob_href": f"{HTML_BASE}/{r.full_name}/blob/{sha}/{given['path']}",
            "start_line": start,
            "end_line": given.get("end_line", start),
            "start_column": None,
            "end_column": None,
            "annotation_level": level,
            "title": given.get("title"),
            "message": given.get("message", ""),
            "raw_details": None,
        }

    def _op_add_status(
        self, sha: str, context: str, state: str, repo: str | None = None
    ) -> dict[str, Any]:
        r = self._repo(repo)
        if state not in STATUS_STATES:
            raise ValueError(f"bad status state {state!r}")
        status_id = self._next_id()
        status = {
            "url": f"{self._repo_api_url(r)}/statuses/{sha}",
            "id": status_id,
            "node_id": f"SC_{status_id}",
            "state": state,
            "description": f"{context}: {state}",
            "target_url": f"https://ci.example.com/{status_id}",
            "context": context,
            "created_at": _iso(self._now()),
            "updated_at": _iso(self._now()),
        }
        r.pr.statuses.setdefault(sha, []).append(status)
        return status

    def _op_merge_pull(self, number: int, repo: str | None = None) -> dict[str, Any]:
        r = self._repo(repo)
        issue, pull = self._pull_of(r, number)
        self._record_merge(issue, pull, None)
        return self._pull_json(r, issue)

    def _record_merge(self, issue: _Issue, pull: PullState, sha: str | None) -> None:
        """The pull request is merged (by ``sha``, if a real commit) and its issue closed."""
        now = self._now()
        pull.merged_at = now
        pull.merge_commit_sha = sha
        pull.forced.clear()  # merged: mergeable null, mergeable_state "unknown"
        issue.state = "closed"
        issue.state_reason = None
        issue.closed_at = now
        issue.updated_at = now

    def _op_pulls(self, repo: str | None = None) -> list[dict[str, Any]]:
        r = self._repo(repo)
        branches = self._branches(r)
        return [self._pull_json(r, r.issues[n], branches) for n in sorted(r.pr.pulls)]

    def _follow_branches(
        self,
        repo: _Repo,
        issue: _Issue,
        pull: PullState,
        branches: dict[str, str] | None = None,
    ) -> dict[str, str]:
        """With a git directory, an open pull request's head and base shas are its branches'
        tips (as on GitHub, where a push updates ``head.sha``); the branches."""
        if branches is None:
            branches = self._branches(repo)
        if repo.pr.git_dir is not None and issue.state == "open" and pull.merged_at is None:
            pull.head_sha = branches.get(pull.head, pull.head_sha)
            pull.base_sha = branches.get(pull.base, pull.base_sha)
        return branches

    def _mergeability(
        self, repo: _Repo, pull: PullState, branches: dict[str, str]
    ) -> tuple[bool | None, str]:
        """(``mergeable``, ``mergeable_state``): the forced values, else computed."""
        state = pull.forced.get("mergeable_state") or self._computed_state(repo, pull, branches)
        if "mergeable" in pull.forced:
            return pull.forced["mergeable"], state
        return {"dirty": False, "unknown": None}.get(state, True), state

    def _computed_state(self, repo: _Repo, pull: PullState, branches: dict[str, str]) -> str:
        """GitHub's ``mergeable_state``, from the git directory (without one only merged,
        draft or clean): merged "unknown", "draft", a conflict "dirty", "behind" the base
        when protection wants it up to date, a required check not passed "blocked", a check
        failed "unstable", else "clean"."""
        if pull.merged_at is not None:
            return "unknown"
        if pull.draft:
            return "draft"
        git_dir = repo.pr.git_dir
        if git_dir is None:
            return "clean"
        if pull.head not in branches or pull.base not in branches:
            return "unknown"
        rule = repo.pr.protection.get(pull.base, Protection())
        try:
            if merge_tree(git_dir, pull.base_sha, pull.head_sha) is None:
                return "dirty"
            if rule.up_to_date and not is_ancestor(git_dir, pull.base_sha, pull.head_sha):
                return "behind"
        except GitError:
            return "unknown"
        outcomes = check_outcomes(
            repo.pr.check_runs.get(pull.head_sha, []), repo.pr.statuses.get(pull.head_sha, [])
        )
        return checks_verdict(outcomes, rule.required_checks)

    def _merged_at(self, repo: _Repo, number: int) -> str | None:
        pull = repo.pr.pulls.get(number)
        return _iso(pull.merged_at) if pull is not None and pull.merged_at else None

    def _ref_json(self, repo: _Repo, ref: str, sha: str) -> dict[str, Any]:
        return {
            "label": f"{repo.owner}:{ref}",
            "ref": ref,
            "sha": sha,
            "user": self._user_json(repo.owner),
            "repo": self._repo_json(repo),
        }

    def _pull_json(
        self, repo: _Repo, issue: _Issue, branches: dict[str, str] | None = None
    ) -> dict[str, Any]:
        pull = repo.pr.pulls[issue.number]
        branches = self._follow_branches(repo, issue, pull, branches)
        mergeable, mergeable_state = self._mergeability(repo, pull, branches)
        merge_sha = pull.merge_commit_sha or fake_sha(f"merge:{pull.head_sha}:{pull.base_sha}")
        api = f"{self._repo_api_url(repo)}/pulls/{issue.number}"
        html = f"{HTML_BASE}/{repo.full_name}/pull/{issue.number}"
        return {
            "url": api,
            "id": issue.id,
            "node_id": f"PR_{issue.id}",
            "html_url": html,
            "diff_url": html + ".diff",
            "patch_url": html + ".patch",
            "issue_url": self._issue_api_url(repo, issue.number),
            "number": issue.number,
            "state": issue.state,
            "locked": False,
            "title": issue.title,
            "user": self._user_json(issue.user),
            "body": issue.body,
            "labels": [self._label_json(repo, repo.labels[k]) for k in issue.labels],
            "created_at": _iso(issue.created_at),
            "updated_at": _iso(issue.updated_at),
            "closed_at": _iso(issue.closed_at) if issue.closed_at else None,
            "merged_at": _iso(pull.merged_at) if pull.merged_at else None,
            "merge_commit_sha": merge_sha,
            "head": self._ref_json(repo, pull.head, pull.head_sha),
            "base": self._ref_json(repo, pull.base, pull.base_sha),
            "draft": pull.draft,
            "merged": pull.merged_at is not None,
            "mergeable": mergeable,
            "rebaseable": mergeable,
            "mergeable_state": mergeable_state,
            "comments": issue.comments,
            "review_comments": len(pull.review_comments),
            "commits": 1,
            "additions": pull.diff.count("\n+"),
            "deletions": pull.diff.count("\n-"),
            "changed_files": pull.diff.count("diff --git"),
        }

    def _route_pulls(
        self,
        repo: _Repo,
        rest: list[str],
        method: str,
        query: dict[str, list[str]],
        body: Any,
        login: str,
        headers: dict[str, str],
    ) -> tuple[int, Any, dict[str, str]]:
        path = f"/repos/{repo.full_name}/" + "/".join(rest)
        if rest == ["pulls"]:
            if method == "GET":
                return self._list_pulls(repo, path, query)
            if method == "POST":
                return 201, self._create_pull(repo, body, login), {}
        if len(rest) >= 2 and rest[1].isdigit():
            issue, pull = self._pull_of(repo, int(rest[1]))
            return self._route_pull(repo, issue, pull, rest[2:], method, path, query, body, headers)
        raise ApiError(404, "Not Found")

    def _route_pull(
        self,
        repo: _Repo,
        issue: _Issue,
        pull: PullState,
        sub: list[str],
        method: str,
        path: str,
        query: dict[str, list[str]],
        body: Any,
        headers: dict[str, str],
    ) -> tuple[int, Any, dict[str, str]]:
        """``/pulls/{n}`` and what is under it (``sub``)."""
        if not sub and method == "GET":
            if DIFF_MEDIA_TYPE in headers.get("accept", ""):
                return 200, Text(pull.diff, f"{DIFF_MEDIA_TYPE}; charset=utf-8"), {}
            return 200, self._pull_json(repo, issue), {}
        if sub == ["reviews"] and method == "GET":
            return self._paginate(list(pull.reviews), path, query)
        if sub == ["comments"] and method == "GET":
            return self._paginate(list(pull.review_comments), path, query)
        if sub == ["merge"]:
            if method == "PUT":
                return 200, self._merge(repo, issue, pull, body), {}
            if method == "GET":
                if pull.merged_at is None:
                    raise ApiError(404, "Not Found")
                return 204, None, {}
        if sub == ["update-branch"] and method == "PUT":
            return 202, self._update_branch(repo, issue, pull, body), {}
        raise ApiError(404, "Not Found")

    def _list_pulls(
        self, repo: _Repo, path: str, query: dict[str, list[str]]
    ) -> tuple[int, Any, dict[str, str]]:
        state = _first(query, "state") or "open"
        head = _first(query, "head")
        branches = self._branches(repo)
        items = [
            self._pull_json(repo, repo.issues[n], branches)
            for n in sorted(repo.pr.pulls, reverse=True)
            if state in ("all", repo.issues[n].state)
            and (head is None or f"{repo.owner}:{repo.pr.pulls[n].head}" == head)
        ]
        return self._paginate(items, path, query)

    def _route_commits(
        self, repo: _Repo, rest: list[str], method: str
    ) -> tuple[int, Any, dict[str, str]]:
        if len(rest) == 3 and method == "GET":
            sha = self._branches(repo).get(rest[1], rest[1])
            if rest[2] == "check-runs":
                runs = repo.pr.check_runs.get(sha, [])
                return 200, {"total_count": len(runs), "check_runs": runs}, {}
            if rest[2] == "status":
                return 200, self._combined_status_json(repo, sha), {}
        raise ApiError(404, "Not Found")

    def _route_check_run(
        self, repo: _Repo, rest: list[str], method: str, path: str, query: dict[str, list[str]]
    ) -> tuple[int, Any, dict[str, str]]:
        """``GET /check-runs/{id}/annotations``."""
        if len(rest) == 3 and rest[2] == "annotations" and method == "GET" and rest[1].isdigit():
            found = repo.pr.annotations.get(int(rest[1]))
            if found is not None:
                return self._paginate(list(found), path, query)
        raise ApiError(404, "Not Found")

    def _combined_status_json(self, repo: _Repo, sha: str) -> dict[str, Any]:
        statuses = repo.pr.statuses.get(sha, [])
        latest = {s["context"]: s for s in statuses}
        return {
            "state": combined_state(statuses),
            "statuses": list(latest.values()),
            "sha": sha,
            "total_count": len(latest),
            "repository": self._repo_json(repo),
            "commit_url": f"{self._repo_api_url(repo)}/commits/{sha}",
            "url": f"{self._repo_api_url(repo)}/commits/{sha}/status",
        }

    def _merge(self, repo: _Repo, issue: _Issue, pull: PullState, body: Any) -> dict[str, Any]:
        """``PUT /pulls/{n}/merge``: with a git directory the base branch moves to a real
        merge, squash or rebased commit; without one the merge is only recorded."""
        body = {} if body is None else body
        commit_title = _field(body, "commit_title", str, resource="PullRequest")
        commit_message = _field(body, "commit_message", str, resource="PullRequest")
        sha = _field(body, "sha", str, resource="PullRequest")
        method = _field(body, "merge_method", str, resource="PullRequest") or "merge"
        if method not in MERGE_METHODS:
            raise _invalid("merge_method", "PullRequest")
        branches = self._follow_branches(repo, issue, pull)
        if pull.merged_at is not None or issue.state != "open":
            raise _not_mergeable()
        if sha is not None and sha != pull.head_sha:
            raise ApiError(409, "Head branch was modified. Review and try the merge again.")
        if pull.draft:
            raise _not_mergeable()
        git_dir = repo.pr.git_dir
        if git_dir is not None:
            if pull.head not in branches or pull.base not in branches:
                raise _not_mergeable()
            if _git_or_500(merge_tree, git_dir, pull.base_sha, pull.head_sha) is None:
                raise _not_mergeable("Merge conflict")
        mergeable, state = self._mergeability(repo, pull, branches)
        if mergeable is False or state in ("dirty", "blocked", "behind"):
            raise _not_mergeable()
        message = _merge_message(repo, issue, pull, method, commit_title, commit_message)
        if git_dir is None:
            merged = fake_sha(f"{method}:{pull.base_sha}:{pull.head_sha}:{self._next_id()}")
        else:
            merged = _land_or_refuse(git_dir, pull, method, message)
        self._record_merge(issue, pull, merged)
        return {"sha": merged, "merged": True, "message": "Pull Request successfully merged"}

    def _update_branch(
        self, repo: _Repo, issue: _Issue, pull: PullState, body: Any
    ) -> dict[str, Any]:
        """``PUT /pulls/{n}/update-branch``: merge the base's tip into the head branch, at
        once (GitHub answers 202 and does it soon after)."""
        body = {} if body is None else body
        expected = _field(body, "expected_head_sha", str, resource="PullRequest")
        branches = self._follow_branches(repo, issue, pull)
        if pull.merged_at is not None or issue.state != "open":
            raise ApiError(422, "Pull request is closed")
        if expected is not None and expected != pull.head_sha:
            raise ApiError(422, "expected_head_sha is not the head of the branch")
        git_dir = repo.pr.git_dir
        if git_dir is None:
            pull.head_sha = fake_sha(f"update:{pull.head_sha}:{pull.base_sha}:{self._next_id()}")
            if pull.head in repo.pr.branches:
                repo.pr.branches[pull.head] = pull.head_sha
        elif pull.head not in branches or pull.base not in branches:
            raise ApiError(422, "merge conflict between base and head")
        elif not _git_or_500(is_ancestor, git_dir, pull.base_sha, pull.head_sha):
            tree = _git_or_500(merge_tree, git_dir, pull.head_sha, pull.base_sha)
            if tree is None:
                raise ApiError(422, "merge conflict between base and head")
            message = f"Merge branch '{pull.base}' into {pull.head}"
            new = _git_or_500(commit_tree, git_dir, tree, [pull.head_sha, pull.base_sha], message)
            if not _git_or_500(update_ref, git_dir, f"refs/heads/{pull.head}", new, pull.head_sha):
                raise ApiError(422, "expected_head_sha is not the head of the branch")
            pull.head_sha = new
        issue.updated_at = self._now()
        html = f"{HTML_BASE}/{repo.full_name}/pull/{issue.number}"
        return {"message": "Updating pull request branch.", "url": html}

    def _create_pull(self, repo: _Repo, body: Any, login: str) -> dict[str, Any]:
        title = _field(body, "title", str, resource="PullRequest")
        head = _field(body, "head", str, required=True, resource="PullRequest")
        base = _field(body, "base", str, required=True, resource="PullRequest")
        text = _field(body, "body", str, resource="PullRequest")
        draft = body.get("draft") is True
        if not title:
            raise ApiError(
                422,
                "Validation Failed",
                errors=[{"resource": "PullRequest", "code": "missing_field", "field": "title"}],
            )
        branch = head.split(":", 1)[1] if ":" in head else head
        branches = self._branches(repo)
        if branch not in branches:
            raise _invalid("head", "PullRequest")
        if base not in branches:
            raise _invalid("base", "PullRequest")
        if branches[branch] == branches[base]:
            raise ApiError(
                422,
                "Validation Failed",
                errors=[
                    {
                        "resource": "PullRequest",
                        "code": "custom",
                        "message": f"No commits between {base} and {branch}",
                    }
                ],
            )
        for n, other in repo.pr.pulls.items():
            if other.head == branch and other.base == base and repo.issues[n].state == "open":
                raise ApiError(
                    422,
                    "Validation Failed",
                    errors=[
                        {
                            "resource": "PullRequest",
                            "code": "custom",
                            "message": f"A pull request already exists for {repo.owner}:{branch}.",
                        }
                    ],
                )
        issue = self._new_pull(
            repo, title=title, body=text, head=branch, base=base, draft=draft, login=login
        )
        if repo.pr.git_dir is not None:
            repo.pr.pulls[issue.number].diff = git_diff(
                repo.pr.git_dir, branches[base], branches[branch]
            )
        return self._pull_json(repo, issue)

    # JSON shapes ----------------------------------------------------------------------------

    def _repo_api_url(self, repo: _Repo) -> str:
        return f"{self.url}/repos/{repo.owner}/{repo.name}"

    def _issue_api_url(self, repo: _Repo, number: int) -> str:
        return f"{self._repo_api_url(repo)}/issues/{number}"

    def _user_json(self, login: str) -> dict[str, Any]:
        return {
            "login": login,
            "id": self._user_id(login),
            "node_id": f"U_{self._user_id(login)}",
            "type": "Bot" if login.endswith("[bot]") else "User",
            "site_admin": False,
            "html_url": f"{HTML_BASE}/{login}",
        }

    def _repo_json(self, repo: _Repo) -> dict[str, Any]:
        return {
            "id": repo.id,
            "node_id": f"R_{repo.id}",
            "name": repo.name,
            "full_name": repo.full_name,
            "owner": self._user_json(repo.owner),
            "private": repo.private,
            "html_url": f"{HTML_BASE}/{repo.full_name}",
            "url": self._repo_api_url(repo),
            "has_issues": True,
            "archived": False,
            "default_branch": "main",
            "open_issues_count": sum(
                1 for i in repo.issues.values() if i.state == "open" and not i.deleted
            ),
            "permissions": {
                "admin": repo.push,
                "maintain": repo.push,
                "push": repo.push,
                "triage": repo.push,
                "pull": True,
            },
        }

    def _label_json(self, repo: _Repo, label: _Label) -> dict[str, Any]:
        return {
            "id": label.id,
            "node_id": f"LA_{label.id}",
            "url": f"{self._repo_api_url(repo)}/labels/{quote(label.name, safe='')}",
            "name": label.name,
            "color": label.color,
            "default": False,
            "description": label.description,
        }

    def _issue_json(self, repo: _Repo, issue: _Issue) -> dict[str, Any]:
        api = self._issue_api_url(repo, issue.number)
        kind = "pull" if issue.is_pull_request else "issues"
        html = f"{HTML_BASE}/{repo.full_name}/{kind}/{issue.number}"
        data: dict[str, Any] = {
            "url": api,
            "repository_url": self._repo_api_url(repo),
            "labels_url": api + "/labels{/name}",
            "comments_url": api + "/comments",
            "events_url": api + "/events",
            "html_url": html,
            "id": issue.id,
            "node_id": f"I_{issue.id}",
            "number": issue.number,
            "title": issue.title,
            "user": self._user_json(issue.user),
            "labels": [self._label_json(repo, repo.labels[k]) for k in issue.labels],
            "state": issue.state,
            "locked": False,
            "assignee": None,
            "assignees": [],
            "milestone": None,
            "comments": issue.comments,
            "created_at": _iso(issue.created_at),
            "updated_at": _iso(issue.updated_at),
            "closed_at": _iso(issue.closed_at) if issue.closed_at else None,
            "author_association": "OWNER" if issue.user == repo.owner else "CONTRIBUTOR",
            "body": issue.body,
            "state_reason": issue.state_reason,
        }
        if issue.is_pull_request:
            data["pull_request"] = {
                "url": f"{self._repo_api_url(repo)}/pulls/{issue.number}",
                "html_url": html,
                "diff_url": html + ".diff",
                "patch_url": html + ".patch",
                "merged_at": self._merged_at(repo, issue.number),
            }
        return data

    def _comment_json(self, repo: _Repo, comment: _Comment) -> dict[str, Any]:
        return {
            "id": comment.id,
            "node_id": f"IC_{comment.id}",
            "url": f"{self._repo_api_url(repo)}/issues/comments/{comment.id}",
            "html_url": (
                f"{HTML_BASE}/{repo.full_name}/issues/{comment.number}#issuecomment-{comment.id}"
            ),
            "issue_url": self._issue_api_url(repo, comment.number),
            "body": comment.body,
            "user": self._user_json(comment.user),
            "created_at": _iso(comment.created_at),
            "updated_at": _iso(comment.updated_at),
            "author_association": "OWNER" if comment.user == repo.owner else "CONTRIBUTOR",
        }

    # HTTP -----------------------------------------------------------------------------------

    def _serve(self, h: _Handler) -> None:
        split = urlsplit(h.path)
        raw_path = split.path
        query = parse_qs(split.query, keep_blank_values=True)
        length = int(h.headers.get("Content-Length") or 0)
        raw_body = h.rfile.read(length) if length > 0 else b""
        method = h.command.upper()

        if raw_path == "/_control" or raw_path.startswith("/_control/"):
            self._send(h, method, self._control(method, raw_path, query, raw_body))
            return

        if self.path_prefix and not (
            raw_path == self.path_prefix or raw_path.startswith(self.path_prefix + "/")
        ):
            self._send(h, method, _Response(404, {"message": "Not Found"}))
            return
        path = raw_path[len(self.path_prefix) :] or "/"
        headers = {k.lower(): v for k, v in h.headers.items()}

        body: Any = None
        body_error = False
        if raw_body:
            try:
                body = json.loads(raw_body)
            except ValueError:
                body = raw_body.decode("utf-8", "replace")
                body_error = True

        with self._lock:
            self._seq += 1
            logged = dict(headers)
            if "authorization" in logged:
                scheme = logged["authorization"].split(" ", 1)[0]
                logged["authorization"] = f"{scheme} ***"
            entry = LoggedRequest(
                seq=self._seq,
                method=method,
                path=path,
                query=query,
                body=body,
                headers=logged,
                at=self._epoch(),
            )
            self._log.append(entry)
            fault = next((f for f in self._faults if f.count > 0 and f.matches(method, path)), None)
            if fault is not None:
                fault.count -= 1
                fault.hits += 1
                entry.fault = fault.kind

        if fault is not None and fault.when == "before":
            response = self._fault_response(fault, entry)
        else:
            with self._lock:
                if body_error:
                    response = self._error_response(ApiError(400, "Problems parsing JSON"))
                else:
                    response = self._api(method, path, query, body, headers)
                    entry.applied = True
            if fault is not None:
                response = self._fault_response(fault, entry)

        entry.status = None if response.drop else response.status
        if "x-github-request-id" in response.headers:
            response.headers["x-github-request-id"] = f"FAKE:{entry.seq:06d}"
        if response.drop:
            h.close_connection = True
            return
        self._send(h, method, response)

    def _send(self, h: _Handler, method: str, response: _Response) -> None:
        if response.raw is not None:
            data = response.raw
            ctype = response.content_type
        elif response.payload is not None:
            data = json.dumps(response.payload).encode()
            ctype = "application/json; charset=utf-8"
        else:
            data = b""
            ctype = ""
        try:
            h.send_response(response.status)
            if ctype:
                h.send_header("Content-Type", ctype)
            for name, value in response.headers.items():
                h.send_header(name, value)
            if response.status not in (204, 304):
                h.send_header("Content-Length", str(len(data)))
            h.end_headers()
            if method != "HEAD" and response.status not in (204, 304):
                h.wfile.write(data)
            h.wfile.flush()
        except OSError:
            h.close_connection = True

    def _request_id(self) -> str:
        return f"FAKE:{self._seq:06d}"

    def _rate_headers(
        self, *, remaining_zero: bool = False, reset_in: int | None = None
    ) -> dict[str, str]:
        remaining = 0 if remaining_zero else max(0, self._rate_limit - self._rate_used)
        reset = self._epoch() + reset_in if reset_in is not None else self._rate_reset
        return {
            "x-ratelimit-limit": str(self._rate_limit),
            "x-ratelimit-remaining": str(remaining),
            "x-ratelimit-reset": str(int(reset)),
            "x-ratelimit-used": str(self._rate_limit - remaining),
            "x-ratelimit-resource": "core",
            "x-github-request-id": self._request_id(),
            "x-github-api-version-selected": "2022-11-28",
        }

    def _error_response(self, exc: ApiError) -> _Response:
        headers = self._rate_headers()
        headers.update(exc.headers)
        return _Response(exc.status, exc.payload, headers)

    def _fault_response(self, fault: Fault, entry: LoggedRequest) -> _Response:
        if fault.kind in ("timeout", "disconnect"):
            if fault.kind == "timeout":
                self._release.wait(fault.delay)
            return _Response(0, drop=True)
        with self._lock:
            if fault.kind == "rate_limit":
                headers = self._rate_headers(remaining_zero=True, reset_in=fault.reset_in)
                uid = self._user_id(self.login)
                message = fault.message or PRIMARY_MESSAGE.format(uid=uid, rid=entry.seq)
                payload = {"message": message, "documentation_url": f"{DOCS}/rate-limit"}
                return _Response(fault.status, payload, headers)
            if fault.kind == "secondary_rate_limit":
                headers = self._rate_headers()
                if fault.retry_after is not None:
                    headers["retry-after"] = str(fault.retry_after)
                message = fault.message or SECONDARY_MESSAGE.format(rid=entry.seq)
                payload = {"message": message, "documentation_url": f"{DOCS}/rate-limit"}
                return _Response(fault.status, payload, headers)
            headers = self._rate_headers()
        if fault.status == 502 and fault.message is None:
            page = b"<html><body><h1>502 Bad Gateway</h1>Unicorn! We had issues.</body></html>"
            return _Response(502, None, headers, raw=page)
        message = fault.message or {500: "Server Error", 503: "Service Unavailable"}.get(
            fault.status, "Fault injected"
        )
        return _Response(fault.status, {"message": message}, headers)

    def _control(
        self, method: str, path: str, query: dict[str, list[str]], raw_body: bytes
    ) -> _Response:
        op = path[len("/_control/") :].strip("/") if path.startswith("/_control/") else ""
        if op in ("", "health"):
            info = {"ok": True, "url": self.url, "token": self.token, "login": self.login}
            return _Response(200, {**info, "repo": self.repo})
        try:
            kwargs = json.loads(raw_body) if raw_body else {}
            if not isinstance(kwargs, dict):
                raise ValueError("the body must be a JSON object of keyword arguments")
            if method == "GET":
                kwargs.update({k: v[0] for k, v in query.items()})
            elif method != "POST":
                raise ValueError("use POST (or GET for inspection)")
            result = self._call(op, **kwargs)
        except (ValueError, TypeError, KeyError) as exc:
            return _Response(400, {"error": str(exc)})
        return _Response(200, {"result": result})

    # the API --------------------------------------------------------------------------------

    def _api(
        self,
        method: str,
        path: str,
        query: dict[str, list[str]],
        body: Any,
        headers: dict[str, str],
    ) -> _Response:
        try:
            login = self._authenticate(headers)
            counted = path.rstrip("/") != "/rate_limit"
            self._roll_rate_window()
            if counted:
                if self._rate_used >= self._rate_limit:
                    uid = self._user_id(login)
                    raise ApiError(
                        403,
                        PRIMARY_MESSAGE.format(uid=uid, rid=self._seq),
                        headers=self._rate_headers(remaining_zero=True),
                    )
                self._rate_used += 1
            if method in WRITE_METHODS:
                self._spend_write_budget()
            status, payload, extra = self._route(method, path, query, body, login, headers)
        except ApiError as exc:
            return self._error_response(exc)
        if isinstance(payload, Text):
            raw = payload.body.encode()
            headers_out = {**self._rate_headers(), **extra}
            return _Response(status, None, headers_out, raw=raw, content_type=payload.content_type)
        response = _Response(status, payload, self._rate_headers())
        response.headers.update(extra)
        if method == "GET" and status == 200:
            digest = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
            etag = f'W/"{digest[:40]}"'
            response.headers["ETag"] = etag
            if _etag_matches(headers.get("if-none-match"), etag):
                if counted:
                    self._rate_used -= 1  # a 304 costs no quota
                return _Response(304, None, {**self._rate_headers(), "ETag": etag})
        return response

    def _authenticate(self, headers: dict[str, str]) -> str:
        auth = headers.get("authorization", "").strip()
        if not auth:
            raise ApiError(401, "Requires authentication")
        scheme, _, token = auth.partition(" ")
        token = token.strip()
        if scheme.lower() not in ("bearer", "token") or token not in self._tokens:
            raise ApiError(401, "Bad credentials")
        return self._tokens[token]

    def _roll_rate_window(self) -> None:
        if self._epoch() >= self._rate_reset:
            self._rate_used = 0
            self._rate_reset = self._epoch() + RATE_WINDOW_SECONDS

    def _spend_write_budget(self) -> None:
        if self._budget_limit is None:
            return
        now = time.monotonic() + self._clock_offset
        self._budget_times = [t for t in self._budget_times if t > now - self._budget_window]
        if len(self._budget_times) >= self._budget_limit:
            wait = max(1, math.ceil(self._budget_times[0] + self._budget_window - now))
            raise ApiError(
                403,
                SECONDARY_MESSAGE.format(rid=self._seq),
                headers={"retry-after": str(wait)},
            )
        self._budget_times.append(now)

    def _route(
        self,
        method: str,
        path: str,
        query: dict[str, list[str]],
        body: Any,
        login: str,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, Any, dict[str, str]]:
        segs = [unquote(s) for s in path.strip("/").split("/")]
        if segs == ["user"] and method == "GET":
            return 200, self._user_json(login), {}
        if segs == ["rate_limit"] and method == "GET":
            return 200, self._rate_limit_json(), {}
        if len(segs) < 3 or segs[0] != "repos":
            raise ApiError(404, "Not Found")
        repo = self._repo(f"{segs[1]}/{segs[2]}")
        rest = segs[3:]
        if method in WRITE_METHODS and not repo.push:
            raise ApiError(403, "Resource not accessible by personal access token")

        if not rest and method == "GET":
            return 200, self._repo_json(repo), {}
        resource = rest[0] if rest else None
        if resource == "pulls":
            return self._route_pulls(repo, rest, method, query, body, login, headers or {})
        if resource == "commits":
            return self._route_commits(repo, rest, method)
        if resource == "check-runs":
            return self._route_check_run(repo, rest, method, path, query)
        if resource == "labels":
            return self._route_labels(repo, rest, method, path, query, body)
        if resource == "issues":
            return self._route_issues(repo, rest, method, path, query, body, login)
        raise ApiError(404, "Not Found")

    def _route_labels(
        self,
        repo: _Repo,
        rest: list[str],
        method: str,
        path: str,
        query: dict[str, list[str]],
        body: Any,
    ) -> tuple[int, Any, dict[str, str]]:
        if rest == ["labels"]:
            if method == "GET":
                labels = [self._label_json(repo, lb) for lb in repo.labels.values()]
                return self._paginate(labels, path, query)
            if method == "POST":
                return 201, self._create_label(repo, body), {}
        if len(rest) == 2 and method == "GET":
            label = repo.labels.get(rest[1].lower())
            if label is None:
                raise ApiError(404, "Not Found")
            return 200, self._label_json(repo, label), {}
        raise ApiError(404, "Not Found")

    def _route_issues(
        self,
        repo: _Repo,
        rest: list[str],
        method: str,
        path: str,
        query: dict[str, list[str]],
        body: Any,
        login: str,
    ) -> tuple[int, Any, dict[str, str]]:
        if rest == ["issues"]:
            if method == "GET":
                return self._list_issues(repo, path, query)
            if method == "POST":
                return 201, self._create_issue(repo, body, login), {}
        if len(rest) >= 2 and rest[1].isdigit():
            issue = self._addressable_issue(repo, int(rest[1]))
            return self._route_issue(repo, issue, rest[2:], method, path, query, body, login)
        raise ApiError(404, "Not Found")

    def _route_issue(
        self,
        repo: _Repo,
        issue: _Issue,
        sub: list[str],
        method: str,
        path: str,
        query: dict[str, list[str]],
        body: Any,
        login: str,
    ) -> tuple[int, Any, dict[str, str]]:
        """``/issues/{n}`` and what is under it (``sub``)."""
        if not sub:
            if method == "GET":
                return 200, self._issue_json(repo, issue), {}
            if method == "PATCH":
                return 200, self._patch_issue(repo, issue, body), {}
        elif sub == ["labels"]:
            return self._issue_labels(repo, issue, method, body, path, query)
        elif len(sub) == 2 and sub[0] == "labels" and method == "DELETE":
            return 200, self._remove_issue_label(repo, issue, sub[1]), {}
        elif sub == ["comments"]:
            if method == "GET":
                return self._list_comments(repo, issue, path, query)
            if method == "POST":
                text = _field(body, "body", str, required=True, resource="IssueComment")
                return 201, self._add_comment(repo, issue, text, login), {}
        raise ApiError(404, "Not Found")

    def _remove_issue_label(self, repo: _Repo, issue: _Issue, name: str) -> list[dict[str, Any]]:
        key = name.lower()
        if key not in issue.labels:
            raise ApiError(404, "Label does not exist")
        issue.labels.remove(key)
        issue.updated_at = self._now()
        return [self._label_json(repo, repo.labels[k]) for k in issue.labels]

    def _list_comments(
        self, repo: _Repo, issue: _Issue, path: str, query: dict[str, list[str]]
    ) -> tuple[int, Any, dict[str, str]]:
        since = self._since(query)
        comments = [
            self._comment_json(repo, c)
            for c in repo.comments
            if c.number == issue.number and (since is None or c.updated_at >= since)
        ]
        return self._paginate(comments, path, query)

    def _rate_limit_json(self) -> dict[str, Any]:
        remaining = max(0, self._rate_limit - self._rate_used)
        core = {
            "limit": self._rate_limit,
            "used": self._rate_used,
            "remaining": remaining,
            "reset": int(self._rate_reset),
        }
        search = {"limit": 30, "used": 0, "remaining": 30, "reset": int(self._epoch()) + 60}
        return {"resources": {"core": core, "search": search}, "rate": core}

    def _live_issue(self, repo: _Repo, number: int) -> _Issue:
        issue = repo.issues.get(number)
        if issue is None or issue.deleted or issue.moved_to is not None:
            raise ApiError(404, "Not Found")
        return issue

    def _addressable_issue(self, repo: _Repo, number: int) -> _Issue:
        issue = repo.issues.get(number)
        if issue is None:
            raise ApiError(404, "Not Found")
        if issue.deleted:
            raise ApiError(410, "This issue was deleted")
        if issue.moved_to is not None:
            raise ApiError(
                301,
                "Moved Permanently",
                headers={"Location": issue.moved_to},
                extra={"url": issue.moved_to},
            )
        return issue

    def _since(self, query: dict[str, list[str]]) -> datetime | None:
        raw = _first(query, "since")
        if not raw:
            return None
        try:
            return _parse_time(raw)
        except ValueError:
            raise ApiError(
                422,
                "Validation Failed",
                errors=[{"resource": "Issue", "code": "invalid", "field": "since"}],
            ) from None

    def _list_issues(
        self, repo: _Repo, path: str, query: dict[str, list[str]]
    ) -> tuple[int, Any, dict[str, str]]:
        state = _first(query, "state") or "open"
        sort = _first(query, "sort") or "created"
        direction = _first(query, "direction") or "desc"
        if state not in ("open", "closed", "all"):
            raise _invalid("state")
        if sort not in ("created", "updated", "comments"):
            raise _invalid("sort")
        if direction not in ("asc", "desc"):
            raise _invalid("direction")
        since = self._since(query)
        creator = _first(query, "creator")
        wanted = [n.strip().lower() for n in (_first(query, "labels") or "").split(",") if n]
        items = [
            i
            for i in repo.issues.values()
            if not i.deleted
            and i.moved_to is None
            and (state == "all" or i.state == state)
            and (since is None or i.updated_at >= since)
            and (creator is None or i.user.lower() == creator.lower())
            and all(w in i.labels for w in wanted)
        ]

        def key(i: _Issue) -> tuple[Any, int]:
            value: Any = {"created": i.created_at, "updated": i.updated_at}.get(sort, i.comments)
            return value, i.number

        items.sort(key=key, reverse=direction == "desc")
        return self._paginate([self._issue_json(repo, i) for i in items], path, query)

    def _paginate(
        self, items: list[dict[str, Any]], path: str, query: dict[str, list[str]]
    ) -> tuple[int, Any, dict[str, str]]:
        try:
            per_page = int(_first(query, "per_page") or self._per_page_default)
        except ValueError:
            per_page = self._per_page_default
        per_page = min(100, max(1, per_page))
        after = _first(query, "after")
        if after is not None:
            try:
                offset = int(base64.urlsafe_b64decode(after.encode()).decode().split(":")[1])
            except (ValueError, IndexError):
                raise _invalid("after") from None
            page = offset // per_page + 1
        else:
            try:
                page = max(1, int(_first(query, "page") or 1))
            except ValueError:
                page = 1
            offset = (page - 1) * per_page
        chunk = items[offset : offset + per_page]
        last = max(1, math.ceil(len(items) / per_page))
        links: list[str] = []

        def link(rel: str, **params: str) -> None:
            q = {k: v[0] for k, v in query.items() if k not in ("page", "after")}
            q.update(params)
            links.append(f'<{self.url}{path}?{urlencode(q)}>; rel="{rel}"')

        if self._cursor_links:
            if offset + per_page < len(items):
                cursor = base64.urlsafe_b64encode(f"cursor:{offset + per_page}".encode())
                link("next", per_page=str(per_page), after=cursor.decode())
        else:
            if page > 1:
                link("prev", page=str(page - 1))
            if page < last:
                link("next", page=str(page + 1))
                link("last", page=str(last))
            if page > 1:
                link("first", page="1")
        return 200, chunk, ({"Link": ", ".join(links)} if links else {})

    def _label_names(self, repo: _Repo, value: Any, *, resource: str = "Issue") -> list[str]:
        if isinstance(value, dict) and "labels" in value:
            value = value["labels"]
        if not isinstance(value, list):
            raise _invalid("labels", resource)
        names: list[str] = []
        for item in value:
            name = item.get("name") if isinstance(item, dict) else item
            if not isinstance(name, str) or not name.strip():
                raise _invalid("labels", resource)
            names.append(name)
        keys: list[str] = []
        for name in names:
            key = self._ensure_label(repo, name)
            if key not in keys:
                keys.append(key)
        return keys

    def _create_issue(self, repo: _Repo, body: Any, login: str) -> dict[str, Any]:
        title = _field(body, "title", (str, int), required=True, resource="Issue")
        text = _field(body, "body", str, resource="Issue")
        labels = self._label_names(repo, body["labels"]) if "labels" in body else []
        now = self._now()
        issue = _Issue(
            id=self._next_id(),
            number=repo.next_number,
            title=str(title),
            body=text,
            user=login,
            state="open",
            state_reason=None,
            labels=labels,
            created_at=now,
            updated_at=now,
            closed_at=None,
        )
        repo.issues[issue.number] = issue
        repo.next_number += 1
        return self._issue_json(repo, issue)

    def _patch_issue(self, repo: _Repo, issue: _Issue, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise ApiError(400, "Problems parsing JSON")
        before = self._issue_json(repo, issue)
        if "title" in body:
            title = _field(body, "title", (str, int), resource="Issue")
            if title is None or str(title) == "":
                raise _invalid("title")
            issue.title = str(title)
        if "body" in body:
            issue.body = _field(body, "body", str, resource="Issue")
        reason = body.get("state_reason")
        if reason is not None and reason not in STATE_REASONS:
            raise _invalid("state_reason")
        if "state" in body:
            state = body["state"]
            if state not in ("open", "closed"):
                raise _invalid("state")
            if state != issue.state:
                issue.state = state
                if state == "closed":
                    issue.state_reason = reason if reason not in (None, "reopened") else "completed"
                    issue.closed_at = self._now()
                else:
                    issue.state_reason = "reopened"
                    issue.closed_at = None
        if "labels" in body:
            issue.labels = self._label_names(repo, body["labels"])
        if self._issue_json(repo, issue) != before:
            issue.updated_at = self._now()
        return self._issue_json(repo, issue)

    def _issue_labels(
        self,
        repo: _Repo,
        issue: _Issue,
        method: str,
        body: Any,
        path: str,
        query: dict[str, list[str]],
    ) -> tuple[int, Any, dict[str, str]]:
        if method == "GET":
            return self._paginate(
                [self._label_json(repo, repo.labels[k]) for k in issue.labels], path, query
            )
        before = list(issue.labels)
        if method == "DELETE":
            issue.labels = []
        elif method in ("PUT", "POST"):
            keys = self._label_names(repo, body if body is not None else [])
            if method == "PUT":
                issue.labels = keys
            else:
                issue.labels += [k for k in keys if k not in issue.labels]
        else:
            raise ApiError(404, "Not Found")
        if issue.labels != before:
            issue.updated_at = self._now()
        if method == "DELETE":
            return 204, None, {}
        return 200, [self._label_json(repo, repo.labels[k]) for k in issue.labels], {}

    def _create_label(self, repo: _Repo, body: Any) -> dict[str, Any]:
        name = _field(body, "name", str, required=True, resource="Label")
        color = _field(body, "color", str, resource="Label") or "ededed"
        description = _field(body, "description", str, resource="Label")
        color = color.lstrip("#")
        if len(color) != 6 or any(c not in "0123456789abcdefABCDEF" for c in color):
            raise _invalid("color", "Label")
        if not name.strip():
            raise _invalid("name", "Label")
        if name.lower() in repo.labels:
            raise ApiError(
                422,
                "Validation Failed",
                errors=[{"resource": "Label", "code": "already_exists", "field": "name"}],
            )
        label = _Label(self._next_id(), name, color.lower(), description)
        repo.labels[name.lower()] = label
        return self._label_json(repo, label)

    def _add_comment(self, repo: _Repo, issue: _Issue, body: str, login: str) -> dict[str, Any]:
        now = self._now()
        comment = _Comment(self._next_id(), issue.number, body, login, now, now)
        repo.comments.append(comment)
        issue.comments += 1
        issue.updated_at = now
        return self._comment_json(repo, comment)


def _first(query: dict[str, list[str]], name: str) -> str | None:
    values = query.get(name)
    return values[0] if values else None


def _invalid(name: str, resource: str = "Issue") -> ApiError:
    return ApiError(
        422,
        "Validation Failed",
        errors=[{"resource": resource, "code": "invalid", "field": name}],
    )


def _not_mergeable(message: str = "Pull Request is not mergeable") -> ApiError:
    return ApiError(405, message)


def _merge_message(
    repo: _Repo,
    issue: _Issue,
    pull: PullState,
    method: str,
    commit_title: str | None,
    commit_message: str | None,
) -> str:
    """The commit message of a merge by ``method``, as GitHub words it by default."""
    if method == "merge":
        source = f"{repo.owner}/{pull.head}"
        title = commit_title or f"Merge pull request #{issue.number} from {source}"
        text = issue.title if commit_message is None else commit_message
    else:
        title = commit_title or f"{issue.title} (#{issue.number})"
        text = commit_message or ""
    return f"{title}\n\n{text}" if text else title


def _land_or_refuse(git_dir: str, pull: PullState, method: str, message: str) -> str:
    """Land ``pull`` on its base branch in ``git_dir``: the new tip of the base."""
    new = _git_or_500(land, git_dir, method, pull.base_sha, pull.head_sha, message)
    if new is None:
        raise _not_mergeable("Merge conflict")
    if not _git_or_500(update_ref, git_dir, f"refs/heads/{pull.base}", new, pull.base_sha):
        raise ApiError(405, "Base branch was modified. Review and try the merge again.")
    return new


def _git_or_500(run: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
    """A git step of the fake; a failure it does not expect is a 500 naming the command."""
    try:
        return run(*args, **kwargs)
    except GitError as exc:
        raise ApiError(500, f"the fake GitHub's git failed: {exc}") from None


def _field(
    body: Any,
    name: str,
    types: type | tuple[type, ...],
    *,
    required: bool = False,
    resource: str,
) -> Any:
    if not isinstance(body, dict):
        raise ApiError(400, "Problems parsing JSON")
    if name not in body or body[name] is None:
        if required:
            raise ApiError(
                422,
                "Validation Failed",
                errors=[{"resource": resource, "code": "missing_field", "field": name}],
            )
        return None
    value = body[name]
    if not isinstance(value, types) or isinstance(value, bool):
        raise _invalid(name, resource)
    return value


def _etag_matches(header: str | None, etag: str) -> bool:
    if not header:
        return False

    def bare(tag: str) -> str:
        tag = tag.strip()
        return tag[2:] if tag.startswith("W/") else tag

    return any(t.strip() == "*" or bare(t) == bare(etag) for t in header.split(","))


# --------------------------------------------------------------------------------------------
# The fake in another process


class RemoteFakeGitHub(ControlAPI):
    """Controls a fake that runs elsewhere (``python -m tests.github_fake.server``) over HTTP."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")
        parts = urlsplit(self.url)
        self.root_url = f"{parts.scheme}://{parts.netloc}"
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def _call(self, op: str, **kwargs: Any) -> Any:
        request = urllib.request.Request(
            f"{self.root_url}/_control/{op}",
            data=json.dumps(kwargs).encode(),
            method="POST",
            headers={"Content-Type": "application/json"},
        )
        try:
            with self._opener.open(request, timeout=30) as response:
                return json.loads(response.read())["result"]
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode("utf-8", "replace")
            exc.close()
            raise ValueError(f"control {op} failed: {exc.code} {detail}") from None

    def health(self) -> dict[str, Any]:
        """``GET /_control/health``: ok, url, token, login and the default repo."""
        with self._opener.open(f"{self.root_url}/_control/health", timeout=10) as response:
            return dict(json.loads(response.read()))

    def ping(self) -> bool:
        try:
            return bool(self.health().get("ok"))
        except OSError:
            return False

    @property
    def token(self) -> str:
        return str(self.health()["token"])

    @property
    def login(self) -> str:
        return str(self.health()["login"])

    @property
    def repo(self) -> str:
        return str(self.health()["repo"])


class FakeGitHubProcess(RemoteFakeGitHub):
    """Starts the fake as a child process; the URL is read from its first line of output."""

    def __init__(
        self,
        *,
        token: str = DEFAULT_TOKEN,
        login: str = DEFAULT_LOGIN,
        repos: Sequence[str] = (DEFAULT_REPO,),
        port: int = 0,
        path_prefix: str = "",
        startup_timeout: float = 20.0,
    ) -> None:
        self._args = [sys.executable, "-m", "tests.github_fake.server", "--port", str(port)]
        self._args += ["--token", token, "--login", login, "--prefix", path_prefix]
        for repo in repos:
            self._args += ["--repo", repo]
        self._startup_timeout = startup_timeout
        self.process: subprocess.Popen[str] | None = None
        super().__init__("http://127.0.0.1:0")

    def start(self) -> Self:
        self.process = subprocess.Popen(
            self._args,
            cwd=PROJECT_ROOT,
            stdout=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        assert self.process.stdout is not None
        lines: list[str] = []
        reader = threading.Thread(
            target=lambda: lines.append(self.process.stdout.readline()),  # type: ignore[union-attr]
            daemon=True,
        )
        reader.start()
        reader.join(self._startup_timeout)
        if not lines or not lines[0].startswith("http"):
            self.stop()
            raise RuntimeError(f"the fake GitHub did not start: {lines!r}")
        RemoteFakeGitHub.__init__(self, lines[0].strip())
        return self

    @property
    def pid(self) -> int:
        if self.process is None:
            raise RuntimeError("not started")
        return self.process.pid

    def kill(self) -> None:
        """SIGKILL the fake (to test a GitHub that vanishes)."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None:
            return
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
        if process.stdout is not None:
            process.stdout.close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


@contextlib.contextmanager
def running_fake(**kwargs: Any) -> Iterator[FakeGitHub]:
    """``with running_fake() as gh:`` — the in-process fake, started and stopped."""
    with FakeGitHub(**kwargs) as fake:
        yield fake


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="A fake GitHub REST API for tests.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--token", default=DEFAULT_TOKEN)
    parser.add_argument("--login", default=DEFAULT_LOGIN)
    parser.add_argument("--repo", action="append", help="owner/name (repeatable)")
    parser.add_argument("--prefix", default="", help="API path prefix, e.g. /api/v3")
    args = parser.parse_args(argv)

    fake = FakeGitHub(
        token=args.token,
        login=args.login,
        repos=args.repo or (DEFAULT_REPO,),
        host=args.host,
        port=args.port,
        path_prefix=args.prefix,
    )
    done = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        done.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    with fake:
        print(fake.url, flush=True)
        while not done.wait(0.5):
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
