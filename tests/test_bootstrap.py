"""scripts/bootstrap's choice of interpreter (its ``pick_python``, run by itself with fake
interpreters first on PATH): the candidates are timed in turns, and each one's best run
counts, so a burst of load during one run does not cost the quicker build its place."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# A fake interpreter: says it is Python 3.11+ (its own path as sys.executable), and answers
# each timing with the next of its times, writing its name to the log as it is timed.
FAKE = """\
#!/bin/bash
here="$(dirname "$0")"; me="$(basename "$0")"
case "$*" in
*ensurepip*) echo "$0" ;;
*perf_counter*)
    echo "$me" >>"$here/log"
    head -n 1 "$here/$me.times"
    tail -n +2 "$here/$me.times" >"$here/$me.rest" && mv "$here/$me.rest" "$here/$me.times"
    ;;
*) exit 1 ;;
esac
"""
NOT_PYTHON = "#!/bin/bash\nexit 1\n"


def _pick_python(bin_dir: Path, **env: str) -> str:
    text = (ROOT / "scripts" / "bootstrap").read_text()
    found = re.search(r"^pick_python\(\) \{\n.*?^\}\n", text, re.MULTILINE | re.DOTALL)
    assert found is not None, "scripts/bootstrap has no pick_python function"
    done = subprocess.run(
        ["bash", "-c", found.group(0) + "pick_python"],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(bin_dir), **env},
        check=True,
    )
    return done.stdout.strip()


def _fake(bin_dir: Path, name: str, times: list[float] | None) -> Path:
    path = bin_dir / name
    path.write_text(FAKE if times is not None else NOT_PYTHON)
    path.chmod(0o755)
    if times is not None:
        (bin_dir / f"{name}.times").write_text("".join(f"{t:.6f}\n" for t in times))
    return path


def test_the_quickest_best_run_wins_and_candidates_are_timed_in_turns(tmp_path: Path) -> None:
    # python3.12 is the quicker build, but load slowed two of its three runs; python3's
    # runs are steady and slower. (The real /usr/bin/python3 is a candidate too: a real
    # run of the timing loop takes milliseconds, more than either fake's best.)
    quick = _fake(tmp_path, "python3.12", [0.9, 0.0001, 0.9])
    _fake(tmp_path, "python3", [0.005, 0.005, 0.005])
    for name in ("python3.14", "python3.13", "python3.11"):
        _fake(tmp_path, name, None)
    assert _pick_python(tmp_path) == str(quick)
    assert (tmp_path / "log").read_text().split() == ["python3", "python3.12"] * 3


def test_workq_python_chooses_without_timing(tmp_path: Path) -> None:
    _fake(tmp_path, "python3", [0.005] * 3)
    assert _pick_python(tmp_path, WORKQ_PYTHON="/opt/python/bin/python3") == (
        "/opt/python/bin/python3"
    )
    assert not (tmp_path / "log").exists()
