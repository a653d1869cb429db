"""The git CLI, run the one way workq runs it.

Every call is an argument list (never a shell string), with a timeout, no pager, no
terminal prompt, no user or system config that could start an editor or a credential
helper, and stdin closed. A failure becomes ``GitFailed`` carrying git's own message.
Worktrees and ``merge-tree --write-tree`` are CLI features, so workq drives the CLI
rather than a library that reimplements part of git.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from workq.errors import GitFailed, GitMissing
from workq.nowait import before_waiting

DEFAULT_TIMEOUT = 60.0
# Output kept from a failing command, so a chatty hook cannot flood an error.
MESSAGE_LIMIT = 4000
# The first git that has `merge-tree --write-tree` (merge checks without a checkout).
MERGE_TREE_VERSION = (2, 38)


@dataclass(frozen=True)
class Result:
    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    @property
    def lines(self) -> list[str]:
        return self.stdout.splitlines()


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment git runs in: the caller's PATH and HOME, nothing that could prompt,
    page or read a user's config (``GIT_CONFIG_GLOBAL``/``SYSTEM`` point at nothing)."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
    env.update(
        GIT_TERMINAL_PROMPT="0",
        GIT_PAGER="cat",
        PAGER="cat",
        GIT_EDITOR="true",
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_ASKPASS="",
        SSH_ASKPASS="",
        GCM_INTERACTIVE="never",
        LC_ALL="C",
    )
    if extra:
        env.update(extra)
    return env


def executable() -> str:
    found = shutil.which("git")
    if found is None:
        raise GitMissing("git is not installed or not on PATH")
    return found


def run(
    args: Sequence[str],
    *,
    cwd: Path,
    timeout: float = DEFAULT_TIMEOUT,
    check: bool = True,
    env: Mapping[str, str] | None = None,
    input_text: str | None = None,
    hooks: bool = False,
) -> Result:
    """Run ``git <args>`` in ``cwd``. With ``check``, a non-zero exit raises ``GitFailed``.
    The repository's hooks run only with ``hooks=True``."""
    before_waiting("git")
    argv = [executable(), *([] if hooks else ["-c", "core.hooksPath=" + os.devnull]), *args]
    try:
        done = subprocess.run(
            argv,
            cwd=cwd,
            env=clean_env(env),
            input=input_text,
            stdin=None if input_text is not None else subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise GitFailed(
            f"git {' '.join(args[:2])} did not finish within {timeout:g} s",
            command=" ".join(args),
        ) from exc
    except FileNotFoundError as exc:
        raise GitMissing(f"cannot run git in {cwd}: {exc.strerror}") from exc
    result = Result(tuple(args), done.returncode, done.stdout, done.stderr)
    if check and done.returncode != 0:
        message = (done.stderr.strip() or done.stdout.strip())[-MESSAGE_LIMIT:]
        raise GitFailed(
            f"git {args[0]} failed: {message or f'exit {done.returncode}'}",
            command=" ".join(args),
            exit_code=done.returncode,
        )
    return result


def parse_version(text: str) -> tuple[int, ...]:
    """``git version 2.39.5`` -> ``(2, 39, 5)``; vendor suffixes are ignored."""
    found = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", text)
    if found is None:
        raise GitMissing(f"cannot read git's version from {text.strip()!r}")
    return tuple(int(part) for part in found.groups() if part is not None)


@cache
def version() -> tuple[int, ...]:
    return parse_version(run(["version"], cwd=Path.cwd(), timeout=10).stdout)


def require(minimum: tuple[int, ...], feature: str) -> None:
    """Refuse, naming the feature, when this machine's git is older than ``minimum``."""
    have = version()
    if have < minimum:
        raise GitMissing(
            f"{feature} needs git {'.'.join(map(str, minimum))} or newer; "
            f"this machine has {'.'.join(map(str, have))}",
            hint="upgrade git",
        )


def toplevel(path: Path) -> Path:
    """The root of the work tree ``path`` stands in."""
    return Path(run(["rev-parse", "--show-toplevel"], cwd=path).stdout.strip())


def common_dir(path: Path) -> Path:
    """The repository's shared git directory: the same from every worktree of it, so it
    is what identifies a repository (a worktree's own ``.git`` is not)."""
    text = run(["rev-parse", "--path-format=absolute", "--git-common-dir"], cwd=path)
    return Path(text.stdout.strip())


def locate(path: Path) -> tuple[Path, Path] | None:
    """The root of the work tree ``path`` stands in and the repository's common git
    directory, in one call; None outside a git work tree."""
    done = run(
        ["rev-parse", "--path-format=absolute", "--show-toplevel", "--git-common-dir"],
        cwd=path,
        check=False,
        timeout=10,
    )
    lines = done.lines
    if done.returncode != 0 or len(lines) != 2:
        return None
    return Path(lines[0]), Path(lines[1])


def listed_files(root: Path, *pathspecs: str) -> list[str]:
    """Files of the work tree at ``root`` matching ``pathspecs``, relative to it: tracked
    ones and untracked ones that git does not ignore (nested repositories and worktrees
    are not entered)."""
    out = run(
        ["ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", *pathspecs],
        cwd=root,
    ).stdout
    return sorted({entry for entry in out.split("\0") if entry})


def current_branch(path: Path) -> str | None:
    """The checked-out branch, or None on a detached HEAD."""
    done = run(["symbolic-ref", "--quiet", "--short", "HEAD"], cwd=path, check=False)
    if done.returncode != 0:
        return None
    return done.stdout.strip() or None


def head(path: Path, ref: str = "HEAD") -> str:
    return run(["rev-parse", "--verify", "--quiet", ref + "^{commit}"], cwd=path).stdout.strip()


def is_valid_branch_name(name: str, cwd: Path) -> bool:
    done = run(["check-ref-format", "--branch", name], cwd=cwd, check=False)
    return done.returncode == 0


def dirty_paths(path: Path) -> list[str]:
    """Paths with uncommitted changes (staged, unstaged or untracked), NUL-safe."""
    out = run(["status", "--porcelain=v1", "-z", "--untracked-files=all"], cwd=path).stdout
    paths: list[str] = []
    entries = iter(out.split("\0"))
    for entry in entries:
        if not entry:
            continue
        paths.append(entry[3:])
        if entry[0] in "RC":
            next(entries, None)  # a rename's second field is its old path
    return paths


def remote_url(path: Path, name: str = "origin") -> str | None:
    """The fetch URL of remote ``name``, or None when there is no such remote."""
    done = run(["remote", "get-url", name], cwd=path, check=False)
    return done.stdout.strip() or None if done.returncode == 0 else None


def remotes(path: Path) -> list[str]:
    """The names of the repository's remotes."""
    return run(["remote"], cwd=path).lines


def push(
    path: Path, remote: str, branch: str, *, force: bool = False, timeout: float = 120.0
) -> None:
    """Push ``branch`` to the same name on ``remote`` (``force``: whatever is there);
    hooks stay off."""
    spec = f"{'+' if force else ''}refs/heads/{branch}:refs/heads/{branch}"
    run(["push", "--porcelain", remote, spec], cwd=path, timeout=timeout)


def fetch(path: Path, remote: str, branch: str, *, timeout: float = 120.0) -> str | None:
    """Fetch ``branch`` of ``remote`` into its remote-tracking ref; its tip (None: the
    remote has no such branch)."""
    run(
        ["fetch", "--quiet", remote, f"+refs/heads/{branch}:refs/remotes/{remote}/{branch}"],
        cwd=path,
        timeout=timeout,
    )
    done = run(
        ["rev-parse", "--verify", "--quiet", f"refs/remotes/{remote}/{branch}^{{commit}}"],
        cwd=path,
        check=False,
    )
    return done.stdout.strip() if done.returncode == 0 else None


# --- worktrees, refs and merges ------------------------------------------------------------


@dataclass(frozen=True)
class Worktree:
    path: Path
    head: str | None
    branch: str | None  # short name; None when detached
    bare: bool = False


def worktrees(repo: Path) -> list[Worktree]:
    """Every worktree git knows of, the main one first (``worktree list --porcelain``).
    A worktree another process is adding at that moment can make git fail to read its
    half-written admin files: that is retried a few times."""
    for attempt in range(5):
        try:
            out = run(["worktree", "list", "--porcelain", "-z"], cwd=repo).stdout
            break
        except GitFailed:
            if attempt == 4:
                raise
            time.sleep(0.05 * (attempt + 1))
    found: list[Worktree] = []
    fields: dict[str, str] = {}
    for entry in [*out.split("\0"), ""]:
        if entry:
            key, _, value = entry.partition(" ")
            fields[key] = value
            continue
        if "worktree" in fields:
            branch = fields.get("branch")
            found.append(
                Worktree(
                    path=Path(fields["worktree"]),
                    head=fields.get("HEAD"),
                    branch=branch.removeprefix("refs/heads/") if branch else None,
                    bare="bare" in fields,
                )
            )
        fields = {}
    return found


def worktree_add(repo: Path, path: Path, branch: str, base: str) -> None:
    """A new worktree at ``path`` on a new branch ``branch`` starting at ``base``."""
    run(["worktree", "add", "--quiet", "-b", branch, str(path), base], cwd=repo)


def worktree_remove(repo: Path, path: Path, *, force: bool = False) -> None:
    run(["worktree", "remove", *(["--force", "--force"] if force else []), str(path)], cwd=repo)


def worktree_prune(repo: Path) -> None:
    run(["worktree", "prune"], cwd=repo)


def branch_exists(repo: Path, branch: str) -> bool:
    ref = "refs/heads/" + branch
    return run(["show-ref", "--verify", "--quiet", ref], cwd=repo, check=False).returncode == 0


def branch_tip(repo: Path, branch: str) -> str | None:
    done = run(
        ["rev-parse", "--verify", "--quiet", f"refs/heads/{branch}^{{commit}}"],
        cwd=repo,
        check=False,
    )
    return done.stdout.strip() if done.returncode == 0 else None


def commits_ahead(repo: Path, branch: str, base: str) -> int:
    """How many commits ``branch`` has that ``base`` lacks."""
    done = run(["rev-list", "--count", f"refs/heads/{base}..refs/heads/{branch}", "--"], cwd=repo)
    return int(done.stdout.strip() or 0)


def delete_branch(repo: Path, branch: str) -> None:
    run(["branch", "-D", "--quiet", branch], cwd=repo)


def is_ancestor(repo: Path, ancestor: str, descendant: str) -> bool:
    done = run(["merge-base", "--is-ancestor", ancestor, descendant], cwd=repo, check=False)
    if done.returncode not in (0, 1):
        raise GitFailed(f"git merge-base failed: {done.stderr.strip()}", command="merge-base")
    return done.returncode == 0


@dataclass(frozen=True)
class MergeCheck:
    tree: str | None  # the merged tree, when clean
    conflicts: list[str]


def merge_tree(repo: Path, ours: str, theirs: str) -> MergeCheck:
    """Merge ``theirs`` into ``ours`` in memory (no checkout touched): the resulting tree,
    or the files that conflict."""
    require(MERGE_TREE_VERSION, "checking a merge without a checkout (merge-tree --write-tree)")
    done = run(
        ["merge-tree", "--write-tree", "--name-only", "-z", "--no-messages", ours, theirs],
        cwd=repo,
        check=False,
    )
    if done.returncode not in (0, 1):
        said = done.stderr.strip() or done.stdout.strip()
        raise GitFailed(
            f"git merge-tree failed: {said[-MESSAGE_LIMIT:]}",
            command="merge-tree",
        )
    parts = done.stdout.split("\0")
    tree = parts[0].strip()
    if done.returncode == 0:
        return MergeCheck(tree=tree, conflicts=[])
    files = sorted({part for part in parts[1:] if part})
    return MergeCheck(tree=None, conflicts=files)


def commit_tree(repo: Path, tree: str, parents: Sequence[str], message: str) -> str:
    ident = {
        "GIT_AUTHOR_NAME": "workq",
        "GIT_AUTHOR_EMAIL": "workq@localhost",
        "GIT_COMMITTER_NAME": "workq",
        "GIT_COMMITTER_EMAIL": "workq@localhost",
    }
    args = ["commit-tree", tree]
    for parent in parents:
        args += ["-p", parent]
    return run([*args, "-F", "-"], cwd=repo, env=ident, input_text=message).stdout.strip()


def update_ref(repo: Path, branch: str, new: str, old: str) -> None:
    """Move ``branch`` to ``new`` only if it still points at ``old`` (compare and swap)."""
    run(["update-ref", "refs/heads/" + branch, new, old], cwd=repo)


def merge_ff_only(path: Path, commit: str) -> None:
    """Fast-forward the branch checked out at ``path`` (and its files) to ``commit``."""
    run(["merge", "--ff-only", "--quiet", commit], cwd=path)


def changed_files(path: Path, base: str) -> list[str]:
    """Files the work tree at ``path`` changes against ``base``: commits, staged and
    unstaged changes (one diff of the work tree against the base) and untracked files."""
    changed = run(["diff", "--name-only", "-z", "--no-renames", base], cwd=path).stdout
    untracked = run(["ls-files", "--others", "--exclude-standard", "-z"], cwd=path).stdout
    return sorted({name for name in (*changed.split("\0"), *untracked.split("\0")) if name})


def disk_usage(path: Path) -> int:
    """Bytes under ``path`` (files only, symlinks not followed)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                continue
    return total


def merge_base(repo: Path, a: str, b: str) -> str:
    return run(["merge-base", a, b], cwd=repo).stdout.strip()


def hooks_dir(path: Path) -> Path:
    """Where the repository ``path`` stands in keeps its hooks (absolute; its own
    core.hooksPath if set). rev-parse runs no hook: ``hooks=True`` only keeps that setting."""
    args = ["rev-parse", "--path-format=absolute", "--git-path", "hooks"]
    text = run(args, cwd=path, hooks=True)
    return Path(text.stdout.strip())


def staged_paths(path: Path, index_file: str | None = None) -> list[str]:
    """The paths the next commit changes (both sides of a rename), NUL-safe. In a hook,
    pass git's ``GIT_INDEX_FILE``: a partial commit stages into a temporary index."""
    env = {"GIT_INDEX_FILE": index_file} if index_file else None
    out = run(["diff", "--cached", "--name-only", "--no-renames", "-z"], cwd=path, env=env).stdout
    return [entry for entry in out.split("\0") if entry]


def work_files(path: Path) -> list[str]:
    """The files of the work tree at ``path`` (run at its root): tracked ones and untracked
    ones not ignored, relative to the root, sorted. A deleted tracked file may be listed."""
    args = ["ls-files", "-z", "--cached", "--others", "--exclude-standard"]
    out = run(args, cwd=path).stdout
    return sorted({entry for entry in out.split("\0") if entry})


def show_file(path: Path, commit: str, name: str) -> str | None:
    """The text of file ``name`` (relative to the root) at ``commit``, or None if absent."""
    done = run(["show", f"{commit}:{name}"], cwd=path, check=False)
    return done.stdout if done.returncode == 0 else None


# --- a checkout's own branch and commits (contract E's git steps) --------------------------


def switch(path: Path, branch: str) -> None:
    """Check out ``branch`` in the work tree at ``path``."""
    run(["switch", "--quiet", branch], cwd=path)


def switch_new(path: Path, branch: str, start: str) -> None:
    """Create ``branch`` at ``start`` and check it out in the work tree at ``path``."""
    run(["switch", "--quiet", "--no-track", "-c", branch, start], cwd=path)


def index_tree(path: Path) -> str | None:
    """The tree the index holds now (to put it back), or None while it has conflicts."""
    done = run(["write-tree"], cwd=path, check=False)
    return done.stdout.strip() if done.returncode == 0 else None


def restore_index(path: Path, tree: str) -> None:
    """Put the index back to ``tree``, leaving the files as they are."""
    run(["read-tree", tree], cwd=path)


def stage_all(path: Path) -> None:
    run(["add", "--all"], cwd=path)


def _identity(path: Path) -> dict[str, str]:
    """Who a commit is by: the repository's own ``user.name``/``user.email`` when set,
    else the caller's ``GIT_AUTHOR_*``/``GIT_COMMITTER_*`` variables, else ``workq``.
    (``clean_env`` hides the user's global config, so git alone would refuse to commit.)"""
    found: dict[str, str] = {}
    for key, part in (("user.name", "NAME"), ("user.email", "EMAIL")):
        done = run(["config", "--get", key], cwd=path, check=False)
        if done.returncode == 0 and done.stdout.strip():
            continue
        fallback = "workq" if part == "NAME" else "workq@localhost"
        for role in ("AUTHOR", "COMMITTER"):
            name = f"GIT_{role}_{part}"
            found[name] = os.environ.get(name) or fallback
    return found


def commit(
    path: Path,
    message: str,
    *,
    hooks: bool = True,
    timeout: float = 300.0,
    env: Mapping[str, str] | None = None,
) -> str:
    """Commit what is staged in the work tree at ``path`` with ``message`` (the
    repository's hooks run, as for a commit its user makes, with ``env`` added to their
    environment); the new commit's hash."""
    run(
        ["commit", "--quiet", "--file", "-", "--cleanup", "verbatim"],
        cwd=path,
        env={**_identity(path), **(env or {})},
        input_text=message,
        hooks=hooks,
        timeout=timeout,
    )
    return head(path)


# --- saving a work tree's edits without touching it (the hand-off) ------------------------


def has_edits(path: Path) -> bool:
    """Whether the work tree at ``path`` holds uncommitted changes (staged, unstaged, or
    untracked files git does not ignore). Without optional locks: a status that refreshes
    the index would write it, and this only looks."""
    args = ["--no-optional-locks", "status", "--porcelain=v1", "-z", "--untracked-files=all"]
    return bool(run(args, cwd=path).stdout.strip("\0"))


def edits_tree(path: Path, head: str, *, timeout: float = 300.0) -> str:
    """The tree of what the work tree at ``path`` holds (its tracked files as they are now,
    and the untracked files git does not ignore), built in a temporary index from ``head``:
    the work tree, its own index and HEAD are left as they are."""
    with tempfile.TemporaryDirectory(prefix="workq-index-") as folder:
        env = {"GIT_INDEX_FILE": os.path.join(folder, "index")}
        run(["read-tree", head], cwd=path, env=env)
        # No file monitor: the repository's configuration could name a program for it.
        run(["-c", "core.fsmonitor=false", "add", "--all"], cwd=path, env=env, timeout=timeout)
        return run(["write-tree"], cwd=path, env=env).stdout.strip()


def tree_of(path: Path, commit: str) -> str:
    return run(["rev-parse", "--verify", "--quiet", commit + "^{tree}"], cwd=path).stdout.strip()


def resolve(path: Path, ref: str) -> str | None:
    """The commit ``ref`` (a full ref name) points at, or None when there is none."""
    done = run(["rev-parse", "--verify", "--quiet", ref + "^{commit}"], cwd=path, check=False)
    return done.stdout.strip() if done.returncode == 0 else None


def refs_under(path: Path, prefix: str) -> list[str]:
    """The full names of the refs under ``prefix`` (``refs/workq/...``)."""
    args = ["for-each-ref", "--format=%(refname)", prefix.rstrip("/") + "/"]
    return run(args, cwd=path).lines


def create_ref(path: Path, ref: str, commit: str) -> bool:
    """Point the new ref ``ref`` at ``commit``; False if ``ref`` already exists (nothing
    changed). An empty old value tells git the ref must not exist yet."""
    done = run(["update-ref", "--no-deref", ref, commit, ""], cwd=path, check=False)
    if done.returncode == 0:
        return True
    if resolve(path, ref) is not None:
        return False
    raise GitFailed(
        f"git update-ref failed: {done.stderr.strip()[-MESSAGE_LIMIT:]}", command="update-ref"
    )


def subjects(path: Path, base: str, tip: str, limit: int) -> list[str]:
    """The subjects of the commits ``tip`` has and ``base`` lacks, newest first, at most
    ``limit`` (both full ref names or commit ids)."""
    args = ["log", "--format=%s", f"--max-count={limit}", f"{base}..{tip}", "--"]
    return run(args, cwd=path).lines


def count_between(path: Path, base: str, tip: str) -> int:
    """How many commits ``tip`` has that ``base`` lacks (full ref names or commit ids)."""
    return int(run(["rev-list", "--count", f"{base}..{tip}", "--"], cwd=path).stdout.strip() or 0)


def files_between(path: Path, base: str, tip: str) -> list[str]:
    """The files ``tip`` changes since its merge base with ``base``, NUL-safe, sorted."""
    out = run(["diff", "--name-only", "-z", "--no-renames", f"{base}...{tip}", "--"], cwd=path)
    return sorted({name for name in out.stdout.split("\0") if name})
