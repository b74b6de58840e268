"""Pane 1: the issues the scheduler knows of, keyed by issue id (in a fleet console,
with a project column first: identifiers may repeat across projects)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from rich.text import Text

from symphony_tui.console import fmt
from symphony_tui.console.fleet import PROJECT_CELLS, fit_name, is_fleet, project_names
from symphony_tui.console.sanitize import inert
from symphony_tui.console.widgets.keyed_table import KeyedTable, Row, RowCache

if TYPE_CHECKING:
    from symphony_tui.console.tones import Tones
    from symphony_tui.domain import Snapshot

COLUMNS = (
    ("identifier", "Issue", 10),
    ("title", "Title", 16),
    ("state", "State", 13),
    ("claim", "Claim", 11),
    ("priority", "Prio", 6),
)
#: A fleet console's columns: the project first; at 80 columns it and the state give
#: cells to the title.
PROJECT_COLUMN = ("project", "Project", PROJECT_CELLS)
FLEET_COLUMNS = (PROJECT_COLUMN, *COLUMNS)
FLEET_SHRINK = {"project": 7, "state": 11}


def project_cell(tones: Tones):
    """The project column's cell maker, from the name fitted to the column
    (:func:`~symphony_tui.console.fleet.fit_name`)."""
    return lambda v: inert(v, tones.muted)


def issue_rows(
    snapshot: Snapshot, tones: Tones, cache: RowCache | None = None, fleet: bool = False
) -> list[tuple[str, Row]]:
    """(issue id, cells) in snapshot order (the scheduler's dispatch order). With a
    ``cache``, cells whose value did not change are reused. ``fleet``: a project cell
    first (``FLEET_COLUMNS``)."""
    completed = frozenset(snapshot.completed)
    cache = cache if cache is not None else RowCache()
    makers = (
        lambda v: inert(v, tones.bold, limit=10),
        lambda v: inert(v, limit=120),
        lambda v: inert(v, limit=13),
        lambda v: fmt.labelled(fmt.CLAIM_LABELS[v], tones),
        lambda v: Text(fmt.priority(v), end=""),
    )
    if fleet:
        makers = (project_cell(tones), *makers)
    rows: list[tuple[str, Row]] = []
    names = project_names(snapshot)
    for issue in snapshot.issues:
        inputs = (
            issue.identifier,
            issue.title,
            issue.state,
            fmt.claim_key(issue, completed),
            issue.priority,
        )
        if fleet:
            inputs = (fit_name(issue.project, PROJECT_CELLS, names), *inputs)
        rows.append((issue.issue_id, cache.row(issue.issue_id, inputs, makers, tones)))
    cache.retain(k for k, _ in rows)
    return rows


class IssuesTable(KeyedTable):
    def __init__(self, **kwargs) -> None:
        super().__init__(COLUMNS, flex="title", **kwargs)
        self._cache = RowCache()

    def show(self, snapshot: Snapshot, now: datetime, tones: Tones) -> bool:
        fleet = is_fleet(snapshot)
        if self.set_column_spec(
            FLEET_COLUMNS if fleet else COLUMNS, FLEET_SHRINK if fleet else None
        ):
            self._cache = RowCache()  # the cells are laid out differently
        return self.sync(issue_rows(snapshot, tones, self._cache, fleet))
