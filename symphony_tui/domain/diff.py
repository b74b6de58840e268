"""A workspace's changes, as the diff screen and ``GET /api/v1/diff/...`` show them.

Computed on the scheduler's side (:mod:`symphony_tui.workspaces.diff`), so an attached
console on another machine sees the same thing.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

#: ``merge-base``: against the merge base with the upstream / default branch;
#: ``head``: a git repository without one, against its ``HEAD`` (uncommitted changes);
#: ``since-start``: not a git repository, the files modified since the run started
#: (no earlier content to compare with: each file is shown whole, as added).
BaseKind = Literal["merge-base", "head", "since-start"]


class DiffFile(BaseModel):
    """One changed file: ``path`` relative to the workspace; ``status`` a git status letter
    (``A`` added, ``M`` modified, ``D`` deleted, ``R`` renamed, ``?`` untracked, ``C``
    changed since the run started); ``added`` / ``removed`` line counts (``None`` for a
    binary file, ``binary`` then True)."""

    model_config = ConfigDict(frozen=True)

    path: str
    status: str = "M"
    added: int | None = 0
    removed: int | None = 0
    binary: bool = False


class WorkspaceDiff(BaseModel):
    """The changed files of one workspace against its base.

    ``base`` describes the base (``origin/main @ 1a2b3c4``, ``HEAD @ 1a2b3c4``, ``run
    start 2026-05-01T10:00:00+00:00``); ``error`` is a one-line reason when nothing could
    be computed (no workspace, git failed); ``truncated`` says ``files`` stops at the
    limit."""

    model_config = ConfigDict(frozen=True)

    issue_id: str | None = None
    issue_identifier: str | None = None
    workspace_path: str = ""
    base_kind: BaseKind = "head"
    base: str = ""
    files: tuple[DiffFile, ...] = ()
    truncated: bool = False
    error: str | None = None

    @property
    def added(self) -> int:
        return sum(f.added or 0 for f in self.files)

    @property
    def removed(self) -> int:
        return sum(f.removed or 0 for f in self.files)


class DiffPage(BaseModel):
    """Lines ``offset`` .. ``offset + len(lines)`` of one file's unified diff (raw text:
    the console makes it inert); ``total_lines`` of the whole diff as far as it was read,
    ``truncated`` when the diff was longer than the scheduler reads (its byte cap)."""

    model_config = ConfigDict(frozen=True)

    path: str
    offset: int = 0
    lines: tuple[str, ...] = ()
    total_lines: int = 0
    truncated: bool = False
    binary: bool = False
    error: str | None = None
