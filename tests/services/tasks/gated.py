"""A repository whose one quality gate runs until the test releases it: gates that run as
long as a test needs, with no sleep."""

from __future__ import annotations

import json
from pathlib import Path

from tests.services.coding.gaterepo import PY
from tests.services.workspaces.gitrepo import make_repo

# Runs until the file its first argument names exists: passes if it says "pass".
WAIT = """\
import pathlib, sys, time
release = pathlib.Path(sys.argv[1])
deadline = time.time() + 50
while not release.exists() and time.time() < deadline:
    time.sleep(0.02)
sys.exit(0 if release.exists() and release.read_text() == "pass" else 1)
"""


class Gated:
    """A repository whose one gate runs until ``release`` is called."""

    def __init__(self, root: Path) -> None:
        self.flag = root / "release"
        toml = f'[gates.wait]\ncommand = [{PY}, "checks/wait.py", {json.dumps(str(self.flag))}]\n'
        self.repo = make_repo(
            root / "app",
            {"workq.toml": toml + "timeout = 60\n", "checks/wait.py": WAIT, "src/app.py": "x\n"},
        )

    def release(self, word: str = "pass") -> None:
        release(self.flag, word)


def release(flag: Path, word: str) -> None:
    """Let a ``WAIT`` gate waiting on ``flag`` end, passing if ``word`` is "pass". Whole or
    not at all: the gate, polling, could read a file created but not yet written (it then
    failed: CI saw it once)."""
    ready = flag.with_name(flag.name + ".new")
    ready.write_text(word)
    ready.replace(flag)
