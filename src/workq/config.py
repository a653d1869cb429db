"""Settings from the environment and flags, resolved once and passed down.

Every setting reads ``WORKQ_<NAME>``; the few whose variable is spelled otherwise (the
SQLite file, the two timeouts) name it. A bad value is one InvalidInput naming the variable
(or the flag) and what it accepts.
"""

from __future__ import annotations

import os
import typing
from pathlib import Path
from typing import Any, Literal

from pydantic import AliasChoices, Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from workq.errors import InvalidInput

DEFAULT_DB_FILE = "autopilot.db"

# The flags that set a setting, to name the one a caller typed when its value is bad.
FLAGS = {
    "db_path": "--db",
    "database_url": "--database-url",
    "token": "--token",
    "token_file": "--token-file",
    "toolsets": "--toolsets",
    "profiles": "--profile",
    "run_id": "--run-id",
    "github_repo": "--github-repo",
    "tests_gate": "--tests-gate",
    "default_gates": "--default-gates",
}


def token_word(value: str) -> str:
    """A token as given, trimmed: one word of printable characters.

    Raises:
        ValueError: empty, or a space, newline or control character inside (an HTTP
            header cannot carry it; it is a pasting mistake).
    """
    value = value.strip()
    if not value or not value.isprintable() or any(c.isspace() for c in value):
        raise ValueError("a token is one word of printable characters")
    return value


class Settings(BaseSettings):
    """Everything workq reads from its environment. Flags override by keyword."""

    model_config = SettingsConfigDict(env_prefix="WORKQ_", extra="ignore", populate_by_name=True)

    db_path: Path = Field(
        default=Path(DEFAULT_DB_FILE),
        validation_alias=AliasChoices("WORKQ_DB", "ISSUES_DB", "db_path"),
        description="The SQLite file (ISSUES_DB, as in the MCP contract)",
    )
    database_url: str | None = Field(
        default=None, description="A SQLAlchemy URL; overrides db_path (PostgreSQL)"
    )
    lease_seconds: int = Field(default=30 * 60, ge=5, le=7 * 24 * 3600)
    # How long a merge into a repository may hold its merge lease (a killed merger's
    # lease expires after this).
    merge_lease_seconds: int = Field(default=120, ge=1, le=24 * 3600)
    # File reservations: "enforce" skips (and refuses) claims whose paths another holder
    # reserved; "warn" claims anyway and says so (services/queue/reservations.py).
    reservations: Literal["enforce", "warn"] = "enforce"
    # The tests gate: "evidence" accepts advance_workflow(testsPassed=true) and merges only
    # on stored quality gate runs for the commit (or runs the gates then); "trust" takes
    # the agent's word, as before (services/coding/gates.py).
    tests_gate: Literal["evidence", "trust"] = "evidence"
    # The gates of a repository without a gate table: none, or a preset of domain/gates.py.
    default_gates: Literal["none", "strict", "pytest"] = "none"
    busy_timeout_ms: int = Field(default=10_000, ge=100, le=600_000)
    pool_size: int = Field(
        default=5, ge=1, le=100, description="Connections a process keeps open to a server"
    )
    pool_max_overflow: int = Field(
        default=10, ge=0, le=200, description="Extra connections opened under load"
    )
    pool_timeout_s: float = Field(
        default=10.0,
        gt=0,
        le=300,
        validation_alias=AliasChoices("WORKQ_POOL_TIMEOUT", "pool_timeout_s"),
        description="How long a call waits for a free connection before DATABASE_BUSY",
    )
    connect_timeout_s: int = Field(
        default=5,
        ge=2,
        le=120,
        validation_alias=AliasChoices("WORKQ_CONNECT_TIMEOUT", "connect_timeout_s"),
        description="How long to wait for a database server to accept a connection",
    )
    synchronous: Literal["NORMAL", "FULL"] = "NORMAL"
    run_id: str | None = None
    # None: the database's own place (``plans_folder``).
    plans_dir: Path | None = None
    toolsets: str = "default"
    # Other systems' contracts by their own tool names (server/toolsets.py PROFILES).
    profiles: str = Field(
        default="", validation_alias=AliasChoices("WORKQ_PROFILE", "WORKQ_PROFILES", "profiles")
    )
    token: str | None = None
    token_file: Path | None = Field(
        default=None,
        description="A file whose first line is the token (keeps it out of the process list)",
    )
    github_repo: str | None = Field(
        default=None, description="OWNER/NAME for the GitHub tools (else mirror, else git remote)"
    )
    cache_dir: Path | None = Field(
        default=None,
        description="Caches outside a git repository (default $XDG_CACHE_HOME/workq)",
    )
    watch_seconds: float = Field(
        default=30.0,
        ge=0.05,
        le=3600,
        description="How often a server looks for stalled claims, lapsed leases and a "
        "drained queue (services/notices/watch.py)",
    )
    auto_migrate: bool = Field(
        default=True, description="Bring an embedded SQLite file to head on first use"
    )

    @field_validator("token", mode="before")
    @classmethod
    def _one_word(cls, value: Any) -> Any:
        return token_word(value) if isinstance(value, str) else value

    @field_validator("db_path", "database_url", mode="before")
    @classmethod
    def _not_empty(cls, value: Any) -> Any:
        if isinstance(value, str | Path) and not str(value).strip():
            raise ValueError("empty")
        return value

    @property
    def url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite:///{self.db_path}"

    @property
    def plans_folder(self) -> Path:
        """Where plan files go: ``WORKQ_PLANS_DIR`` when set; else ``plans/`` in the SQLite
        file's own folder (``plans/<slug>.md`` beside ``autopilot.db``, as in contract A), never in
        the folder a client happens to start the server in; for a server database,
        ``plans`` in the working folder."""
        if self.plans_dir is not None:
            return self.plans_dir
        if self.database_url or str(self.db_path) == ":memory:":
            return Path("plans")
        return self.db_path.expanduser().parent / "plans"

    @property
    def cache_folder(self) -> Path:
        """Where workq keeps caches that belong to no git repository (the docs index of a
        folder outside git)."""
        if self.cache_dir is not None:
            return self.cache_dir.expanduser()
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        return Path(base) / "workq"

    @property
    def is_sqlite(self) -> bool:
        return self.url.startswith("sqlite")


def load_settings(**overrides: object) -> Settings:
    """Settings from the environment, with the non-None overrides (from flags) on top."""
    given = {k: v for k, v in overrides.items() if v is not None}
    try:
        settings = Settings(**given)  # type: ignore[arg-type]
    except ValidationError as exc:
        raise _explain(exc, given) from None
    if settings.token is None and settings.token_file is not None:
        settings.token = _read_token(settings.token_file, "token_file" in given)
    return settings


def _read_token(path: Path, flag: bool) -> str:
    """The first line of the token file, one word. (Never printed: errors name the file.)"""
    where = "--token-file" if flag else "WORKQ_TOKEN_FILE"
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeError) as exc:
        raise InvalidInput(
            f"{where}: cannot read {path}: {getattr(exc, 'strerror', None) or exc}",
            hint=f"{where} takes a readable file whose first line is the token",
            setting="token_file",
        ) from None
    try:
        return token_word(lines[0] if lines else "")
    except ValueError:
        raise InvalidInput(
            f"{where}: the first line of {path} is not a token",
            hint="a token is one word of printable characters",
            setting="token_file",
        ) from None


def variables(name: str) -> list[str]:
    """The environment variables that set the setting ``name``."""
    field = Settings.model_fields[name]
    alias = field.validation_alias
    if isinstance(alias, AliasChoices):
        return [str(a) for a in alias.choices if str(a).isupper()]
    return [f"WORKQ_{name.upper()}"]


def accepted(name: str) -> str:
    """What the setting ``name`` accepts, in words."""
    field = Settings.model_fields[name]
    if field.annotation is bool:
        return "true or false"
    choices = typing.get_args(field.annotation) if typing.get_origin(field.annotation) else ()
    if choices and all(isinstance(c, str) for c in choices):  # a Literal of words
        return " or ".join([", ".join(choices[:-1]), choices[-1]] if len(choices) > 1 else choices)
    if name == "token":
        return "one word of printable characters (no space, newline or control character)"
    if name == "db_path":
        return "a SQLite file's path, not an empty value"
    if name == "database_url":
        return "a URL such as postgresql+psycopg://USER:PASSWORD@HOST/DB; unset it for SQLite"
    low: object = None
    high: object = None
    strict = False
    for rule in field.metadata:  # pydantic's bounds: objects with ge, gt or le
        if hasattr(rule, "ge"):
            low = rule.ge
        elif hasattr(rule, "gt"):
            low, strict = rule.gt, True
        elif hasattr(rule, "le"):
            high = rule.le
    kind = "a whole number" if field.annotation is int else "a number"
    if low is None or high is None:
        return kind
    if strict:
        return f"{kind} above {low}, up to {high}"
    return f"{kind} from {low} to {high}"


def _environment() -> set[str]:
    return {key.upper() for key in os.environ}


def _explain(exc: ValidationError, given: dict[str, object]) -> InvalidInput:
    first = exc.errors()[0]
    loc = str(first["loc"][0]) if first["loc"] else ""
    name = next(
        (n for n in Settings.model_fields if loc == n or loc in variables(n)),
        loc,
    )
    if name in given and name in FLAGS:
        where = FLAGS[name]
    elif name in Settings.model_fields:
        names = variables(name)
        where = next((v for v in names if v in _environment()), " / ".join(names))
    else:
        where = loc
    value = first.get("input")
    shown = f"{value!r}" if isinstance(value, str) else str(value)
    if name == "token":  # a secret is never printed, not even a malformed one
        shown = "(hidden)"
    takes = accepted(name) if name in Settings.model_fields else "another value"
    return InvalidInput(
        f"{where}={shown} is not valid",
        hint=f"{where} takes {takes}",
        setting=name,
    )
