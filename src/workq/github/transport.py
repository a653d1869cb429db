"""The HTTP exchange with one GitHub API endpoint: the headers and the token, one request per
call (never retried, never slept on, never redirected), every failure turned into one of
:mod:`workq.github.failures`, the rate limit headers noted, pages followed within the API,
answers read into models.

The token is only ever placed in the ``Authorization`` header; it is never logged and never
part of an exception or ``repr``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Generic, NoReturn, TypeVar

import httpx2
from pydantic import BaseModel, TypeAdapter, ValidationError

from workq import __version__
from workq.domain import dates
from workq.github.failures import (
    AuthFailed,
    GitHubRejected,
    MovedOnGitHub,
    NotFoundOnGitHub,
    RateLimited,
    Unclear,
)
from workq.github.rate_limits import RateLimitInfo, parse_retry_after, rate_limit_retry_at

DEFAULT_API_URL = "https://api.github.com"
API_VERSION = "2022-11-28"
DEFAULT_TIMEOUT = 10.0
USER_AGENT = f"workq/{__version__}"
_LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")
_LIST_ADAPTERS: dict[type[BaseModel], TypeAdapter[Any]] = {}


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of a list. Follow ``next_url`` (exactly as GitHub gave it) for the next one.

    ``not_modified`` is True when GitHub answered 304 to ``If-None-Match``: ``items`` is then
    empty and means "no change since that ETag", not "nothing there".
    """

    items: list[T]
    next_url: str | None = None
    etag: str | None = None
    not_modified: bool = False

    @property
    def has_more(self) -> bool:
        return self.next_url is not None


class Transport:
    """Requests to one API endpoint with one token."""

    def __init__(
        self,
        token: str,
        *,
        base_url: str,
        timeout: float,
        user_agent: str,
        trust_env: bool | None,
        transport: httpx2.BaseTransport | None,
    ) -> None:
        """``trust_env``: use proxy and TLS settings from the environment; by default yes,
        except for a loopback base URL (the test fake), which must never go through a proxy.
        """
        if not token or not token.strip():
            raise ValueError("a GitHub token is required")
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self._base = httpx2.URL(self.base_url + "/")
        if trust_env is None:
            trust_env = self._base.host not in _LOOPBACK_HOSTS
        self.http = httpx2.Client(
            base_url=self._base,
            headers={
                "Accept": "application/vnd.github+json",
                "X-GitHub-Api-Version": API_VERSION,
                "User-Agent": user_agent,
                "Authorization": f"Bearer {token.strip()}",
            },
            timeout=httpx2.Timeout(timeout),
            follow_redirects=False,
            trust_env=trust_env,
            transport=transport,
        )
        self.last_rate_limit: RateLimitInfo | None = None
        """The ``x-ratelimit-*`` headers of the latest answer that had them."""

    def __repr__(self) -> str:
        return f"Transport(base_url={self.base_url!r})"

    def close(self) -> None:
        self.http.close()

    def page_url(self, url: str) -> httpx2.URL:
        """A ``Link`` URL, refused unless it points into this API (the token goes with it)."""
        target = httpx2.URL(url)
        if target.is_relative_url:
            return self._base.join(url)
        same_origin = (
            target.scheme == self._base.scheme
            and target.host == self._base.host
            and target.port == self._base.port
        )
        if not same_origin or not target.path.startswith(self._base.path):
            raise GitHubRejected(
                "refusing to follow a page link outside the API base URL",
                hint="check GITHUB_API_URL",
                link=str(target.copy_with(query=None)),
            )
        return target

    def page(
        self,
        model: type[M],
        url: str | httpx2.URL,
        params: Mapping[str, str] | None,
        etag: str | None,
    ) -> Page[M]:
        headers = {"If-None-Match": etag} if etag else None
        response = self.send("GET", url, params=params, headers=headers, allow_304=True)
        if response.status_code == 304:
            return Page([], None, response.headers.get("etag") or etag, not_modified=True)
        items = self.models(model, response)
        next_url = response.links.get("next", {}).get("url")
        return Page(items, next_url, response.headers.get("etag"))

    def send(
        self,
        method: str,
        url: str | httpx2.URL,
        *,
        params: Mapping[str, str] | None = None,
        json: Any = None,
        headers: Mapping[str, str] | None = None,
        allow_304: bool = False,
    ) -> httpx2.Response:
        request = self.http.build_request(method, url, params=params, json=json, headers=headers)
        path = request.url.raw_path.decode("ascii", "replace")
        try:
            response = self.http.send(request)
        except (httpx2.ConnectError, httpx2.ConnectTimeout) as exc:
            raise Unclear(
                f"could not connect to GitHub for {method} {path}: {type(exc).__name__}",
                maybe_applied=False,
                method=method,
                path=path,
            ) from exc
        except httpx2.PoolTimeout as exc:
            raise Unclear(
                f"no connection free for {method} {path}",
                maybe_applied=False,
                method=method,
                path=path,
            ) from exc
        except httpx2.TimeoutException as exc:
            raise Unclear(
                f"GitHub did not answer {method} {path} within {self.timeout:g} s",
                method=method,
                path=path,
            ) from exc
        except httpx2.TransportError as exc:
            raise Unclear(
                f"the connection failed during {method} {path}: {type(exc).__name__}",
                method=method,
                path=path,
            ) from exc

        rate = RateLimitInfo.from_headers(response.headers)
        if rate is not None:
            self.last_rate_limit = rate
        if 200 <= response.status_code < 300 or (allow_304 and response.status_code == 304):
            return response
        self._raise_for(method, path, response)

    def _raise_for(self, method: str, path: str, response: httpx2.Response) -> NoReturn:
        status = response.status_code
        data = _json_or_none(response)
        gh_message: str | None = None
        errors: list[Mapping[str, Any]] = []
        if isinstance(data, dict):
            if isinstance(data.get("message"), str):
                gh_message = data["message"]
            raw_errors = data.get("errors")
            if isinstance(raw_errors, list):
                errors = [e if isinstance(e, dict) else {"message": str(e)} for e in raw_errors]
        elif response.text.strip():
            gh_message = " ".join(re.sub(r"<[^>]+>", " ", response.text).split())[:200]
        facts: dict[str, Any] = {
            "method": method,
            "path": path,
            "status": status,
            "request_id": response.headers.get("x-github-request-id"),
            "github_message": gh_message,
        }
        said = f": {gh_message}" if gh_message else ""
        where = f"{method} {path}"
        now = datetime.now(UTC)

        limited = rate_limit_retry_at(status, response.headers, gh_message, now)
        if limited is not None:
            retry_at, secondary = limited
            which = "secondary" if secondary else "primary"
            raise RateLimited(
                f"GitHub {which} rate limit on {where}; retry at {dates.stamp(retry_at)}",
                retry_at=retry_at,
                secondary=secondary,
                **facts,
            )
        if status in (401, 403):
            raise AuthFailed(f"GitHub answered {status} to {where}{said}", **facts)
        if status in (404, 410):
            raise NotFoundOnGitHub(
                f"GitHub answered {status} to {where}{said}", gone=status == 410, **facts
            )
        if status in (301, 302, 303, 307, 308):
            location = response.headers.get("location")
            raise MovedOnGitHub(
                f"GitHub answered {status} to {where}: moved to {location}",
                location=location,
                **facts,
            )
        if status >= 500 or status < 200:
            raise Unclear(
                f"GitHub answered {status} to {where}{said}",
                retry_at=parse_retry_after(response.headers.get("retry-after"), now),
                **facts,
            )
        raise GitHubRejected(f"GitHub answered {status} to {where}{said}", errors=errors, **facts)

    def json(self, response: httpx2.Response) -> Any:
        try:
            return response.json()
        except ValueError as exc:
            raise Unclear(
                f"GitHub's answer to {response.request.method} was not JSON",
                method=response.request.method,
                path=response.request.url.raw_path.decode("ascii", "replace"),
                status=response.status_code,
            ) from exc

    def model(self, model: type[M], response: httpx2.Response) -> M:
        try:
            return model.model_validate(self.json(response))
        except ValidationError as exc:
            raise _unreadable(response, model.__name__) from exc

    def models(self, model: type[M], response: httpx2.Response) -> list[M]:
        adapter = _LIST_ADAPTERS.get(model)
        if adapter is None:
            adapter = _LIST_ADAPTERS[model] = TypeAdapter(list[model])  # type: ignore[valid-type]
        try:
            return list(adapter.validate_python(self.json(response)))
        except ValidationError as exc:
            raise _unreadable(response, f"list of {model.__name__}") from exc


def _unreadable(response: httpx2.Response, what: str) -> Unclear:
    return Unclear(
        f"GitHub's answer to {response.request.method} is not a {what}",
        method=response.request.method,
        path=response.request.url.raw_path.decode("ascii", "replace"),
        status=response.status_code,
    )


def _json_or_none(response: httpx2.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None
