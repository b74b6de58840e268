"""Start-up work before the first tick (leftover agents of a crashed scheduler ended, spec
§8.6 terminal workspace cleanup), and what runs when a worker host is reached (first
contact, or back after being down)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Protocol

from symphony_tui.domain import EventKind, Issue, RecoveredWorkspace
from symphony_tui.hosts.ssh import HostTargets
from symphony_tui.scheduler.adoption import Leftover, host_leftovers
from symphony_tui.scheduler.inbox import HoldsFound, HostLeftovers, RescanDue, SystemNoted
from symphony_tui.scheduler.mailbox import Mailbox
from symphony_tui.scheduler.state import SchedulerState
from symphony_tui.trackers.base import Tracker, TrackerError
from symphony_tui.workspaces.errors import WorkspaceError
from symphony_tui.workspaces.manifest import manifest_mtime, read_section
from symphony_tui.workspaces.paths import workspace_key


async def reap_leftovers(state: SchedulerState) -> None:
    """Before any dispatch: end the agent process groups an earlier scheduler on this
    machine left running (``WorkspaceManager.reap``; the hosts' are ended when each is
    reached, :class:`HostArrivals`), so no issue runs twice. Agents recorded as
    re-adoptable are left to recovery. A failure is logged; start-up goes on."""
    try:
        ended, adoptable, gone = await state.workspaces.reap()
    except Exception as exc:  # a failed reap never blocks start-up
        state.log("warning", "leftover agent reap failed", error=str(exc))
        return
    _report_leftovers(state, ended, "on this machine")
    if gone:
        keys = [line.split(" ", 1)[0] for line in gone]
        state.emit_system(
            EventKind.WARNING,
            f"the earlier scheduler ended without closing {len(keys)} run(s) (killed or "
            f"crashed; their agents ended with it): {_names(keys)}; each is dispatched again",
        )
        state.log("warning", "runs left open by an earlier scheduler", groups=_groups(gone))
    if adoptable:
        state.log("info", "agents left for re-adoption", groups=_groups(adoptable))


def _groups(lines: list[str]) -> str:
    return ",".join(x.replace(" ", ":") for x in lines)


class Notes(Protocol):
    """Where start-up work says what it did: the state itself (start-up, before the first
    dispatch) or :class:`PostedNotes` (a task off the loop)."""

    def emit_system(self, kind: EventKind, message: str, *, issue: Issue | None = None) -> None:
        """A scheduler event for the history."""
        ...


class PostedNotes:
    """:class:`Notes` posted to the loop (``SystemNoted``), for a task off the loop."""

    def __init__(self, mailbox: Mailbox) -> None:
        self._mailbox = mailbox

    def emit_system(self, kind: EventKind, message: str, *, issue: Issue | None = None) -> None:
        self._mailbox.post(SystemNoted(kind, message, issue))


def _report_leftovers(
    state: SchedulerState, ended: list[str], where: str, notes: Notes | None = None
) -> None:
    """One warning event (to ``notes``, default the state) and log line for the leftover
    groups ``ended`` (``"<key> <pgid>"`` each) ``where`` (``on <host>``)."""
    if ended:
        (notes or state).emit_system(
            EventKind.WARNING,
            f"ended {len(ended)} leftover process group(s) of earlier runs {where}",
        )
        state.log("warning", "leftover processes ended", where=where, groups=_groups(ended))


async def sweep_terminal_workspaces(
    state: SchedulerState, tracker: Tracker, *, hosts: bool = True
) -> dict[str, Issue]:
    """Remove workspaces of issues already in terminal states (§8.6), and say so in one
    event naming them. Only a folder the scheduler made for that issue goes: its
    ``.symphony/issue.json`` names the issue (any other folder under the root is left
    alone, with a warning); one written to less than ``workspace.keep_terminal_ms`` ago is
    kept. Failures are logged; start-up goes on. ``hosts``: also on every worker host, one
    after the other (the scheduler passes False and sweeps each host when it reaches it,
    :class:`HostArrivals`). Returns the terminal issues by workspace key ({} when the
    tracker could not say)."""
    try:
        terminal = await tracker.fetch_issues_by_states(
            list(state.settings.tracker.terminal_states)
        )
    except TrackerError as exc:
        state.log("warning", "startup terminal sweep skipped", error=str(exc))
        return {}
    keep_ms = state.settings.workspace.keep_terminal_ms
    now = time.time()
    removed: list[str] = []
    kept: list[str] = []
    for issue in terminal:
        try:
            path = state.workspaces.path_for(issue.identifier)
        except WorkspaceError:
            continue
        if not path.exists() and not path.is_symlink():
            continue
        if not made_for(path, issue):
            state.emit_system(
                EventKind.WARNING,
                f"start-up cleanup left {path} alone: no workspace manifest there names "
                f"{issue.identifier} (only folders the scheduler made for an issue are removed)",
                issue=issue,
            )
            continue
        if keep_ms and (now - manifest_mtime(path)) * 1000 < keep_ms:
            kept.append(issue.identifier)
            continue
        try:
            await state.workspaces.remove(issue.identifier)
            removed.append(issue.identifier)
            state.emit_system(
                EventKind.RECONCILE, "removed workspace of terminal issue", issue=issue
            )
        except Exception as exc:  # a sweep failure never blocks start-up
            state.log("warning", "workspace sweep failed", error=str(exc))
    _announce(state, removed, kept, keep_ms)
    by_key = {workspace_key(i.identifier): i for i in terminal}
    if hosts and state.settings.worker.enabled:
        for host in state.settings.worker.ssh_hosts:
            await sweep_host(state, host, by_key)
    return by_key


def made_for(path: Path, issue: Issue) -> bool:
    """Whether ``path`` is a folder the scheduler made for ``issue``: its manifest's
    ``issue`` section (workspaces/manifest.py) names the issue's id or identifier."""
    if path.is_symlink() or not path.is_dir():
        return False
    recorded = read_section(path, "issue")
    return bool(recorded) and (
        recorded.get("id") == issue.id or recorded.get("identifier") == issue.identifier
    )


def _announce(state: SchedulerState, removed: list[str], kept: list[str], keep_ms: int) -> None:
    """One event for the operator: which terminal issues' workspaces the start-up cleanup
    removed (and how to keep them), and which it kept for ``workspace.keep_terminal_ms``."""
    if removed:
        state.emit_system(
            EventKind.WARNING,
            f"start-up cleanup removed the workspaces of {len(removed)} issue(s) in a terminal "
            f"state (spec §8.6): {_names(removed)}; workspace.keep_terminal_ms keeps them",
        )
    if kept:
        state.emit_system(
            EventKind.RECONCILE,
            f"start-up cleanup kept the workspaces of {len(kept)} issue(s) in a terminal state "
            f"(workspace.keep_terminal_ms: {keep_ms}): {_names(kept)}",
        )


def _names(identifiers: list[str], most: int = 10) -> str:
    shown = ", ".join(identifiers[:most])
    return shown + (f" and {len(identifiers) - most} more" if len(identifiers) > most else "")


async def sweep_host(
    state: SchedulerState,
    host: str,
    terminal: dict[str, Issue],
    found: list[RecoveredWorkspace] | None = None,
    notes: Notes | None = None,
) -> None:
    """The same on worker host ``host``: workspaces whose manifests name a
    terminal issue are removed there, ``before_remove`` included; ``found``: the host's
    workspaces when already listed. An unreachable host lists nothing. Events go to
    ``notes`` (default the state)."""
    if found is None:
        try:
            found = await asyncio.to_thread(state.workspaces.remote.recover_sync, host)
        except Exception as exc:
            state.log("warning", "workspace sweep failed", host=host, error=str(exc))
            return
    for ws in found:
        issue = terminal.get(ws.key)
        if issue is None or (ws.issue_id != issue.id and ws.issue_identifier != issue.identifier):
            continue  # only a folder whose manifest names the terminal issue
        try:
            await state.workspaces.remove(issue.identifier, host=host, path=Path(ws.path))
            (notes or state).emit_system(
                EventKind.RECONCILE, f"removed workspace of terminal issue on {host}", issue=issue
            )
        except Exception as exc:  # a sweep failure never blocks start-up
            state.log("warning", "workspace sweep failed", host=host, error=str(exc))


class HostArrivals:
    """What runs each time the scheduler reaches a worker host, before the host takes
    work (``HostProbes.on_reached``): what earlier runs left running there is ended
    (``RemoteWorkspaces.reap``: the agent or a hook of a run that failed over while the
    host was unreachable, or of a scheduler that crashed); at the first contact the
    operator's holds and budget extensions its workspaces kept are restored and the
    start-up sweep of ``terminal`` runs there; then the recovered workspaces are
    rescanned. Raises what ``reap`` raises (the host was lost again).

    It runs in the host's probe task: it reads the state and does the host's I/O, and
    posts what changes the state to ``mailbox`` (events, the holds found, the live detached
    agents found at the first contact, to be re-adopted: ``HostLeftovers``, the rescan),
    ahead of the probe's outcome."""

    def __init__(self, state: SchedulerState, terminal: dict[str, Issue], mailbox: Mailbox) -> None:
        self._state = state
        self._terminal = terminal
        self._mailbox = mailbox
        self._notes = PostedNotes(mailbox)
        self._targets = HostTargets(lambda: state.settings)
        self._swept: set[str] = set()

    async def reached(self, host: str) -> None:
        state = self._state
        # Every remote run's, not only this host's: hosts may share a root (NFS home).
        in_use = [
            run.workspace.name if run.workspace is not None else workspace_key(run.issue.identifier)
            for run in state.running.values()
            if run.worker_host is not None
        ]
        left: list[Leftover] = []
        manifests = None
        if host not in self._swept:
            manifests = await asyncio.to_thread(state.workspaces.remote.manifests_sync, host)
            left = await host_leftovers(self._targets(host), manifests)
            in_use += [x.path.name for x in left]  # the reaper leaves them to re-adoption
        ended = await state.workspaces.remote.reap(host, in_use)
        _report_leftovers(state, ended, f"on {host}", self._notes)
        if host not in self._swept:  # first contact
            self._swept.add(host)
            found = await asyncio.to_thread(state.workspaces.remote.recover_sync, host, manifests)
            # The holds and budget extensions its run manifests kept, before it takes work.
            self._mailbox.post(HoldsFound(tuple(found)))
            # a live agent's workspace is not swept under it: the reconcile after its
            # re-adoption ends a run whose issue is terminal, then its workspace goes
            adopting = {x.path.name for x in left}
            swept = [w for w in found if w.key not in adopting]
            await sweep_host(state, host, self._terminal, swept, self._notes)
        if left:
            self._mailbox.post(HostLeftovers(host, tuple(left)))
        self._mailbox.post(RescanDue())
