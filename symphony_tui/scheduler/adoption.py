"""Start-up re-adoption of agents an earlier scheduler left running (before the first
dispatch; docs/architecture.md "Start-up").

With ``codex.transport: unix`` each run's app-server is detached (agents/codex/detached.py)
and its workspace manifest records it (``session.agent``: pid, process group, start time,
socket, ``adoptable: true``), with the thread and the turn in flight (``session.thread_id``,
``session.turn_id``) and the attempt and its turn count (``run.attempt``,
``run.turn_count``). A scheduler that died without stopping them (``kill -9``, a crash)
leaves them working. At start-up, before the terminal-workspace sweep and the first tick,
:func:`adopt_leftovers` reads the local workspaces' manifests (in a thread) and, for every
recorded agent still alive:

* its issue still active, not held, not claimed: the issue is claimed again as the same
  run attempt (``Dispatcher.adopt``); its worker re-attaches to the app-server and waits
  for the turn in flight (``Worker``: no ``before_run``, no new thread, no new turn);
* otherwise (the issue left the active states, the operator holds it, the tracker no
  longer has it) its process group is ended and its manifest says it is no longer
  adoptable.

On a worker host (``worker.ssh_hosts``) the app-server runs detached there
(agents/codex/remote_detached.py) and the manifest, kept on the host, records the host, the
socket there and the process group's pgid file. Hosts are reached in the background, so
their agents are found when each host is first reached (:class:`~symphony_tui.scheduler.
startup.HostArrivals`), before the host's leftover processes are reaped and before it takes
work: :func:`host_leftovers` picks the live ones, the reaper leaves them alone, and the loop
applies the same rules (``HostLeftovers`` input, :func:`adopt_host_leftovers`); one whose
issue runs already (dispatched elsewhere before the host was reached) is ended.

A managed OpenHands / OpenCode server is not per run: the one a crashed scheduler left
serving is taken over (:func:`take_over_servers`; agents/local_server.py), and each of its
issues' ordinary dispatch re-attaches to the recorded conversation or session and adopts
the run in flight.

A re-adopted run is the same run: it carries over the tokens, spend and usage status that
the usage ledger last recorded for its session (:func:`carry_over`), so its row and its
``run_ended`` read the whole run; the totals already hold that part, and the run's new
ledger records leave it out (``usage/ledger.py``).

A recorded agent found dead is left alone: its issue is dispatched as usual (a new
session resumes the thread). One that does not re-attach within
``codex.reattach_timeout_ms`` is ended by its session and the attempt fails, then is
retried. A scheduler that stops on the operator's word ends its agents
(``Orchestrator.shutdown``): nothing is left running.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from symphony_tui.agents.base import AgentError
from symphony_tui.agents.codex.detached import DetachedAgent, alive, kill_pgid, remove_socket
from symphony_tui.agents.codex.remote_detached import HostPlace, stop_on_host
from symphony_tui.domain import EventKind, Issue
from symphony_tui.hosts.ssh import SshTarget
from symphony_tui.scheduler.run import Run
from symphony_tui.scheduler.session_events import thread_key
from symphony_tui.scheduler.state import SchedulerState
from symphony_tui.trackers.base import Tracker, TrackerError
from symphony_tui.workspaces.manifest import manifest_dir, read_manifest


@dataclass(frozen=True)
class Leftover:
    """A live agent an earlier scheduler recorded in workspace ``path``: its manifest
    sections (``issue``, ``run``, ``session``) and the agent."""

    path: Path
    issue: dict[str, Any]
    run: dict[str, Any]
    session: dict[str, Any]
    agent: DetachedAgent

    @property
    def issue_id(self) -> str | None:
        value = self.issue.get("id")
        return str(value) if value else None

    @property
    def attempt(self) -> int | None:
        value = self.run.get("attempt")
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    @property
    def turn_count(self) -> int:
        value = self.run.get("turn_count")
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
        return 1


def local_workspaces(root: Path) -> list[Path]:
    """The folders under the workspace root that hold manifests (blocking)."""
    try:
        entries = list(os.scandir(root))
    except OSError:
        return []
    found = []
    for entry in entries:
        with contextlib.suppress(OSError):
            if entry.is_dir(follow_symlinks=False) and manifest_dir(Path(entry.path)).is_dir():
                found.append(Path(entry.path))
    return found


def find_leftovers(workspaces: Iterable[Path]) -> list[Leftover]:
    """The live re-adoptable agents recorded in ``workspaces``' manifests (blocking: run
    it in a thread). Dead ones and workspaces without one are left out."""
    found = []
    for ws in workspaces:
        manifest = read_manifest(ws)
        session = manifest.get("session", {})
        agent = DetachedAgent.from_facts(session.get("agent"))
        if agent is None or agent.host is not None or not alive(agent):
            continue
        found.append(
            Leftover(ws, manifest.get("issue", {}), manifest.get("run", {}), session, agent)
        )
    return found


def carry_over(state: SchedulerState, run: Run, thread_id: object) -> None:
    """Give the re-adopted ``run`` (not claimed yet; its thread ``thread_id`` as its manifest
    records it) what the usage ledger last counted for the same session: its tokens and
    spend (``Run.carried``) and whether its backend had reported usage. No-op without a
    ledger, a thread or an unfinished record of that session."""
    if state.usage is None or not isinstance(thread_id, str) or not thread_id:
        return
    mark = state.usage.carry_over(thread_key(run.issue.id, run.backend, thread_id))
    if mark is None:
        return
    whole = mark.whole
    run.tokens = whole
    run.carried = whole
    run.usage_reported = mark.reported and not whole.is_zero


def _issue_from_manifest(section: dict[str, Any]) -> Issue | None:
    try:
        return Issue.model_validate(
            {k: section.get(k) for k in ("id", "identifier", "title", "state", "url")}
        )
    except ValidationError:
        return None


async def adopt_leftovers(
    state: SchedulerState,
    tracker: Tracker,
    adopt: Callable[[Issue, Leftover], Run],
) -> int:
    """Re-adopt or end every live agent the local workspaces record (see the module
    docstring); ``adopt(issue, leftover)`` claims the issue and starts its worker
    (``Dispatcher.adopt``). Returns how many runs were re-adopted."""
    root = state.workspaces.root
    found = await asyncio.to_thread(lambda: find_leftovers(local_workspaces(root)))
    if not found:
        return 0
    ids = [f.issue_id for f in found if f.issue_id]
    fresh: dict[str, Issue] | None
    try:
        fresh = {i.id: i for i in await tracker.fetch_issues_by_ids(ids)}
    except TrackerError as exc:
        state.log("warning", "re-adoption: tracker refresh failed", error=str(exc))
        fresh = None  # the manifests' issues; the first reconcile checks them
    tracker_cfg = state.settings.tracker
    adopted = 0
    for left in found:
        issue_id = left.issue_id
        if issue_id is not None and issue_id in state.running:
            continue
        issue = (
            _issue_from_manifest(left.issue) if fresh is None else fresh.get(issue_id or "", None)
        )
        if issue is None:
            why = "its issue is not in the tracker"
        elif not tracker_cfg.is_active(issue.state) or tracker_cfg.is_terminal(issue.state):
            why = f"its issue is {issue.state}"
        elif left.run.get("held") is True or issue.id in state.held:
            why = "the operator holds its issue"
        else:
            adopt(issue, left)
            adopted += 1
            continue
        await end_leftover(state, left.path, left.agent, why, issue)
    return adopted


async def take_over_servers(state: SchedulerState, backend: object) -> None:
    """Start-up: the managed agent server a crashed scheduler left serving (OpenHands,
    OpenCode: ``take_over_server``) becomes this scheduler's now, so it ends with this
    scheduler even when no issue needs it again; a failure is logged."""
    take = getattr(backend, "take_over_server", None)
    if take is None:
        return
    try:
        if await take():
            state.emit_system(
                EventKind.RECONCILE,
                f"took over the {state.settings.agent.backend} server an earlier scheduler "
                "left running",
            )
    except AgentError as exc:
        state.log("warning", "agent server take-over failed", error=str(exc))


async def end_leftover(
    state: SchedulerState, ws: Path, agent: DetachedAgent, why: str, issue: Issue | None
) -> None:
    """End a detached agent that is not re-adopted: its process group (SIGTERM, then
    SIGKILL), its socket, and ``adoptable`` false in its manifest; an event says why."""
    await kill_pgid(agent.pgid)
    remove_socket(agent)
    state.workspaces.manifests.write(ws, "session", "agent", agent=agent.facts(adoptable=False))
    state.emit_system(
        EventKind.RECONCILE,
        f"ended the agent an earlier scheduler left running in {ws.name} (pid {agent.pid}): {why}",
        issue=issue,
    )


async def host_leftovers(
    target: SshTarget, manifests: Iterable[tuple[Path, dict[str, dict[str, Any]]]]
) -> list[Leftover]:
    """The live re-adoptable agents that the manifests of ``target``'s workspaces record
    for that host (one liveness command per recorded agent; a host that stops answering
    lists none)."""
    found = []
    for ws, manifest in manifests:
        session = manifest.get("session", {})
        agent = DetachedAgent.from_facts(session.get("agent"))
        if agent is None or agent.host != target.name:
            continue
        if await HostPlace(target, agent, str(ws)).alive() is not True:
            continue
        found.append(
            Leftover(ws, manifest.get("issue", {}), manifest.get("run", {}), session, agent)
        )
    return found


def adopt_host_leftovers(
    state: SchedulerState,
    host: str,
    found: Iterable[Leftover],
    adopt: Callable[[Issue, Leftover, str], Run],
    end: Callable[[Leftover, str], None],
) -> int:
    """In the loop: re-adopt each of ``host``'s live agents (``adopt(issue, leftover,
    host)``) whose issue (as its manifest names it: the first reconcile checks it against
    the tracker) is active, not held and not running already; ``end(leftover, why)`` the
    others. Returns how many were re-adopted."""
    tracker_cfg = state.settings.tracker
    adopted = 0
    for left in found:
        issue = _issue_from_manifest(left.issue)
        if issue is None:
            end(left, "its manifest names no issue")
        elif issue.id in state.running:
            end(left, f"{issue.identifier} runs already")
        elif not tracker_cfg.is_active(issue.state) or tracker_cfg.is_terminal(issue.state):
            end(left, f"its issue is {issue.state}")
        elif left.run.get("held") is True or issue.id in state.held:
            end(left, "the operator holds its issue")
        else:
            adopt(issue, left, host)
            adopted += 1
    return adopted


async def end_host_leftover(
    state: SchedulerState, target: SshTarget, left: Leftover, why: str
) -> None:
    """End a worker host's detached agent that is not re-adopted (its group there, its
    socket); an event says why."""
    said = await stop_on_host(target, left.agent, str(left.path))
    state.emit_system(
        EventKind.RECONCILE,
        f"ended the agent an earlier scheduler left running in {left.path.name} on "
        f"{target.name} (pid {left.agent.pid}: {said}): {why}",
    )
