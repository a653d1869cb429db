"""Plan files on disk: created once from the template, read as they are, never followed
through a symlink.

Only ``create`` writes, and only a new file: ``O_CREAT | O_EXCL | O_NOFOLLOW`` refuses an
existing path, a symlink included (even one planted after ``domain.plan.plan_path`` looked),
so nothing outside the plans folder is ever written. A file the user already has is kept as
it is. Reads use ``O_NOFOLLOW`` too and accept regular files only.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from workq.domain.plan import MAX_PLAN_CHARS, plan_path
from workq.errors import InvalidInput, StorageError

__all__ = ["create", "read"]

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
# UTF-8 takes at most 4 bytes a character: read no more than the longest plan allowed.
_MAX_BYTES = MAX_PLAN_CHARS * 4


def create(plans_dir: Path, slug: str, text: str) -> tuple[Path, bool]:
    """The plan file of ``slug`` in ``plans_dir``, written with ``text`` unless it exists.

    Returns the file's absolute path and whether it was created now (False: an existing
    regular file was kept). The folder is created when missing.

    Raises:
        InvalidInput: the slug is invalid, or the path is a symlink, not a regular file or
            outside the folder.
        StorageError: the folder or the file cannot be written.
    """
    target = plan_path(plans_dir, slug)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _unwritable(target, exc) from exc
    try:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o644)
    except FileExistsError:
        _require_regular(target)
        return target, False
    except OSError as exc:
        raise _unwritable(target, exc) from exc
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
    except OSError as exc:
        raise _unwritable(target, exc) from exc
    return target, True


def read(path: Path) -> str | None:
    """The text of the plan file at ``path``; None when there is no file.

    Raises:
        InvalidInput: the path is a symlink or not a regular file, the file is too long or
            not UTF-8.
        StorageError: the file exists but cannot be read.
    """
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _symlink(path) from exc
        raise StorageError(
            f"cannot read the plan file {path}: {exc.strerror}",
            hint="check the file's permissions",
        ) from exc
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise _not_regular(path)
        data = handle.read(_MAX_BYTES + 1)
    if len(data) > _MAX_BYTES:
        raise InvalidInput(
            f"the plan file {path} is longer than {MAX_PLAN_CHARS} characters", field="plan"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(
            f"the plan file {path} is not UTF-8 text (byte {exc.start})",
            hint="save it as UTF-8",
            field="plan",
        ) from exc


def _require_regular(path: Path) -> None:
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        raise _symlink(path)
    if not stat.S_ISREG(info.st_mode):
        raise _not_regular(path)


def _symlink(path: Path) -> InvalidInput:
    return InvalidInput(
        f"plan file {path} is a symlink; refusing to follow it out of the plans folder",
        hint="remove the symlink or choose another slug",
        field="slug",
        path=str(path),
    )


def _not_regular(path: Path) -> InvalidInput:
    return InvalidInput(
        f"plan file {path} exists but is not a regular file",
        hint="remove it or choose another slug",
        field="slug",
        path=str(path),
    )


def _unwritable(path: Path, exc: OSError) -> InvalidInput | StorageError:
    if exc.errno == errno.ELOOP:
        return _symlink(path)
    return StorageError(
        f"cannot write the plan file {path}: {exc.strerror or exc}",
        hint="check that the plans folder (WORKQ_PLANS_DIR) exists and is writable",
        path=str(path),
    )
