"""The board's Starlette application: pages rendered on the server, a change feed, and the
endpoint of the actions a person may take (board/actions.py). Every read and write goes
through the services the CLI uses."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from workq.board import actions, graph
from workq.board.auth import COOKIE, Guard
from workq.board.feed import ChangeFeed
from workq.board.markdown import render
from workq.domain import dates
from workq.domain.authority import Authority
from workq.errors import InvalidConfirmation, InvalidInput, NotFound, Step, WorkqError
from workq.schemas import (
    FORCE_CLAIM_CONFIRMATION,
    BoardFilter,
    IssueType,
    Priority,
)
from workq.services.handle import Queue
from workq.services.notices import delivery
from workq.services.plans import plan_mode
from workq.services.queue import issues, listing, notes, overview, search
from workq.services.sync import mirror
from workq.services.workspaces import handoff, landings

HERE = Path(__file__).parent
KEEPALIVE = 15.0
ACTOR_RE = re.compile(r"^[A-Za-z0-9._@-]{1,48}$")
HISTORY_PAGE = 200
PAGE_MAX = 1_000_000
EVENT_ID_MAX = 2**62
NOTICES_FAILED_SHOWN = 5


class BadParameter(Exception):
    """A query parameter that is not a whole number in its range: 400, naming it."""

    def __init__(self, name: str, limit: int) -> None:
        super().__init__(f"{name} must be a whole number from 0 to {limit}")


def _whole(raw: str, name: str, limit: int) -> int:
    """``raw`` as a number from 0 to ``limit`` (ASCII digits only: "²" is a digit to
    Python but no number), or BadParameter."""
    if not (raw.isascii() and raw.isdigit()) or len(raw) > len(str(limit)) or int(raw) > limit:
        raise BadParameter(name, limit)
    return int(raw)


def _bad(exc: BadParameter) -> Response:
    return PlainTextResponse(str(exc), status_code=400)


_BOARD_STEPS: dict[Step, str] = {
    Step.UNBLOCK: "the Unblock button",
    Step.FORCE_CLAIM: "Force-claim",
    Step.RELEASE_ANYWAY: "the Release button",
    Step.CONFIRM: f"the confirmation '{FORCE_CLAIM_CONFIRMATION}'",
    Step.SHOW_ISSUE: "the issue's page",
}


def board_step(step: Step, facts: Mapping[str, Any]) -> str:
    """How a hint's step reads on the board: the button to press."""
    return _BOARD_STEPS.get(step, step.value)


def _error(exc: WorkqError, status: int) -> JSONResponse:
    return JSONResponse(
        {"code": exc.code, "message": exc.message, "hint": exc.hint_for(board_step)},
        status_code=status,
    )


def _status_of(exc: WorkqError) -> int:
    if isinstance(exc, NotFound):
        return 404
    if isinstance(exc, InvalidInput | InvalidConfirmation):
        return 400
    return 409


FORBIDDEN = {
    "code": "FORBIDDEN",
    "message": "this board requires its token for that",
    "hint": "log in with the board's --token / WORKQ_TOKEN, from the board's own page",
}
# Read, but not from the board's own page: no X-Workq-Board header, or another Origin.
NOT_FROM_THE_BOARD = {
    "code": "FORBIDDEN",
    "message": "actions are taken from the board's own page",
    "hint": "use the buttons of the issue's page (they send the X-Workq-Board header "
    "from the board's own origin)",
}


class Board:
    """The application's state: the queue, the guard, the templates and the feed."""

    def __init__(
        self, queue: Queue, *, token: str | None, host: str = "127.0.0.1", actor: str = "board"
    ) -> None:
        self.queue = queue
        self.guard = Guard(token, host)
        self.actor = actor
        self.env = Environment(
            loader=FileSystemLoader(HERE / "templates"),
            autoescape=select_autoescape(default=True, default_for_string=True),
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.env.filters["markdown"] = render
        self.env.filters["stamp"] = _stamp
        self.env.filters["iso"] = _iso
        self.feed = ChangeFeed(
            lambda: overview.last_change(queue),
            lambda after: overview.changes(queue, after),
            signal=queue.db.changes,
        )

    def page(self, request: Request, name: str, status: int = 200, **context: Any) -> Response:
        base = request.scope.get("root_path", "").rstrip("/")
        html = self.env.get_template(name).render(
            base=base, token_needed=bool(self.guard.token), **context
        )
        return HTMLResponse(
            html,
            status_code=status,
            headers={
                "content-security-policy": "default-src 'self'; img-src 'self' data:; "
                "style-src 'self'; script-src 'self'; frame-ancestors 'none'; "
                "base-uri 'none'; form-action 'self'",
                "x-content-type-options": "nosniff",
                "referrer-policy": "same-origin",  # "no-referrer" would send "Origin: null"
                "cache-control": "no-store",
            },
        )

    def refused(self, request: Request) -> Response:
        if not self.guard.host_ok(request):
            return Response("unknown host", status_code=403)
        return self.page(request, "login.html", status=403, failed=False)

    # Pages

    def _filters(self, request: Request) -> tuple[BoardFilter, dict[str, str]]:
        p = request.query_params
        kind = p.get("type") or None
        try:
            f = BoardFilter(
                agent=p.get("agent") or None,
                label=p.get("label") or None,
                issue_type=IssueType(kind) if kind else None,
            )
        except ValueError:
            f = BoardFilter()
        kept = {k: v for k, v in (("agent", f.agent), ("label", f.label)) if v}
        if f.issue_type:
            kept["type"] = f.issue_type.value
        return f, kept

    def _view(self, request: Request) -> dict[str, Any]:
        f, kept = self._filters(request)
        pages = {}
        for name in overview.COLUMNS:
            raw = request.query_params.get(f"page_{name}", "0")
            pages[name] = _whole(raw, f"page_{name}", PAGE_MAX)
        view = overview.view(self.queue, f, pages)
        return {
            "view": view,
            "kept": kept,
            "pages": pages,
            "types": list(IssueType),
            "count_cap": overview.COUNT_CAP,
        }

    async def home(self, request: Request) -> Response:
        if not self.guard.may_read(request):
            return self.refused(request)
        try:
            context = await asyncio.to_thread(self._view, request)
        except BadParameter as exc:
            return _bad(exc)
        context["notices"] = await asyncio.to_thread(self._notices)
        query = request.query_params.get("q", "").strip()
        found = None
        error = None
        if query:
            try:
                found = await asyncio.to_thread(search.search, self.queue, query, limit=50)
            except WorkqError as exc:
                error = exc.message
        return self.page(request, "board.html", query=query, found=found, error=error, **context)

    def _notices(self) -> dict[str, Any]:
        """The notice deliveries: counts by state, and the latest that failed."""
        return {
            "counts": delivery.counts(self.queue),
            "failed": delivery.recent(self.queue, NOTICES_FAILED_SHOWN, state="failed"),
        }

    async def columns(self, request: Request) -> Response:
        if not self.guard.may_read(request):
            return self.refused(request)
        try:
            context = await asyncio.to_thread(self._view, request)
        except BadParameter as exc:
            return _bad(exc)
        return self.page(request, "columns.html", **context)

    def _issue(self, number: int) -> dict[str, Any]:
        issue = issues.get(self.queue, number)
        linked = sorted({*issue.blocked_by, *issue.blocks})
        titles = {s.number: s for s in listing.summaries(self.queue, linked)} if linked else {}
        history = []
        after = 0
        while True:
            batch = notes.history(self.queue, number, limit=HISTORY_PAGE, after_id=after)
            history.extend(batch)
            if len(batch) < HISTORY_PAGE:
                break
            after = batch[-1].id
        return {
            "issue": issue,
            "titles": titles,
            "comments": notes.comments(self.queue, number, limit=200),
            "history": history,
            "attempts": handoff.attempts(history),
            "link": mirror.github_link(self.queue, number),
            "landing": landings.get(self.queue, number),
            "priorities": list(Priority),
            "confirmation": FORCE_CLAIM_CONFIRMATION,
            "last_event": overview.last_change(self.queue),
        }

    async def issue(self, request: Request) -> Response:
        if not self.guard.may_read(request):
            return self.refused(request)
        raw = request.path_params["number"]
        try:
            context = await asyncio.to_thread(self._issue, int(raw))
        except (WorkqError, ValueError) as exc:
            message = exc.message if isinstance(exc, WorkqError) else "not an issue number"
            return self.page(request, "missing.html", status=404, message=message)
        return self.page(request, "issue.html", **context)

    def _agents(self) -> dict[str, Any]:
        return {
            "agents": overview.agents(self.queue),
            "plans": plan_mode.list_plans(self.queue, active_only=True, limit=200),
        }

    async def agents(self, request: Request) -> Response:
        if not self.guard.may_read(request):
            return self.refused(request)
        context = await asyncio.to_thread(self._agents)
        return self.page(request, "agents.html", **context)

    async def graph_page(self, request: Request) -> Response:
        if not self.guard.may_read(request):
            return self.refused(request)
        nodes, edges, more = await asyncio.to_thread(overview.open_graph, self.queue)
        drawing = graph.layout(nodes, edges)
        return self.page(request, "graph.html", drawing=drawing, more=more)

    # Logging in

    async def login(self, request: Request) -> Response:
        if not self.guard.host_ok(request):
            return Response("unknown host", status_code=403)
        if request.method == "GET":
            return self.page(request, "login.html", failed=False)
        form = await request.form()
        given = form.get("token")
        base = request.scope.get("root_path", "").rstrip("/")
        if not isinstance(given, str) or not self.guard.login_ok(request, given):
            return self.page(request, "login.html", status=403, failed=True)
        response = RedirectResponse(f"{base}/", status_code=303)
        response.set_cookie(COOKIE, given, httponly=True, samesite="strict", path=f"{base}/")
        return response

    # The feed

    async def events(self, request: Request) -> Response:
        if not self.guard.may_read(request):
            return self.refused(request)
        # A reconnecting client says what it saw last; a page, the newest event it was
        # drawn from. Either gets what it missed, once; then the shared feed.
        last_seen = request.headers.get("last-event-id") or request.query_params.get("after", "")
        try:
            after = _whole(last_seen, "after", EVENT_ID_MAX) if last_seen else None
        except BadParameter as exc:
            return _bad(exc)
        queue = self.feed.listen()
        replay: list[Any] = []
        if after is not None:  # read once the feed knows where it starts: no gap between
            with contextlib.suppress(TimeoutError):  # a feed that cannot read: replay anyway
                await asyncio.wait_for(self.feed.started.wait(), KEEPALIVE)
            replay = await asyncio.to_thread(overview.changes, self.queue, after)

        async def stream() -> AsyncIterator[str]:
            try:
                yield "retry: 1000\n\n"
                if replay:
                    yield _sse(replay)
                while True:
                    try:
                        batch = await asyncio.wait_for(queue.get(), KEEPALIVE)
                    except TimeoutError:
                        yield ": keepalive\n\n"
                        continue
                    yield _sse(batch)
            finally:
                self.feed.leave(queue)

        return StreamingResponse(
            stream(),
            media_type="text/event-stream",
            headers={"cache-control": "no-store", "x-accel-buffering": "no"},
        )

    # Actions

    async def act(self, request: Request) -> Response:
        if not self.guard.may_act(request):
            why = NOT_FROM_THE_BOARD if self.guard.may_read(request) else FORBIDDEN
            return JSONResponse(why, status_code=403)
        action = request.path_params["action"]
        try:
            number = int(request.path_params["number"])
            body = await request.json() if await request.body() else {}
            if not isinstance(body, dict):
                raise InvalidInput("the body must be a JSON object")
            who = request.headers.get("x-workq-actor", "")
            actor = f"board:{who}" if ACTOR_RE.match(who) else self.actor
            run = actions.ACTIONS.get(action)
            if run is None:
                raise NotFound(f"no action {action!r}", hint="see docs/board.md")
            # The board's one authority: its user, overriding (recorded as who and why).
            by = Authority.overriding(f"{action} on the board", who=actor)
            message = await asyncio.to_thread(run, self.queue, number, body, by)
        except WorkqError as exc:
            return _error(exc, _status_of(exc))
        except (ValueError, json.JSONDecodeError):
            return _error(InvalidInput("the issue number and the body must be valid"), 400)
        return JSONResponse({"ok": True, "message": message})


def _sse(batch: list[Any]) -> str:
    data = json.dumps([c.model_dump() for c in batch])
    return f"id: {batch[-1].id}\nevent: change\ndata: {data}\n\n"


def _stamp(value: datetime | None) -> str:
    return dates.stamp(value) if value else ""


def _iso(value: datetime | None) -> str:
    return dates.iso(value) if value else ""


def build_app(
    queue: Queue, *, token: str | None, host: str = "127.0.0.1", actor: str = "board"
) -> Starlette:
    """The board as an ASGI app, served on ``host``; ``serve --http`` mounts it under
    /board."""
    state = Board(queue, token=token, host=host, actor=actor)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        await state.feed.stop()

    routes: list[Route | Mount] = [
        Route("/", state.home),
        Route("/columns", state.columns),
        Route("/issues/{number}", state.issue),
        Route("/agents", state.agents),
        Route("/graph", state.graph_page),
        Route("/events", state.events),
        Route("/login", state.login, methods=["GET", "POST"]),
        Route("/api/issues/{number}/{action}", state.act, methods=["POST"]),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.board = state
    return app
