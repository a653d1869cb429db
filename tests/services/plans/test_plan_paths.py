"""Plan files stay in the plans folder: bad slugs, absolute paths and symlinks are refused,
and a refused call writes nothing anywhere."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.services.plans.conftest import FILLED, fill, tree
from workq.errors import InvalidInput, StorageError
from workq.services.handle import Queue
from workq.services.plans import plan_files
from workq.services.plans import plan_mode as svc

ESCAPES = [
    "../x",
    "../../etc/passwd",
    "/etc/passwd",
    "/tmp/x",
    "a/b",
    "a\\b",
    ".hidden",
    "..",
    ".",
    "~root",
    "x.md",
    "Upper",
    "with space",
    "-leading",
    "trailing-",
    "nul\x00byte",
    "caf\u00e9",
    "",
    "a" * 65,
]


def files(root: Path) -> dict[str, bytes | str]:
    """``tree(root)`` without the test's database files."""
    return {k: v for k, v in tree(root).items() if not k.startswith("workq.db")}


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A folder holding the plans folder and an 'outside' file an escape would hit."""
    (tmp_path / "outside.md").write_text("not yours\n")
    return tmp_path


@pytest.mark.parametrize("slug", ESCAPES)
def test_a_bad_slug_is_refused_and_nothing_is_written(
    queue: Queue, workdir: Path, slug: str
) -> None:
    before = files(workdir)
    with pytest.raises(InvalidInput, match="slug"):
        svc.enter(queue, "run-a", slug, "goal", workdir / "plans")
    assert svc.active_plan(queue, "run-a") is None
    assert files(workdir) == before


def test_a_symlinked_plan_file_is_never_followed(queue: Queue, workdir: Path) -> None:
    plans_dir = workdir / "plans"
    plans_dir.mkdir()
    (plans_dir / "evil.md").symlink_to(workdir / "outside.md")
    (plans_dir / "dangling.md").symlink_to(workdir / "created-by-escape.md")
    before = files(workdir)
    for slug in ("evil", "dangling"):
        with pytest.raises(InvalidInput, match="symlink"):
            svc.enter(queue, "run-a", slug, "goal", plans_dir)
    assert (workdir / "outside.md").read_text() == "not yours\n"
    assert not (workdir / "created-by-escape.md").exists()
    assert files(workdir) == before
    assert svc.active_plan(queue, "run-a") is None


def test_a_symlink_planted_after_entering_is_refused_when_read(queue: Queue, workdir: Path) -> None:
    plans_dir = workdir / "plans"
    svc.enter(queue, "run-a", "p", "goal", plans_dir)
    outside = workdir / "outside.md"
    fill(plans_dir / "p.md")
    (plans_dir / "p.md").unlink()
    (plans_dir / "p.md").symlink_to(outside)
    with pytest.raises(InvalidInput, match="symlink"):
        svc.exit_plan(queue, "run-a")
    assert outside.read_text() == "not yours\n"
    assert svc.active_plan(queue, "run-a") is not None


def test_a_directory_in_place_of_the_plan_file_is_refused(queue: Queue, workdir: Path) -> None:
    (workdir / "plans" / "p.md").mkdir(parents=True)
    with pytest.raises(InvalidInput, match="not a regular file"):
        svc.enter(queue, "run-a", "p", "goal", workdir / "plans")


def test_a_plans_folder_that_is_a_symlink_is_the_folder_people_chose(
    queue: Queue, workdir: Path
) -> None:
    real = workdir / "real-plans"
    real.mkdir()
    (workdir / "plans").symlink_to(real)
    entered = svc.enter(queue, "run-a", "p", "goal", workdir / "plans")
    assert entered.plan.path == str(real / "p.md")
    assert (real / "p.md").is_file()
    fill(real / "p.md", FILLED)
    assert svc.exit_plan(queue, "run-a").plan.path == str(real / "p.md")


def test_the_plans_folder_is_created_with_its_parents(queue: Queue, workdir: Path) -> None:
    deep = workdir / "a" / "b" / "plans"
    svc.enter(queue, "run-a", "p", "goal", deep)
    assert (deep / "p.md").is_file()


def test_a_plans_folder_that_cannot_be_made_is_a_clear_error(queue: Queue, workdir: Path) -> None:
    blocker = workdir / "not-a-folder"
    blocker.write_text("a file where the folder should be\n")
    with pytest.raises(StorageError, match="cannot write the plan file"):
        svc.enter(queue, "run-a", "p", "goal", blocker / "plans")
    assert svc.active_plan(queue, "run-a") is None
    assert blocker.read_text() == "a file where the folder should be\n"


def test_reading_refuses_what_is_not_a_utf8_plan(workdir: Path) -> None:
    path = workdir / "binary.md"
    path.write_bytes(b"\xff\xfe not utf-8")
    with pytest.raises(InvalidInput, match="not UTF-8"):
        plan_files.read(path)
    assert plan_files.read(workdir / "missing.md") is None
