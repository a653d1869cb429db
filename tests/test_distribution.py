"""workq as a user installs it: the distribution `workq-mcp` (the name `workq` on PyPI is
another project's), built as a wheel and an sdist, each installed into a fresh virtual
environment that holds nothing of this checkout, where `workq serve` answers `tools/list`.

Offline: the build runs without an isolated environment (hatchling comes with the dev
tools), and the dependencies are installed from uv's cache at the versions of the runtime
lock, which `scripts/bootstrap` filled."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
UV = Path(sys.executable).with_name("uv")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _run(*argv: str | Path, cwd: Path | None = None) -> str:
    done = subprocess.run(
        [str(a) for a in argv],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
        env={k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"},
    )
    assert done.returncode == 0, f"{argv}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_the_distribution_has_a_name_of_its_own_and_the_command_stays_workq() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] == "workq-mcp"
    assert project["scripts"] == {"workq": "workq.cli.main:run"}
    assert "postgres" in project["optional-dependencies"]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    if not UV.exists():
        pytest.skip("uv is not in the environment (scripts/bootstrap installs it)")
    out = tmp_path_factory.mktemp("dist")
    # From a copy of the tracked files only: what a clean clone would build.
    src = out / "src"
    tracked = _run("git", "ls-files", "-z", cwd=ROOT).split("\0")
    for name in filter(None, tracked):
        if (ROOT / name).is_file():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, src / name)
    _run(
        UV,
        "build",
        "--offline",
        "--no-build-isolation",
        "--python",
        sys.executable,
        "--out-dir",
        out / "dist",
        src,
    )
    (wheel,) = (out / "dist").glob("workq_mcp-*.whl")
    (sdist,) = (out / "dist").glob("workq_mcp-*.tar.gz")
    return {"wheel": wheel, "sdist": sdist}


def _fresh_venv(where: Path, package: Path) -> Path:
    _run(UV, "venv", "--quiet", "--python", sys.executable, where)
    python = where / "bin" / "python"
    _run(
        UV,
        "pip",
        "install",
        "--quiet",
        "--offline",
        "--no-deps",
        "--require-hashes",
        "--python",
        python,
        "-r",
        ROOT / "requirements" / "runtime.lock",
    )
    if package.name.endswith(".tar.gz"):  # an sdist: built into a wheel, as pip would do
        _run(
            UV,
            "build",
            "--offline",
            "--no-build-isolation",
            "--wheel",
            "--python",
            sys.executable,
            "--out-dir",
            where.parent / "from-sdist",
            package,
        )
        (package,) = (where.parent / "from-sdist").glob("workq_mcp-*.whl")
    _run(UV, "pip", "install", "--quiet", "--offline", "--no-deps", "--python", python, package)
    return where / "bin" / "workq"


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["wheel", "sdist"])
async def test_the_built_package_installs_into_a_clean_venv_and_serves(
    built: dict[str, Path], kind: str, tmp_path: Path
) -> None:
    workq = _fresh_venv(tmp_path / "venv", built[kind])
    site = _run(workq.with_name("python"), "-c", "import workq; print(workq.__file__)")
    assert str(tmp_path / "venv") in site, "workq came from the checkout, not the install"
    meta = _run(
        workq.with_name("python"),
        "-c",
        "import importlib.metadata as m; print(m.version('workq-mcp'))",
    )
    assert meta.strip()
    params = StdioServerParameters(
        command=str(workq),
        args=["serve"],
        env={"PATH": os.environ.get("PATH", ""), "ISSUES_DB": str(tmp_path / "q.db")},
        cwd=tmp_path,
    )
    with (tmp_path / "serve.stderr").open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), read_timeout_seconds=60) as c:
            tools = {t.name for t in (await c.list_tools()).tools}
            made = await c.call_tool("issue_create", {"title": "from the wheel"})
    assert {"issue_create", "issue_ready", "issue_claim"} <= tools
    assert not made.is_error, made
    assert (tmp_path / "q.db").exists()  # migrated by the installed migrations
