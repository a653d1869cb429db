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
