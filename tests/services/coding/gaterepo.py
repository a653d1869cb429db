"""Git repositories whose quality gates are small Python scripts, run with this interpreter."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.services.workspaces.gitrepo import commit, make_repo

PY = json.dumps(sys.executable)  # a TOML basic string

# Prints ``file:line:col: message`` for each line holding BAD in the files it is given.
LINT = """\
import sys
bad = 0
for name in sys.argv[1:]:
    for n, line in enumerate(open(name, encoding="utf-8"), 1):
        if "BAD" in line:
            print(f"{name}:{n}:1: X001 BAD found")
            bad += 1
sys.exit(1 if bad else 0)
"""

# A pytest stand-in: fails while src/app.py says FAIL, printing pytest's summary lines.
TESTS = """\
import sys
if "FAIL" in open("src/app.py", encoding="utf-8").read():
    print("FAILED tests/test_app.py::test_app - assert 1 == 2")
    print("=== 1 failed, 2 passed in 0.01s ===")
    sys.exit(1)
print("3 passed in 0.01s")
"""

GATES_TOML = f"""\
[gates.lint]
command = [{PY}, "checks/lint.py", "{{files}}"]
files = ["src/**"]
timeout = 60

[gates.tests]
command = [{PY}, "checks/tests.py"]
timeout = 60
"""


def gated_repo(path: Path, app: str = "x = 1\n", toml: str = GATES_TOML) -> Path:
    """A repository with a lint gate and a tests gate in workq.toml."""
    return make_repo(
        path,
        {
            "workq.toml": toml,
            "checks/lint.py": LINT,
            "checks/tests.py": TESTS,
            "src/app.py": app,
            "README.md": "hello\n",
        },
    )


__all__ = ["PY", "commit", "gated_repo"]
