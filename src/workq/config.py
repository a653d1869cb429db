"""Settings from the environment and flags, resolved once and passed down."""

from __future__ import annotations

from pathlib import Path

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_DB_FILE = "autopilot.db"


class Settings(BaseSettings):
    """Everything workq reads from its environment. Flags override by keyword."""

    model_config = SettingsConfigDict(extra="ignore", populate_by_name=True)

    db_path: Path = Field(
        default=Path(DEFAULT_DB_FILE),
        validation_alias=AliasChoices("WORKQ_DB", "ISSUES_DB", "db_path"),
        description="The SQLite file (seed 002's ISSUES_DB)",
    )
    database_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices("WORKQ_DATABASE_URL", "database_url"),
        description="A SQLAlchemy URL; overrides db_path (PostgreSQL)",
    )
    lease_seconds: int = Field(
        default=30 * 60,
        ge=5,
        le=7 * 24 * 3600,
        validation_alias=AliasChoices("WORKQ_LEASE_SECONDS", "lease_seconds"),
    )
    busy_timeout_ms: int = Field(
        default=10_000,
        ge=100,
        validation_alias=AliasChoices("WORKQ_BUSY_TIMEOUT_MS", "busy_timeout_ms"),
    )
    pool_size: int = Field(
        default=5,
        ge=1,
        le=100,
        validation_alias=AliasChoices("WORKQ_POOL_SIZE", "pool_size"),
        description="Connections a process keeps open to a database server",
    )
    pool_max_overflow: int = Field(
        default=10,
        ge=0,
        le=200,
        validation_alias=AliasChoices("WORKQ_POOL_MAX_OVERFLOW", "pool_max_overflow"),
        description="Extra connections opened under load, closed when returned",
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
    synchronous: str = Field(
        default="NORMAL",
        pattern="^(NORMAL|FULL)$",
        validation_alias=AliasChoices("WORKQ_SYNCHRONOUS", "synchronous"),
    )
    run_id: str | None = Field(
        default=None, validation_alias=AliasChoices("WORKQ_RUN_ID", "run_id")
    )
    plans_dir: Path = Field(
        default=Path("plans"), validation_alias=AliasChoices("WORKQ_PLANS_DIR", "plans_dir")
    )
    toolsets: str = Field(
        default="default", validation_alias=AliasChoices("WORKQ_TOOLSETS", "toolsets")
    )
    token: str | None = Field(default=None, validation_alias=AliasChoices("WORKQ_TOKEN", "token"))
    auto_migrate: bool = Field(
        default=True,
        validation_alias=AliasChoices("WORKQ_AUTO_MIGRATE", "auto_migrate"),
        description="Bring an embedded SQLite file to head on first use",
    )

    @property
    def url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite:///{self.db_path}"

    @property
    def is_sqlite(self) -> bool:
        return self.url.startswith("sqlite")


def load_settings(**overrides: object) -> Settings:
    """Settings from the environment, with the non-None overrides (from flags) on top."""
    given = {k: v for k, v in overrides.items() if v is not None}
    return Settings(**given)  # type: ignore[arg-type]
