"""The `workq` command: global options, the commands, and the one error handler."""

from __future__ import annotations

import functools
import gc
import os
import sys
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from workq import __version__
from workq.cli import command, output, steps
from workq.cli.state import State
from workq.errors import InvalidInput, WorkqError

app = typer.Typer(
    name="workq",
    help="A local work queue for coding agents: issues, claims with leases, dependencies.\n\n"
    "The options below (--db, --database-url, --as, --json, -v) go before or after the command.",
    cls=command.Group,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


def _version(value: bool) -> None:
    if value:
        output.line(f"workq {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    db: Annotated[
        Path | None,
        typer.Option(
            "--db", help="The SQLite file (env ISSUES_DB / WORKQ_DB; default autopilot.db)."
        ),
    ] = None,
    database_url: Annotated[
        str | None,
        typer.Option(
            "--database-url",
            help="A database URL, e.g. postgresql+psycopg://... (env WORKQ_DATABASE_URL).",
        ),
    ] = None,
    actor: Annotated[
        str | None, typer.Option("--as", help="Who you are in the history (env WORKQ_ACTOR).")
    ] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Tracebacks on errors.")] = False,
    json_: Annotated[
        bool, typer.Option("--json", help="Print JSON, for the commands that print results.")
    ] = False,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print version.")
    ] = False,
) -> None:
    ctx.obj = State(db=db, database_url=database_url, verbose=verbose, actor_name=actor)
    ctx.call_on_close(ctx.obj.close)
    if json_:  # `workq --json ready` means `workq ready --json`
        ctx.default_map = _json_defaults(ctx.command)
        if ctx.invoked_subcommand not in ctx.default_map:
            raise typer.BadParameter(
                f"'workq {ctx.invoked_subcommand}' prints no JSON", param_hint="'--json'"
            )


TokenFile = Annotated[
    Path | None,
    typer.Option(
        "--token-file",
        help="Read the token from this file's first line (env WORKQ_TOKEN_FILE): unlike "
        "--token, it does not show in the process list.",
    ),
]


@app.command()
def serve(
    ctx: typer.Context,
    http: Annotated[bool, typer.Option("--http", help="Streamable HTTP instead of stdio.")] = False,
    host: Annotated[
        str | None, typer.Option(help="HTTP bind address, with --http (default 127.0.0.1).")
    ] = None,
    port: Annotated[
        int | None, typer.Option(help="HTTP port, with --http (default 8765).", min=1, max=65535)
    ] = None,
    token: Annotated[
        str | None, typer.Option(help="Bearer token required over HTTP (env WORKQ_TOKEN).")
    ] = None,
    token_file: TokenFile = None,
    workers: Annotated[
        int,
        typer.Option(
            help="With --http, answer from this many processes on one port (one core each).",
            min=1,
            max=64,
        ),
    ] = 1,
    toolsets: Annotated[
        str | None,
        typer.Option(
            help="Comma-separated toolsets, 'default' or 'all' (env WORKQ_TOOLSETS).",
        ),
    ] = None,
    profile: Annotated[
        str | None,
        typer.Option(
            "--profile",
            help="Comma-separated profiles: other systems' tools by their own names "
            "(env WORKQ_PROFILE).",
        ),
    ] = None,
    run_id: Annotated[
        str | None, typer.Option("--run-id", help="The claimer's id (env WORKQ_RUN_ID).")
    ] = None,
    migrate: Annotated[
        bool, typer.Option("--migrate", help="Migrate a server database before serving.")
    ] = False,
    board: Annotated[
        bool, typer.Option("--board", help="With --http, also serve the board under /board.")
    ] = False,
    sync_github: Annotated[
        str | None,
        typer.Option(
            "--sync-github",
            metavar="OWNER/NAME",
            help="Also mirror the queue to this GitHub repository, in the background.",
        ),
    ] = None,
    github_repo: Annotated[
        str | None,
        typer.Option(
            "--github-repo",
            metavar="OWNER/NAME",
            help="The repository of the GitHub tools (env WORKQ_GITHUB_REPO; default: "
            "the mirror's, else the git remote's).",
        ),
    ] = None,
    tests_gate: Annotated[
        str | None,
        typer.Option(
            "--tests-gate",
            metavar="evidence|trust",
            help="testsPassed=true and merges need passed quality gates on the commit "
            "(evidence, the default) or take the agent's word (trust; env WORKQ_TESTS_GATE).",
        ),
    ] = None,
    default_gates: Annotated[
        str | None,
        typer.Option(
            "--default-gates",
            metavar="none|strict|pytest",
            help="The gates of a repository with no gate table: none (the default) or a "
            "preset of `workq gates init` (env WORKQ_DEFAULT_GATES).",
        ),
    ] = None,
) -> None:
    """Serve the queue over MCP (stdio by default)."""
    from workq.server.main import serve as run_server  # only this command needs the server

    s = ctx.find_root().obj
    assert isinstance(s, State)
    settings = s.settings(
        token=token,
        token_file=token_file,
        toolsets=toolsets,
        profiles=profile,
        run_id=run_id,
        github_repo=github_repo or sync_github,
        tests_gate=tests_gate,
        default_gates=default_gates,
    )
    if not settings.is_sqlite:
        from workq.services.runtime import check_driver

        check_driver(settings)
    stop_sync = None
    if sync_github:
        from workq.github.sync import start_background_sync

        # Before the server starts: it may migrate the file, which must not overlap the
        # server's own first open. The server is offline-first: a mirror that cannot start
        # (no token, GitHub out of reach) says so on stderr and keeps trying.
        stop_sync = start_background_sync(settings, sync_github, fail_fast=False)
    try:
        run_server(
            settings,
            transport="streamable-http" if http else "stdio",
            host=host,
            port=port,
            migrate=True if migrate else None,
            board=board,
            workers=workers,
        )
    finally:
        if stop_sync is not None:
            stop_sync()


@app.command()
def board(
    ctx: typer.Context,
    host: Annotated[str | None, typer.Option(help="Bind address (default 127.0.0.1).")] = None,
    port: Annotated[int | None, typer.Option(help="Port (default 8766).", min=1, max=65535)] = None,
    token: Annotated[
        str | None,
        typer.Option(help="Token the board requires, to read and to act (env WORKQ_TOKEN)."),
    ] = None,
    token_file: TokenFile = None,
) -> None:
    """Serve the live board (a web page) on 127.0.0.1; see docs/board.md."""
    from workq.board.main import run  # only this command needs the web stack

    s = ctx.find_root().obj
    assert isinstance(s, State)
    run(s.settings(token=token, token_file=token_file), host=host, port=port)


_GLOBAL_OPTIONS_WITH_VALUES = {"--db", "--database-url", "--as"}
_GLOBAL_FLAGS = {"--verbose", "-v"}
_loaded = False


def _json_defaults(command: Any) -> dict[str, Any]:
    """A default map that turns --json on for every command that has it."""
    found: dict[str, Any] = {}
    if hasattr(command, "commands"):
        for name, sub in command.commands.items():
            inner = _json_defaults(sub)
            if inner:
                found[name] = inner
    elif any(p.name == "json_" for p in command.params):
        found["json_"] = True
    return found


def _takes_value(command: Any, option: str) -> bool | None:
    """Whether ``option`` of ``command`` consumes the next word (None: not its option)."""
    for param in getattr(command, "params", ()):
        if param.param_type_name == "option" and option in (*param.opts, *param.secondary_opts):
            return not (param.is_flag or param.count)
    return None


def hoist_global_options(root: Any, args: list[str]) -> list[str]:
    """The arguments with the global options typed after the command moved before it, so
    that `workq list --db x` means `workq --db x list`. The command's own options are
    read from its parameters, so a value such as `-d --db` stays the description.

    Not Click's own parsing: a group stops at its command's name, and with interspersed
    arguments the root would take the command's --help, --json and `-d --db`'s value."""
    head: list[str] = []
    i = 0
    while i < len(args) and args[i].startswith("-"):  # the root's own options
        step = 2 if args[i] in _GLOBAL_OPTIONS_WITH_VALUES else 1
        head += args[i : i + step]
        i += step
    command = root
    path: list[str] = []
    while i < len(args) and hasattr(command, "commands") and args[i] in command.commands:
        command = command.commands[args[i]]
        path.append(args[i])
        i += 1
    if not path:
        return args
    moved: list[str] = []
    kept: list[str] = []
    while i < len(args):
        word = args[i]
        name = word.split("=", 1)[0]
        if word == "--":
            kept += args[i:]
            break
        own = _takes_value(command, name)
        if own is None and (name in _GLOBAL_OPTIONS_WITH_VALUES or name in _GLOBAL_FLAGS):
            step = 2 if name in _GLOBAL_OPTIONS_WITH_VALUES and "=" not in word else 1
            if i + step > len(args):
                raise typer.BadParameter("requires a value", param_hint=f"'{name}'")
            moved += args[i : i + step]
        else:
            step = 2 if own and "=" not in word else 1
            kept += args[i : i + step]
        i += step
    return head + moved + path + kept


def load_commands() -> typer.Typer:
    """Register every command. `workq serve` skips this: the server imports what it needs
    itself, in the background, so an agent's client is not kept waiting at start."""
    global _loaded
    if not _loaded:
        from workq.cli import (
            claims,
            gates,
            hooks,
            issues,
            maintenance,
            notify,
            plans,
            policies,
            sync,
            work_context,
            workflow,
            workspaces,
        )

        for module in (
            issues,
            claims,
            maintenance,
            sync,
            plans,
            workflow,
            workspaces,
            hooks,
            work_context,
            gates,
            policies,
            notify,
        ):
            module.register(app)
        _loaded = True
    return app


def _command_word(args: list[str]) -> str | None:
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg in _GLOBAL_OPTIONS_WITH_VALUES:
            skip = True
        elif not arg.startswith("-"):
            return arg
    return None


@functools.cache
def click_command(*, all_commands: bool) -> Any:
    """The click command tree, built once per process (`serve` needs none of the others,
    and their imports would slow its start)."""
    if all_commands:
        load_commands()
    command.apply(app)
    return typer.main.get_command(app)


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; a workq error is one line on stderr with its code, and exit status 1."""
    args = sys.argv[1:] if argv is None else argv
    verbose = "--verbose" in args or "-v" in args
    try:
        cli = click_command(all_commands=_command_word(args) != "serve")
        code = cli.main(
            args=hoist_global_options(cli, args), prog_name="workq", standalone_mode=False
        )
    except WorkqError as exc:
        if verbose:
            raise
        said = steps.for_person(exc.describe(steps.command), _command_word(args))
        output.errors().print(f"error: {said}", markup=False)
        return 1
    except typer.Exit as exc:
        return exc.exit_code
    except typer.Abort:
        output.errors().print("Aborted.")
        return 1
    except KeyboardInterrupt:
        return 130
    except (BrokenPipeError, output.StdoutClosed):  # the reader of stdout left (| head)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (OSError, UnicodeError) as exc:  # a file named on the command line; non-UTF-8 bytes
        if verbose:
            raise
        output.errors().print(f"error: {_input_error(exc).describe()}", markup=False)
        return 1
    except typer.TyperException as exc:  # usage errors: bad option values and the like
        output.errors().print(f"error: {_usage(exc)}", markup=False)
        return int(getattr(exc, "exit_code", 2))
    return code if isinstance(code, int) else 0


def _usage(exc: Exception) -> str:
    """Click's usage error as one line: ``USAGE: message; see 'workq CMD --help'``."""
    format_message = getattr(exc, "format_message", None)
    message = " ".join((format_message() if format_message else str(exc)).split()).rstrip(".")
    plain = _plain_validation(exc.__cause__)
    if plain is not None:  # Typer's conversion said it in pydantic's words
        message = message.split(": ", 1)[0] + f": {plain}"
    ctx = getattr(exc, "ctx", None)
    where = ctx.command_path if ctx is not None else "workq"
    return f"USAGE: {message}; see '{where} --help'"


def _plain_validation(cause: BaseException | None) -> str | None:
    """A value Typer refused through pydantic, said in workq's words."""
    from pydantic import ValidationError

    from workq.errors import said_plainly

    if not isinstance(cause, ValidationError):
        return None
    return "; ".join(said_plainly(err) for err in cause.errors(include_url=False))


def _input_error(exc: OSError | UnicodeError) -> InvalidInput:
    if isinstance(exc, UnicodeError):
        return InvalidInput(
            "an argument holds bytes that are not valid UTF-8",
            hint="pass text encoded as UTF-8",
        )
    where = f"{exc.filename}: " if exc.filename else ""
    return InvalidInput(f"{where}{exc.strerror or exc}", hint="check the path and try again")


def run() -> NoReturn:
    """The ``workq`` program: ``main()``, then exit without the interpreter's last garbage
    collection over everything the command imported and built (about a second of a short
    command's life on 2 cores); the process ends, so nothing is lost by skipping it."""
    code = main()
    gc.freeze()
    sys.exit(code)


if __name__ == "__main__":
    run()
