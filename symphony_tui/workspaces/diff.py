"""What an agent changed in its workspace: the changed files with line counts, and each
file's unified diff a page at a time (docs/architecture.md; the shapes are
:mod:`symphony_tui.domain.diff`).

The base is, in order: the merge base of ``HEAD`` with the branch's upstream
(``@{upstream}``), the remote's default branch (``origin/HEAD``), ``origin/main``,
``origin/master``, or a local ``main`` / ``master`` other than the current branch; else
``HEAD`` itself (uncommitted changes only). A folder that is not the top of a git work tree
(no repository, or the workspace sits inside an unrelated one) lists the files modified
since the run started, each shown whole as added.

Blocking (``git`` subprocesses, file reads): callers run these functions in a thread. Each
``git`` runs with ``GIT_TERMINAL_PROMPT=0``, without external diff drivers, colour or the
user's pager, within :data:`GIT_TIMEOUT_S`; a diff is read up to :data:`MAX_DIFF_BYTES`.
Errors come back as the result's ``error`` (one line), never raised.
"""

from __future__ import annotations

import os
import subprocess
from datetime import datetime
from pathlib import Path
from typing import Any

from symphony_tui.domain.diff import BaseKind, DiffFile, DiffPage, WorkspaceDiff

GIT_TIMEOUT_S = 20.0
MAX_FILES = 2_000
MAX_WALK = 20_000  # files looked at when there is no repository
MAX_DIFF_BYTES = 4 * 1024 * 1024
PAGE_LINES = 400
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
_SNIFF_BYTES = 8_000
_ENV = {
    **os.environ,
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_PAGER": "cat",
    "GIT_OPTIONAL_LOCKS": "0",  # reading must not take the index lock from the agent
    "LC_ALL": "C",
}


class _GitError(Exception):
    pass


def _git(cwd: Path, *args: str, ok: tuple[int, ...] = (0,)) -> bytes:
    try:
        done = subprocess.run(
            ["git", "-c", "core.quotepath=off", *args],
            cwd=cwd,
            env=_ENV,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=GIT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise _GitError(f"git {args[0]}: {exc}") from exc
    if done.returncode not in ok:
        first = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise _GitError(f"git {args[0]}: {first[0] if first else f'exit {done.returncode}'}")
    return done.stdout


def _rev(cwd: Path, ref: str) -> str | None:
    try:
        out = _git(cwd, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", ok=(0, 1))
    except _GitError:
        return None
    return out.decode().strip() or None


def is_work_tree_top(path: Path) -> bool:
    """True when ``path`` is the top folder of a git work tree (not merely inside one)."""
    try:
        top = _git(path, "rev-parse", "--show-toplevel").decode("utf-8", "replace").strip()
    except _GitError:
        return False
    return bool(top) and Path(top).resolve() == path.resolve()


def find_base(path: Path) -> tuple[BaseKind, str, str]:
    """``(kind, revision, description)`` of the workspace's base (module docstring order)."""
    branch = ""
    try:
        branch = _git(path, "symbolic-ref", "--quiet", "--short", "HEAD", ok=(0, 1)).decode()
    except _GitError:
        pass
    branch = branch.strip()
    head = _rev(path, "HEAD")
    candidates: list[tuple[str, str]] = [("@{upstream}", "upstream")]
    try:
        origin_head = _git(path, "symbolic-ref", "--quiet", "refs/remotes/origin/HEAD", ok=(0, 1))
        name = origin_head.decode().strip().removeprefix("refs/remotes/")
        if name:
            candidates.append((name, name))
    except _GitError:
        pass
    candidates += [("origin/main", "origin/main"), ("origin/master", "origin/master")]
    candidates += [(b, b) for b in ("main", "master") if b != branch]
    if head is not None:
        for ref, label in candidates:
            target = _rev(path, ref)
            if target is None:
                continue
            if label == "upstream":
                try:
                    label = _git(path, "rev-parse", "--abbrev-ref", ref).decode().strip() or ref
                except _GitError:
                    label = ref
            try:
                base = _git(path, "merge-base", "HEAD", target).decode().strip()
            except _GitError:
                continue  # unrelated histories
            if base:
                return "merge-base", base, f"{label} @ {base[:10]}"
        return "head", head, f"HEAD @ {head[:10]}"
    return "head", EMPTY_TREE, "no commits yet"


def _split_z(data: bytes) -> list[str]:
    return [p.decode("utf-8", "surrogateescape") for p in data.split(b"\0")]


def _tracked(path: Path, base: str) -> list[DiffFile]:
    """Files differing between ``base`` and the working tree (staged or not)."""
    statuses: dict[str, str] = {}
    parts = _split_z(_git(path, "diff", "--no-ext-diff", "--name-status", "-z", "-M", base))
    i = 0
    while i < len(parts) and parts[i]:
        letter = parts[i][:1]
        if letter in ("R", "C"):
            statuses[parts[i + 2]] = letter
            i += 3
        else:
            statuses[parts[i + 1]] = letter
            i += 2
    files: list[DiffFile] = []
    parts = _split_z(_git(path, "diff", "--no-ext-diff", "--numstat", "-z", "-M", base))
    i = 0
    while i < len(parts) and parts[i]:
        added, removed, name = parts[i].split("\t", 2)
        if name == "":  # a rename: the old and new paths follow
            name = parts[i + 2]
            i += 3
        else:
            i += 1
        binary = added == "-"
        files.append(
            DiffFile(
                path=name,
                status=statuses.get(name, "M"),
                added=None if binary else int(added),
                removed=None if binary else int(removed),
                binary=binary,
            )
        )
    return files


def _sniff(file: Path) -> tuple[bool, int]:
    """``(binary, lines)`` of a file: binary when its start holds a NUL byte; lines are
    counted up to :data:`MAX_DIFF_BYTES`."""
    try:
        with file.open("rb") as f:
            data = f.read(MAX_DIFF_BYTES)
    except OSError:
        return False, 0
    if b"\0" in data[:_SNIFF_BYTES]:
        return True, 0
    return False, data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def _untracked(path: Path) -> list[DiffFile]:
    names = _split_z(_git(path, "ls-files", "--others", "--exclude-standard", "-z"))
    files = []
    for name in names:
        if not name:
            continue
        binary, lines = _sniff(path / name)
        files.append(
            DiffFile(
                path=name,
                status="?",
                added=None if binary else lines,
                removed=None if binary else 0,
                binary=binary,
            )
        )
    return files


def _changed_since(path: Path, since: datetime | None) -> tuple[list[DiffFile], bool]:
    stamp = since.timestamp() if since is not None else 0.0
    files: list[DiffFile] = []
    seen = 0
    for folder, dirs, names in os.walk(path):
        dirs[:] = sorted(d for d in dirs if d != ".git")
        for name in sorted(names):
            seen += 1
            if seen > MAX_WALK or len(files) >= MAX_FILES:
                return files, True
            file = Path(folder) / name
            try:
                if file.is_symlink() or file.stat().st_mtime < stamp:
                    continue
            except OSError:
                continue
            binary, lines = _sniff(file)
            files.append(
                DiffFile(
                    path=str(file.relative_to(path)),
                    status="C",
                    added=None if binary else lines,
                    removed=None,
                    binary=binary,
                )
            )
    return files, False


def workspace_diff(
    path: Path | str,
    *,
    since: datetime | None = None,
    issue_id: str | None = None,
    issue_identifier: str | None = None,
) -> WorkspaceDiff:
    """The changed files of the workspace at ``path`` against its base (module docstring);
    ``since`` is the run's start, for a folder without its own repository."""
    path = Path(path)
    shell = {
        "issue_id": issue_id,
        "issue_identifier": issue_identifier,
        "workspace_path": str(path),
    }
    if not path.is_dir():
        return WorkspaceDiff(**shell, error=f"no workspace folder at {path}")
    if not is_work_tree_top(path):
        files, cut = _changed_since(path, since)
        where = since.isoformat(timespec="seconds") if since else "the beginning"
        return WorkspaceDiff(
            **shell,
            base_kind="since-start",
            base=f"files modified since {where} (not a git repository)",
            files=tuple(files),
            truncated=cut,
        )
    try:
        kind, base, description = find_base(path)
        files = _tracked(path, base) + _untracked(path)
    except (_GitError, ValueError, IndexError) as exc:
        return WorkspaceDiff(**shell, error=str(exc).splitlines()[0] if str(exc) else "git failed")
    files.sort(key=lambda f: f.path)
    return WorkspaceDiff(
        **shell,
        base_kind=kind,
        base=description,
        files=tuple(files[:MAX_FILES]),
        truncated=len(files) > MAX_FILES,
    )


def _inside(path: Path, name: str) -> Path | None:
    """``path / name`` when it names something inside the workspace (no ``..`` or
    absolute escape, symlinks resolved), else ``None``."""
    if not name or "\0" in name or os.path.isabs(name):
        return None
    root = path.resolve()
    target = (path / name).resolve()
    return target if target != root and target.is_relative_to(root) else None


def _read_capped(argv: list[str], cwd: Path) -> tuple[bytes, bool]:
    try:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=_ENV,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
    except OSError as exc:
        raise _GitError(f"git: {exc}") from exc
    assert proc.stdout is not None
    try:
        data = proc.stdout.read(MAX_DIFF_BYTES + 1)
    finally:
        proc.stdout.close()
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=GIT_TIMEOUT_S)
    return data[:MAX_DIFF_BYTES], len(data) > MAX_DIFF_BYTES


def _page(name: str, text: str, offset: int, limit: int, cut: bool, **extra: Any) -> DiffPage:
    lines = text.splitlines()
    offset = max(0, min(offset, len(lines)))
    return DiffPage(
        path=name,
        offset=offset,
        lines=tuple(lines[offset : offset + limit]),
        total_lines=len(lines),
        truncated=cut,
        **extra,
    )


def file_diff(
    path: Path | str,
    name: str,
    *,
    offset: int = 0,
    limit: int = PAGE_LINES,
    since: datetime | None = None,
) -> DiffPage:
    """Lines ``offset`` .. ``offset + limit`` of the unified diff of the workspace file
    ``name`` (relative) against the base :func:`workspace_diff` uses. A name outside the
    workspace is an ``error``; a binary file is named, with no lines."""
    path = Path(path)
    limit = max(1, limit)
    target = _inside(path, name)
    if target is None:
        return DiffPage(path=name, error=f"{name!r} is not a file of this workspace")
    try:
        if not is_work_tree_top(path):
            binary, _ = _sniff(target)
            if binary:
                return DiffPage(path=name, binary=True)
            try:
                with target.open("rb") as f:
                    data = f.read(MAX_DIFF_BYTES + 1)
            except OSError as exc:
                return DiffPage(path=name, error=f"cannot read {name}: {exc.strerror}")
            where = since.isoformat(timespec="seconds") if since else "unknown"
            body = data[:MAX_DIFF_BYTES].decode("utf-8", "replace").splitlines()
            text = "\n".join(
                [f"--- (content at run start {where}: not kept)", f"+++ b/{name}"]
                + [f"+{line}" for line in body]
            )
            return _page(name, text, offset, limit, len(data) > MAX_DIFF_BYTES)
        _, base, _ = find_base(path)
        literal = f":(literal){name}"
        tracked = _git(path, "ls-files", "-z", "--", literal).strip(b"\0")
        in_base = _git(path, "ls-tree", "-z", "--name-only", base, "--", literal).strip(b"\0")
        if tracked or in_base:
            argv = ["git", "diff", "--no-color", "--no-ext-diff", base, "--", literal]
        else:  # untracked: against nothing
            argv = ["git", "diff", "--no-color", "--no-ext-diff", "--no-index", "--"]
            argv += ["/dev/null", name]
        data, cut = _read_capped(argv, path)
    except _GitError as exc:
        return DiffPage(path=name, error=str(exc))
    text = data.decode("utf-8", "replace")
    binary = any(line.startswith("Binary files ") for line in text.splitlines()[:8])
    return _page(name, text, offset, limit, cut, binary=binary)
