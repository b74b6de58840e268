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

from typing import TYPE_CHECKING

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
