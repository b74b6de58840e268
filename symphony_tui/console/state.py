"""What the console knows of its scheduler, shared by the app and its helpers.

One :class:`ConsoleState` per console: the port it reads and commands (a
:class:`~symphony_tui.console.starting.StartingPort` until the scheduler is built, then
the built one), the last snapshot read, whether the scheduler runs elsewhere and whether
the console is leaving, and in a fleet console (``console/fleet.py``) the project the
operator filters by. The app's refresh writes ``snapshot``; ``console/lifecycle.py``
writes the rest; the app's filter key writes ``project_filter``; everything else reads.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from symphony_tui.config.settings import NotifySettings
    from symphony_tui.domain import RunningRow, Snapshot
    from symphony_tui.scheduler.port import SchedulerPort


class ConsoleState:
    """``port``: the scheduler's port; ``snapshot``: the one shown last (``None`` before
    the first tick); ``detach_only``: the scheduler runs elsewhere (``symphony-tui
    attach``), quitting detaches; ``stopping``: a quit or detach began, so no key but quit
    runs an action and nothing is repainted; ``notify``: what decides the console's bells
    and desktop alerts (``console.starting.notify_of``).

    A fleet console: ``fleet_snapshot`` is the port's whole snapshot and ``snapshot`` the
    part the operator looks at, narrowed to ``project_filter`` (``fleet.narrowed``; the
    whole one while it is ``None``)."""

    def __init__(
        self,
        port: SchedulerPort,
        *,
        detach_only: bool,
        notify: Callable[[], NotifySettings],
    ) -> None:
        self.port = port
        self.snapshot: Snapshot | None = None
        self.fleet_snapshot: Snapshot | None = None
        self.project_filter: str | None = None
        self._narrowed: tuple[Snapshot, str | None, Snapshot] | None = None
        self.detach_only = detach_only
        self.stopping = False
        self.notify = notify

    @property
    def starting(self) -> bool:
        """True until the scheduler is built (``console.starting``)."""
        return self.port.starting

    def take(self, snapshot: Snapshot) -> Snapshot:
        """Hold the port's ``snapshot``; returns what the console shows of it (the same
        object for the same snapshot and filter, so unchanged input repaints nothing). A
        filter naming a project the fleet no longer has is dropped."""
        from symphony_tui.console.fleet import narrowed, project_row

        self.fleet_snapshot = snapshot
        if self.project_filter is not None and project_row(snapshot, self.project_filter) is None:
            self.project_filter = None  # the project left the fleet: show every one
        memo = self._narrowed
        if memo is not None and memo[0] is snapshot and memo[1] == self.project_filter:
            shown = memo[2]
        else:
            shown = narrowed(snapshot, self.project_filter)
            self._narrowed = (snapshot, self.project_filter, shown)
        self.snapshot = shown
        return shown

    def project_for(self, issue_id: str | None, project: str | None = None) -> str | None:
        """The project a command that names no issue goes to: ``project`` (a selected
        project or host row's), else ``issue_id``'s (the selected row's), else the
        filter's. ``None`` outside a fleet, or when none of them says."""
        from symphony_tui.console.fleet import is_fleet, project_of

        snapshot = self.fleet_snapshot
        if not is_fleet(snapshot):
            return None
        return project or project_of(snapshot, issue_id) or self.project_filter

    def ident(self, issue_id: str) -> str:
        """The identifier of ``issue_id`` (``DEMO-3``) when the snapshot knows it; in a
        fleet, with its project (``DEMO-3 in api``): identifiers repeat across projects."""
        from symphony_tui.console.fleet import project_of

        name = issue_id
        if self.snapshot is not None:
            name = next(
                (r.issue_identifier for r in self.snapshot.running if r.issue_id == issue_id),
                None,
            ) or next((i.identifier for i in self.snapshot.issues if i.issue_id == issue_id), name)
        project = project_of(self.fleet_snapshot, issue_id)
        return f"{name} in {project}" if project and name != issue_id else name

    def stale_project(self, issue_id: str) -> str | None:
        """Why a command for ``issue_id`` cannot reach its scheduler now, as the fleet port
        would refuse it: its fleet project is stale (``api is stale (no word from it for
        12 s): not sent; ...``, ``fleet.refusals``); ``None`` otherwise."""
        from symphony_tui.console.fleet import project_of, project_row

        project = project_row(self.fleet_snapshot, project_of(self.fleet_snapshot, issue_id))
        if project is None or project.link_state != "stale":
            return None
        from symphony_tui.fleet.refusals import stale_refusal

        return stale_refusal(project.name, project.age_s)

    def running_ids(self) -> set[str]:
        return {r.issue_id for r in self.snapshot.running} if self.snapshot else set()

    def running_row(self, issue_id: str | None) -> RunningRow | None:
        rows = self.snapshot.running if self.snapshot else ()
        return next((r for r in rows if r.issue_id == issue_id), None)

    def workspace_of(self, issue_id: str | None) -> tuple[str, str | None, str, str | None] | None:
        """``(issue_id, identifier, path, worker host)`` of the issue's workspace (its live
        run's, else a recovered one); the host is ``None`` for this machine (in a fleet
        console, a project's run without a worker host is on the project's machine)."""
        if issue_id is None or self.snapshot is None:
            return None
        from symphony_tui.scheduler.workspace_view import locate  # after the first snapshot

        found = locate(self.snapshot, issue_id)
        if found is None:
            return None
        host = found[4]
        if host is None:  # a fleet project on another machine: its workspaces are there
            from symphony_tui.console.fleet import project_of, project_row

            project = project_row(self.fleet_snapshot, project_of(self.fleet_snapshot, found[0]))
            host = project.machine if project is not None else None
        return (found[0], found[1], found[2], host)

    def session_of(self, issue_id: str) -> str | None:
        """The thread / session id of the issue's run or recovered workspace."""
        snap = self.snapshot
        if snap is None:
            return None
        for row in snap.running:
            if row.issue_id == issue_id:
                return row.thread_id or row.session_id
        for ws in snap.recovered:
            if ws.issue_id == issue_id:
                return ws.thread_id or ws.conversation_id or ws.session_id
        return None
