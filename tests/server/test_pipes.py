"""stdin and stdout on the event loop (server/pipes.py), in real processes: what the wire
carries, where stray output goes, and the fallback to the SDK's threads when stdin is no
pipe."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.server.conftest import serve_argv

# Echoes each line it reads as an answer, while printing (sys.stdout and fd 1) around it;
# after serving, prints one more line, which must reach the wire again.
ECHO = """\
import os, sys, anyio
from workq.server import pipes

async def main():
    async with pipes.loop_pipes() as streams:
        if streams is None:
            print("no loop pipes", file=sys.stderr)
            return
        lines, answers = streams
        print("stray print", flush=True)
        os.write(1, b"stray write\\n")
        async for line in lines:
            await answers.write("echo " + line.rstrip("\\n") + "\\n")
            await answers.flush()
    print("blocking" if os.get_blocking(0) and os.get_blocking(1) else "non-blocking", flush=True)

anyio.run(main)
"""


def test_only_answers_reach_the_wire_and_the_fds_come_back_after() -> None:
    long_line = "x" * (1 << 20)  # longer than asyncio's default line limit (64 KiB)
    done = subprocess.run(
        [sys.executable, "-c", ECHO],
        input=f"one\n{long_line}\nlast without newline".encode(),
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().splitlines() == [
        "echo one",
        "echo " + long_line,
        "echo last without newline",
        "blocking",
    ]
    assert b"stray print\nstray write\n" in done.stderr


def test_a_file_as_stdin_is_served_by_the_sdks_transport(db: Path, tmp_path: Path) -> None:
    """A regular file cannot be watched by the event loop: ``workq serve < requests.jsonl``
    is read on a thread, as before, and every request is answered."""
    requests = tmp_path / "requests.jsonl"
    messages = [
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "file", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "issue_create", "arguments": {"title": "from a file"}},
        },
    ]
    requests.write_text("".join(json.dumps(m) + "\n" for m in messages))
    answers = tmp_path / "answers.jsonl"
    with requests.open("rb") as stdin, answers.open("wb") as stdout:
        done = subprocess.run(
            [sys.executable, *serve_argv(db=db)],
            stdin=stdin,
            stdout=stdout,
            stderr=subprocess.PIPE,
            timeout=60,
        )
    assert done.returncode == 0, done.stderr.decode()
    replies = {m["id"]: m for m in map(json.loads, answers.read_text().splitlines())}
    assert replies[1]["result"]["structuredContent"]["number"] == 1
