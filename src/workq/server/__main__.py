"""``python -m workq.server``: the server without the CLI (the same flags as ``workq serve``)."""

from __future__ import annotations

import argparse
import sys

from workq.errors import WorkqError


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m workq.server", description=__doc__)
    parser.add_argument("--http", action="store_true", help="Streamable HTTP instead of stdio")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--token", help="bearer token required over HTTP (env WORKQ_TOKEN)")
    parser.add_argument("--toolsets", help="comma-separated toolsets, default or all")
    parser.add_argument("--run-id", help="the claimer's id (env WORKQ_RUN_ID)")
    parser.add_argument("--db", help="the SQLite file (env ISSUES_DB / WORKQ_DB)")
    parser.add_argument("--database-url", help="a SQLAlchemy URL (PostgreSQL)")
    parser.add_argument("--migrate", action="store_true", help="migrate a server database")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    try:
        from workq.config import load_settings
        from workq.server.main import serve

        settings = load_settings(
            db_path=args.db,
            database_url=args.database_url,
            token=args.token,
            toolsets=args.toolsets,
            run_id=args.run_id,
        )
        serve(
            settings,
            transport="http" if args.http else "stdio",
            host=args.host,
            port=args.port,
            migrate=True if args.migrate else None,
        )
    except WorkqError as exc:
        sys.stderr.write(f"error: {exc.describe()}\n")
        return 2
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
