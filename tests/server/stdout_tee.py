"""Run a command, passing stdin through, and copy every line it writes to stdout both to
our stdout and to a file: ``python stdout_tee.py OUT_FILE COMMAND...``."""

from __future__ import annotations

import subprocess
import sys


def main() -> int:
    target, command = sys.argv[1], sys.argv[2:]
    child = subprocess.Popen(command, stdout=subprocess.PIPE)
    assert child.stdout is not None
    with open(target, "wb") as copy:
        for line in child.stdout:
            copy.write(line)
            copy.flush()
            sys.stdout.buffer.write(line)
            sys.stdout.buffer.flush()
    return child.wait()


if __name__ == "__main__":
    sys.exit(main())
