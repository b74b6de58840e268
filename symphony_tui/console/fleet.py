"""The fleet view: one console over several schedulers (``symphony-tui fleet``).

A fleet port's snapshot merges its schedulers' (docs/architecture.md): every row carries
``project`` and its ids are namespaced ``"<project>/<id>"``, while identifiers (``ABC-12``)
may repeat across projects; ``Snapshot.projects`` has one :class:`ProjectRow` each. With
``projects`` empty (one scheduler) nothing here changes what the console shows.

Pure functions over snapshots: which project a row belongs to, the snapshot narrowed to
one project (the project filter: every pane shows only its rows), and which projects'
rows are out of date (their link is lost: live statuses read as unknown since then).
"""

from __future__ import annotations

from collections import Counter
from functools import lru_cache
from typing import TYPE_CHECKING

from rich.cells import cell_len, set_cell_size

from symphony_tui.console.sanitize import one_line

if TYPE_CHECKING:
    from symphony_tui.domain import Snapshot
    from symphony_tui.domain.snapshot import ProjectRow

#: A project whose link is in one of these states has rows that may be out of date: its
#: live statuses read as unknown since its last update (``ProjectRow.age_s``). ``lost``:
#: its scheduler is gone without saying it stopped, so its agents may still run.
LOST_PROJECT_STATES = frozenset({"reconnecting", "stale", "down", "refused", "lost"})

#: A project in one of these states hears nothing new from its scheduler (its link is lost,
#: its token cannot be had, or it stopped): its projects row's figures are the last it
#: sent, ``ProjectRow.age_s`` old, or unknown when it was never heard from (a stopped one's
#: counts are 0: nothing runs or waits there).
OUT_OF_DATE_STATES = LOST_PROJECT_STATES | {"config", "stopped"}

#: Cells of the project column in the tables (it gives some up at 80 columns).
PROJECT_CELLS = 10


def fit_name(name: str | None, cells: int, names: tuple[str, ...] = ()) -> str:
    """A project's ``name`` (one line, no control characters) in at most ``cells`` cells,
    cut at its end with ``…`` (``billing-s…``); ``-`` for no name. When that would read
    the same as another of ``names`` (the fleet's projects) cut the same way, it keeps its
    start and its end around ``…`` instead (``front…-app`` and ``front…-api``, ``127.0…7347``
    and ``127.0…5895``): names that share a start mostly differ at the end."""
    if name is None:
        return "-"
    if name in names:
        return _fitted(names, cells)[name]
    return _cut_end(name, cells)


@lru_cache(maxsize=32)
def _fitted(names: tuple[str, ...], cells: int) -> dict[str, str]:
    cut = {name: _cut_end(name, cells) for name in names}
    alike = Counter(cut.values())
    return {n: _cut_middle(n, cells) if alike[c] > 1 else c for n, c in cut.items()}


def _cut_end(name: str, cells: int) -> str:
    text = one_line(name)
    if cell_len(text) <= cells:
        return text
    return set_cell_size(text, max(cells - 1, 0)).rstrip() + "…" if cells > 0 else ""


def _cut_middle(name: str, cells: int) -> str:
    text = one_line(name)
    if cell_len(text) <= cells or cells < 3 or len(text) != cell_len(text):
        return _cut_end(name, cells)  # wide characters: cut at the end
    tail = (cells - 1) // 2
    return f"{text[: cells - 1 - tail]}…{text[-tail:]}"


def project_names(snapshot: Snapshot) -> tuple[str, ...]:
    """The fleet's project names, for :func:`fit_name`."""
    return tuple(p.name for p in snapshot.projects)


#: The one line said when a command that names no issue has no project to go to.
CHOOSE_A_PROJECT = "choose a project: select one of its rows, or filter by project (F)"

#: ``ProjectRow.link_state`` -> (glyph, word, tone) for the projects table.
LINK_LABELS: dict[str, tuple[str, str, str]] = {
    "connecting": ("◌", "connecting", "warning"),
    "live": ("●", "live", "success"),
    "reconnecting": ("↻", "reconnecting", "warning"),
    "stale": ("✗", "stale", "error"),
    "down": ("✗", "down", "error"),
    "refused": ("✗", "refused", "error"),
    "config": ("✗", "config", "error"),
    "lost": ("✗", "lost", "error"),
    "stopped": ("■", "stopped", "warning"),  # a clean stop is no error
    "duplicate": ("=", "duplicate", "muted"),
}


def is_fleet(snapshot: Snapshot | None) -> bool:
    """The snapshot is a fleet port's (several schedulers, ``projects`` non-empty)."""
    return snapshot is not None and bool(snapshot.projects)


def project_row(snapshot: Snapshot | None, name: str | None) -> ProjectRow | None:
    if snapshot is None or name is None:
        return None
    return next((p for p in snapshot.projects if p.name == name), None)


def project_of(snapshot: Snapshot | None, issue_id: str | None) -> str | None:
    """The project of ``issue_id`` (a namespaced id): the ``project`` of its row (issue,
    run, retry entry or approval), else its prefix when that names a project (a
    recovered workspace's). ``None`` outside a fleet."""
    if not is_fleet(snapshot) or issue_id is None:
        return None
    assert snapshot is not None
    for rows in (snapshot.running, snapshot.issues, snapshot.retrying, snapshot.approvals):
        for row in rows:
            if row.issue_id == issue_id and row.project is not None:
                return row.project
    prefix, slash, _ = issue_id.partition("/")
    if slash and project_row(snapshot, prefix) is not None:
        return prefix
    return None


def live_of(snapshot: Snapshot) -> tuple[int, int]:
    """``(live, all)`` of a fleet's projects, a duplicate (the row of a line that reaches
    another line's scheduler, docs/fleet.md) not counted."""
    rows = [p for p in snapshot.projects if p.link_state != "duplicate"]
    return sum(1 for p in rows if p.link_state == "live"), len(rows)


def lost_projects(snapshot: Snapshot) -> dict[str, ProjectRow]:
    """Project name -> its row, for each project whose link is lost
    (:data:`LOST_PROJECT_STATES`)."""
    return {p.name: p for p in snapshot.projects if p.link_state in LOST_PROJECT_STATES}


def unknown_by_project(snapshot: Snapshot) -> dict[str, float]:
    """Project name -> seconds since its last update, for each project whose link is lost
    (:data:`LOST_PROJECT_STATES`); its rows' live statuses read as unknown since then."""
    return {name: p.age_s or 0.0 for name, p in lost_projects(snapshot).items()}


def _in(project: str, issue_id: str | None) -> bool:
    return issue_id is not None and issue_id.startswith(f"{project}/")


def narrowed(snapshot: Snapshot, project: str | None) -> Snapshot:
    """``snapshot`` showing only ``project``'s rows (issues, runs, retry entries,
    approvals, worker hosts, recovered workspaces, completed ids), with that project's
    token totals and figures (rate, running time, history, capacity), rate limits and
    dispatch pause. ``projects`` keeps every project (the
    projects table lists them all). The snapshot itself when ``project`` is ``None`` or
    not one of its projects."""
    row = project_row(snapshot, project)
    if row is None:
        return snapshot
    name = row.name
    return snapshot.model_copy(
        update={
            "issues": tuple(r for r in snapshot.issues if r.project == name),
            "running": tuple(r for r in snapshot.running if r.project == name),
            "retrying": tuple(r for r in snapshot.retrying if r.project == name),
            "approvals": tuple(a for a in snapshot.approvals if a.project == name),
            "hosts": tuple(h for h in snapshot.hosts if h.project == name),
            "recovered": tuple(w for w in snapshot.recovered if _in(name, w.issue_id)),
            "completed": tuple(c for c in snapshot.completed if _in(name, c)),
            "totals": row.totals,
            "max_concurrent_agents": row.max_concurrent_agents,
            "seconds_running": row.seconds_running,
            "token_rate_per_min": row.token_rate_per_min,
            "token_history": row.token_history,
            "runs_not_reported": row.runs_not_reported,
            "runs_unpriced": row.runs_unpriced,
            "rate_limits": row.rate_limits,
            "dispatch_paused": row.dispatch_paused,
            "workflow_path": row.workflow_path,
        }
    )
