"""stdin and stdout read and written on the event loop, when both are pipes or sockets.

The SDK's stdio transport reads each line and writes each answer (a write, then a flush)
through anyio's file wrapper, each a call on a worker thread: three hand-overs between
threads per tool call. On a 2-core VM one costs about 0.14 ms, and together they were
about 40% of a no-op call's round trip. An MCP client starts its server with pipes (or a
socket pair), which the event loop can watch itself; so workq hands the SDK's transport
streams that do no thread hop. Anything else (a terminal, a regular file, a loop that is
not asyncio's) keeps the SDK's own streams.

As the SDK does with its own streams, fd 0 and fd 1 point elsewhere while serving (the
null device, stderr), so a stray print or a child process cannot write into the protocol;
they are pointed back at the wire, blocking again, at the end.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import stat
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Self

# A line may be as long as the client sends (the SDK's reader has no bound either); past
# this, reading pauses until the line is taken.
LINE_LIMIT = 1 << 30
# At the end, how long answers still queued are given to reach a client that reads no more.
CLOSE_SECONDS = 10.0


class Lines:
    """The read side: one decoded line per ``async for`` step, as the SDK's text reader
    gives them (bad UTF-8 replaced; the last line may lack its newline)."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> str:
        try:
            line = await self._reader.readline()
        except ConnectionError:
            line = b""
        if not line:
            raise StopAsyncIteration
        return line.decode("utf-8", "replace")


class Answers:
    """The write side: ``write`` queues on the loop's transport, ``flush`` waits while the
    pipe is full. Once the client has closed its end, answers are dropped (nobody can read
    them) and serving goes on until its input ends."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    async def write(self, text: str) -> None:
        if not self._writer.is_closing():
            self._writer.write(text.encode())

    async def flush(self) -> None:
        with suppress(ConnectionError):
            await self._writer.drain()


def _watchable(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def _private(fd: int) -> int:
    """A duplicate of ``fd`` above the standard ones, closed on exec."""
    return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)


def _restore(fd: int, wire: int) -> None:
    with suppress(OSError):
        os.dup2(wire, fd)
        os.set_blocking(fd, True)


@asynccontextmanager
async def loop_pipes() -> AsyncIterator[tuple[Lines, Answers] | None]:
    """This process's stdin and stdout as event-loop streams; None where they cannot be
    (then the SDK's transport reads and writes them)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # another event loop (trio)
        loop = None
    if loop is None or not (_watchable(0) and _watchable(1)):
        yield None
        return
    wire_in, wire_out = _private(0), _private(1)
    reader = asyncio.StreamReader(limit=LINE_LIMIT, loop=loop)
    writer: asyncio.StreamWriter | None = None
    read_side: asyncio.BaseTransport | None = None
    try:
        null = os.open(os.devnull, os.O_RDONLY)
        try:
            os.dup2(null, 0)
            os.dup2(2, 1)
        finally:
            os.close(null)
        # The transports own duplicates, so that restoring fd 0 and 1 needs no reopening.
        read_side, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader, loop=loop),
            os.fdopen(os.dup(wire_in), "rb", buffering=0),
        )
        write_side, protocol = await loop.connect_write_pipe(
            # (a reader's protocol, unused for reading: it is the one that can tell when the
            # transport has closed)
            lambda: asyncio.StreamReaderProtocol(asyncio.StreamReader(loop=loop), loop=loop),
            os.fdopen(os.dup(wire_out), "wb", buffering=0),
        )
        writer = asyncio.StreamWriter(write_side, protocol, None, loop)
        yield Lines(reader), Answers(writer)
    finally:
        if writer is not None:
            writer.close()
            try:
                await asyncio.wait_for(writer.wait_closed(), CLOSE_SECONDS)
            except (ConnectionError, TimeoutError):
                writer.transport.abort()
        if read_side is not None:
            read_side.close()
        _restore(0, wire_in)
        _restore(1, wire_out)
        os.close(wire_in)
        os.close(wire_out)
