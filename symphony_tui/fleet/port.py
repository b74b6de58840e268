"""A :class:`~symphony_tui.scheduler.port.SchedulerPort` over many schedulers' APIs: the
port of ``symphony-tui fleet`` (docs/fleet.md).

Each scheduler is a **project**: one :class:`~symphony_tui.api.client.RemotePort` (the
event stream, its reconnects with ``Last-Event-ID`` and jittered backoff), run as its own
task, so a slow, frozen or dead scheduler never holds up the others or the console. Each
target (:mod:`symphony_tui.fleet.targets`) has a task of its own too, which finds its
schedulers (in a thread: files, ``ssh``) and finds them again: every
:data:`LOCAL_EVERY_S` on this machine, every :data:`SSH_EVERY_S` over ssh (sooner while one
of its projects is not live), so a scheduler started, stopped or restarted shows without a
restart of the console; a restarted scheduler takes its old row (same workflow).

``snapshot()`` is the merge (:mod:`symphony_tui.fleet.merge`), cached: a project's rows
are namespaced once per snapshot its scheduler sends, and the whole is rebuilt only when
some project's snapshot or row (link state, whole seconds of age, counts) changed.
Events are numbered with the fleet's own ``seq`` when first handed to a reader
(``events_since``): until then they wait, ordered by time, so backlogs that arrive between
two reads (each scheduler's history, sent when the fleet connects) read by time, not
project by project; a number once given never changes, and every later event gets a
larger one, so a reader holding a position loses and doubles nothing. Each scheduler's
events are taken once, in its order, which the time order never changes (``RemotePort``
drops what it already has, a reconnect resumes after the last event id), so a frozen
scheduler that resumes loses and doubles nothing; a restarted one's history is taken up
to where its earlier process was followed (``RemotePort``'s ``taken``), once.
One issue's transcript (``events_since(seq, issue_id="<project>/<id>")``) is its project's
own, numbered by that scheduler (its history reaches back before the fleet connected), so a
reader keeps one position per issue, as it does for one scheduler. Across a restart it is
what the project's earlier processes held of it when the fleet left them, then the new
one's (which starts empty), numbered on after the earlier ones'
(:class:`~symphony_tui.api.transcripts.KeptTranscripts`); a new forward to the same
process reads that process's again, numbered as before. Commands go to one
project's API (``X-Symphony-Via: fleet``), by the prefix of the id they name, else by
``command.project``; the answer names the project (``alpha · DEMO-3: approved``, a refusal
``alpha: why``).

One scheduler is one project (:mod:`symphony_tui.fleet.identity`): ``local`` leaves every
scheduler that a workflow or URL target names (its workflow, its address) to that target,
and drops one it had taken; two projects whose ports follow one scheduler process (its
workflow and its URL, ``localhost`` and ``127.0.0.1``) show it once: the second of two
lines reads ``duplicate`` and shows none of its rows or events, one found by ``local`` or
``ssh://`` is dropped, and the one that keeps it logs none of what the other logged.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import dataclasses
import heapq
import math
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import PurePath
from typing import Any, TypeVar

import httpx

from symphony_tui.api.client import RemoteError, RemotePort, Taken
from symphony_tui.api.follow import in_thread
from symphony_tui.api.ssh import SshTunnel
from symphony_tui.api.transcripts import KeptTranscripts
from symphony_tui.domain import AgentEvent, Snapshot
from symphony_tui.domain.audit import AuditEntry
from symphony_tui.domain.commands import Answer, Approve, Command, Deny
from symphony_tui.domain.diff import DiffPage, WorkspaceDiff
from symphony_tui.domain.snapshot import ProjectRow
from symphony_tui.domain.tokens import TokenUsage
from symphony_tui.fleet import names
from symphony_tui.fleet import targets as tg
from symphony_tui.fleet.identity import NAMING, Process, designates, rank
from symphony_tui.fleet.merge import Parts, event_of, merge, parts_of, split_id
from symphony_tui.fleet.refusals import lost_refusal, stale_refusal
from symphony_tui.hosts.ssh import SshError
from symphony_tui.scheduler.port import CommandResult, SchedulerPort, TranscriptGap
from symphony_tui.text import one_line

LOCAL_EVERY_S = 2.0
SSH_EVERY_S = 30.0
SSH_RETRY_S = 5.0
#: A project is stale after this long without a word (the server's keepalive is every 5 s).
STALE_AFTER_S = 8.0
RING = 20_000
#: Events waiting for their number beyond this many are numbered, oldest first (a fleet
#: whose log is not read for a while: the wait is for ordering, not for keeping).
PENDING = 5_000
VIA = "fleet"

T = TypeVar("T")


@dataclass(frozen=True)
class FleetLink:
    """The fleet's link as a whole (``SchedulerPort.link``): ``live`` while any project
    is; ``age_s`` the freshest project's. Each project's own is its :class:`ProjectRow`."""

    state: str
    age_s: float | None
    via: str = "fleet"
    error: str | None = None
    stopped_at: datetime | None = None


#: Link states whose row shows what its scheduler last said (its counts, totals and
#: figures, and their age): the link is lost, the scheduler is gone without a word
#: (``lost``: its agents may still run), its token cannot be had (``config``), or it
#: stopped, so nothing newer (a stopped one said it runs nothing: its counts are 0, see
#: :meth:`Project.row`).
LOST_STATES = frozenset({"reconnecting", "stale", "down", "refused", "lost", "config", "stopped"})


@dataclass(frozen=True)
class Duplicate:
    """A project whose port follows the very scheduler process that ``of`` (another
    project, ranked before it: :func:`~symphony_tui.fleet.identity.rank`) shows:
    ``process``, and ``said``, the row's one line."""

    process: Process
    of: str
    said: str


class Project:
    """One scheduler of the fleet: its name (unique, fixed for the fleet's life), the
    target it came from, and its port while connected (``None``: not found or not
    reachable, ``error`` says why; ``misconfigured``: its token cannot be had, one line).

    ``last``: its scheduler's last snapshot as its port holds it (kept once the port is
    gone; a scheduler that said it stopped has no runs, retry entries or approvals: none
    go on; one gone without a word keeps those it last said, as unknown), ``heard_at``:
    when it was last heard from (a ``clock`` reading, seconds); both ``None`` until it is
    first heard from. While its link is lost (:data:`LOST_STATES`) its row keeps them.
    ``clean_stop``: its scheduler said it was stopping (``stopping`` frame, 503
    ``scheduler_stopping``); ``stopped_with``: ``(running, retrying, approvals)`` it last
    said before; ``stop_reason``: the reason it gave. False and ``None`` while it runs,
    before it is heard from, and when it went without a word.

    ``duplicate``: set while its port follows the process another project shows (its row
    reads ``duplicate``, it has no rows in the panes and logs no event), until its port
    follows another process."""

    def __init__(
        self,
        name: str,
        target: tg.Target,
        key: str,
        machine: str | None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self.target = target
        self.key = key
        self.machine = machine
        self.endpoint: tg.Endpoint | None = None
        self.port: RemotePort | None = None
        self.task: asyncio.Task | None = None
        self.tunnel: SshTunnel | None = None
        self.error: str | None = None
        self.misconfigured: str | None = None
        self.gone: str | None = None  # its scheduler is no longer announced there
        self.parts: Parts | None = None
        self.last: Snapshot | None = None
        self.heard_at: float | None = None
        #: The newest event taken from an earlier port of this project: a restarted
        #: scheduler's history up to there is not taken again.
        self.taken: Taken | None = None
        #: Each issue's transcript from this project's earlier scheduler processes.
        self.transcripts = KeptTranscripts()
        self.stopped_with: tuple[int, int, int] | None = None
        self.clean_stop = False
        self.stop_reason: str | None = None
        self.duplicate: Duplicate | None = None
        #: Its process when the fleet last sorted out who shows which process.
        self.sorted: Process | None = None
        #: ``(process, seq)``: that process's events up to ``seq`` are another project's,
        #: logged under its name before this one was found to show that process.
        self.skip: tuple[Process, int] | None = None
        #: ``(process, seq)``: the newest event of that process this project logged.
        self.logged: tuple[Process, int] | None = None
        #: Found by ``local`` or ``ssh://`` and dropped: another project shows its process.
        self.dropped = False
        self._clock = clock

    def process(self) -> Process | None:
        """The scheduler process its port follows, once it has said when it started."""
        if self.port is None:
            return None
        pid = self.endpoint.pid if self.endpoint is not None else None
        return Process.of(self.port.snapshot(), pid)

    def remember(self) -> None:
        """Take ``last``, ``heard_at`` and how it stopped from its port, when that has heard
        from its scheduler (called before the port is read, and before it is dropped). A
        scheduler gone without a word keeps the snapshot it last sent, runs and all. A
        duplicate remembers nothing: what it heard is another project's."""
        port = self.port
        if port is None or self.duplicate is not None:
            return
        link = port.link()
        if link.age_s is None:
            return
        self.heard_at = self._clock() - link.age_s
        before = port.before_stop
        self.clean_stop = port.said_stopping
        self.last = port.last_said()
        self.stopped_with = _had(before) if self.clean_stop and before is not None else None
        self.stop_reason = link.error if self.clean_stop else None

    def state(self) -> tuple[str, float | None, str | None]:
        """``(link state, age in seconds, error)`` now; the age is since its scheduler was
        last heard from, by this port or an earlier one (``None``: never, or connecting).
        ``stopped`` only for a scheduler that said it was stopping; one gone without a word
        (its process ended, its host no longer announces it) is ``lost``, unless no word of
        it ever reached this fleet (its API refused this fleet's token, say): then nothing
        is known to run there, and it is ``down``, its error saying it is gone; one whose
        port follows another project's process is ``duplicate``, its error saying whose."""
        if self.duplicate is not None:
            return "duplicate", None, self.duplicate.said
        if self.port is None:
            if self.gone is not None:
                ended = "stopped" if self.clean_stop else "lost"
                return ended, self._since_heard(), self.gone
            if self.misconfigured:
                return "config", self._since_heard(), self.misconfigured
            if self.error:
                return "down", self._since_heard(), self.error
            return "connecting", None, None
        link = self.port.link()
        state: str = link.state
        if state == "connecting" and link.error:
            # never reached: the API refused this fleet's token, or nothing answers there
            state = "refused" if link.refused else "down"
        elif state == "stopped" and self._never_heard():
            pid = self.endpoint.pid if self.endpoint is not None else None
            which = f" (pid {pid})" if pid is not None else ""
            return (
                "down",
                None,
                f"its scheduler{which} no longer serves; this fleet never heard from it",
            )
        elif state == "stopped" and self._went_without_word():
            state = "lost"
        age = link.age_s
        if age is None and state != "connecting":  # this port never heard it: an earlier one
            age = self._since_heard()
        return state, age, link.error

    def source(self) -> Snapshot | None:
        """The snapshot its rows in the panes come from: its port's; for a scheduler gone
        without a word (``lost``), the last it sent, runs and approvals kept (they read
        unknown: its agents may still run), also once its port is dropped. A duplicate's:
        none (another project shows them)."""
        if self.duplicate is not None:
            return None
        if self._went_without_word() and self.last is not None:
            return self.last
        return self.port.snapshot() if self.port is not None else None

    def _went_without_word(self) -> bool:
        """Its scheduler is gone without saying it was stopping: its port found its process
        ended, or its host no longer announces it, and no word of a stop came. A port that
        never heard from its process (followed again while its note outlived it) goes by
        what an earlier port heard."""
        port = self.port
        if port is None:
            return self.gone is not None and not self.clean_stop
        if not port.gone:
            return False
        return port.link().age_s is not None or not self.clean_stop

    def _never_heard(self) -> bool:
        """Its port's scheduler ended without a word, and neither that port nor an earlier
        one ever heard from this project."""
        port = self.port
        if port is None or not port.gone:
            return False
        return port.link().age_s is None and self.heard_at is None and not self.clean_stop

    def _since_heard(self) -> float | None:
        return None if self.heard_at is None else max(0.0, self._clock() - self.heard_at)

    def row(self) -> ProjectRow:
        """Its row now: a lost link's (:data:`LOST_STATES`) with what its scheduler last
        said, a live or connecting one's with what its port holds. A stopped scheduler's
        counts are what runs and waits there now (none) and its capacity 0: nothing runs
        there until it is started again; ``stopped_with`` has what it had, ``stop_reason``
        why (a clean stop is no error). A ``lost`` one's are what it last said (its agents
        may still run). A duplicate's row says whose process it follows, and nothing of it."""
        self.remember()
        state, age, error = self.state()
        if self.duplicate is not None:
            snap = self.port.snapshot() if self.port is not None else None
            return ProjectRow(
                name=self.name,
                target=self.target.text,
                workflow_path=snap.workflow_path if snap is not None else "",
                machine=self.machine,
                link_state=state,
                error=error,
            )
        snap = self.port.snapshot() if self.port is not None else None
        if state in LOST_STATES and self.last is not None:
            snap = self.last
        stop_reason = None
        if state == "stopped":
            stop_reason, error = self.stop_reason or error, None
        if error is None and snap is not None:
            error = snap.config_error or snap.tracker_error
        counts = (0, 0, 0) if snap is None else _counts(snap)
        stopped_with = None
        if state == "stopped":
            # nothing runs or waits there now (its panes show none); what did is stopped_with
            stopped_with, counts = self.stopped_with or counts, (0, 0, 0)
        workflow = (snap.workflow_path if snap is not None else "") or (
            self.endpoint.workflow_path if self.endpoint is not None else ""
        )
        return ProjectRow(
            name=self.name,
            target=self.target.text,
            workflow_path=workflow,
            machine=self.machine,
            link_state=state,
            age_s=None if age is None else float(int(age)),
            error=one_line(error, 300) if error else None,
            running=counts[0],
            retrying=counts[1],
            approvals=counts[2],
            dispatch_paused=snap.dispatch_paused if snap is not None else False,
            totals=snap.totals if snap is not None else TokenUsage(),
            rate_limits=snap.rate_limits if snap is not None else None,
            stopped_with=stopped_with,
            stop_reason=one_line(stop_reason, 300) if stop_reason else None,
            **(_figures(snap, can_run=state != "stopped") if snap is not None else {}),
        )


def _counts(snap: Snapshot) -> tuple[int, int, int]:
    """``(running, retrying, approvals)`` of ``snap``."""
    return len(snap.running), len(snap.retrying), len(snap.approvals)


def _had(snap: Snapshot) -> tuple[int, int, int]:
    """``(running, retrying, approvals)`` a scheduler had as it began stopping: what
    ``snap`` (the last it sent before it said so) says it had then, else its counts (one
    that said so before its shutdown began, as a detached console's does, or an older
    one). A SIGTERM's shutdown ends the runs first, so by its ``stopping`` frame its
    counts are 0."""
    return snap.stopping_with if snap.stopping_with is not None else _counts(snap)


def _figures(snap: Snapshot, *, can_run: bool = True) -> dict[str, Any]:
    """The figures of a project's snapshot its :class:`ProjectRow` repeats (what a console
    filtered to that project shows); a scheduler that cannot run work (``can_run``
    False: it stopped) has no capacity."""
    return {
        "max_concurrent_agents": snap.max_concurrent_agents if can_run else 0,
        "seconds_running": snap.seconds_running,
        "token_rate_per_min": snap.token_rate_per_min,
        "token_history": snap.token_history,
        "runs_not_reported": snap.runs_not_reported,
        "runs_unpriced": snap.runs_unpriced,
    }


class FleetPort(SchedulerPort):
    """The port (module doc). ``targets``: what to watch (``local``: every scheduler of
    this user here). :meth:`run` follows them until :meth:`close`."""

    detach_only = True
    carries_stop = False

    def __init__(
        self,
        targets: Sequence[tg.Target],
        *,
        notices: Sequence[str] = (),
        stale_after_s: float = STALE_AFTER_S,
        local_every_s: float = LOCAL_EVERY_S,
        ssh_every_s: float = SSH_EVERY_S,
        ssh_retry_s: float = SSH_RETRY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.targets = tuple(targets)
        self.notices = tuple(notices)  # one line each: fleet-file lines that were skipped
        self.stale_after_s = stale_after_s
        self.local_every_s = local_every_s
        self.ssh_every_s = ssh_every_s
        self.ssh_retry_s = ssh_retry_s
        self._clock = clock
        self.projects: dict[str, Project] = {}
        self._by_key: dict[tuple[str, str], Project] = {}
        self._ring: deque[AgentEvent] = deque(maxlen=RING)
        self._seq = 0
        #: Events taken and not yet numbered: ``(time key, arrival, project, event)``,
        #: sorted (:meth:`_take`); each project's own events keep its order.
        self._pending: list[tuple[float, int, str, AgentEvent]] = []
        self._arrivals = 0
        self._floors: dict[str, float] = {}  # project -> key of its last pending event
        self._merged = merge([], ())
        self._merged_rows: tuple[ProjectRow, ...] = ()
        self._merged_ids: tuple[int, ...] = ()
        self._stop = asyncio.Event()
        self._names = names.decided(self.targets)
        self._untried = {t.text for t in self.targets if t.kind in ("workflow", "url")}
        self._named_tried = asyncio.Event()
        if not self._untried:
            self._named_tried.set()
        self._tasks: list[asyncio.Task] = []
        self.rebuilds = 0  # merged snapshots built (the benchmark reads it)
        self._order = {t.text: i for i, t in enumerate(self.targets)}
        #: Projects of ``local`` or ``ssh://`` dropped as another's process, their ports
        #: to be closed by their target's task.
        self._dropped: list[Project] = []
        #: ``(target text, endpoint key)`` -> ``(pid, project, process)``: what ``local``
        #: or ``ssh://`` found there is the process that project shows: not taken again
        #: while that pid serves there and that project shows that process.
        self._elsewhere: dict[tuple[str, str], tuple[int, Project, Process]] = {}

    # -- the projects ---------------------------------------------------------------------
    def _project(
        self,
        target: tg.Target,
        endpoint_key: str,
        base: str,
        *,
        as_is: bool = False,
        workflow: str = "",
    ) -> Project:
        """The project of ``(target, endpoint_key)``, made and named on first sight
        (:mod:`symphony_tui.fleet.names`). A workflow or URL target's name was decided
        from the targets up front; a scheduler found as the fleet runs (``local``,
        ``ssh://``) takes ``base`` (``base@machine`` over ssh unless ``as_is``; the target's
        ``name=`` instead when it has one) made unique with the names of the folders above
        its ``workflow``'s, never a name decided up front for another target. The projects
        stay in name order, the console's and ``--list``'s."""
        found = self._by_key.get((target.text, endpoint_key))
        if found is not None:
            return found
        machine = target.machine
        name = self._names.get(target.text) if target.kind in ("workflow", "url") else None
        if name is None or name in self.projects:
            taken = set(self.projects)
            taken.update(n for text, n in self._names.items() if text != target.text)
            above = names.folders(workflow)
            if target.name is not None:
                own = PurePath(workflow).parent.name if workflow else ""
                name = names.unique(target.name, taken, [own, *above] if own else above)
            else:
                at = machine if target.kind == "ssh" and not as_is else None
                name = names.unique(base, taken, above, at=at)
        project = Project(name, target, endpoint_key, machine, self._clock)
        self.projects[name] = project
        self.projects = dict(sorted(self.projects.items()))
        self._by_key[(target.text, endpoint_key)] = project
        return project

    def _forget(self, project: Project) -> None:
        self.projects.pop(project.name, None)
        self._by_key.pop((project.target.text, project.key), None)

    def _rank(self, project: Project) -> tuple[int, int, str]:
        order = self._order.get(project.target.text, len(self._order))
        return (*rank(project.target, order), project.name)

    def _sort_out(self) -> None:
        """Show each scheduler process once. Projects go by rank
        (:func:`~symphony_tui.fleet.identity.rank`: a workflow or URL target first, then
        the earlier line); one whose port follows the process a project before it follows
        is that one's :class:`Duplicate` (a workflow or URL target's, until its port follows
        another process) or, found by ``local`` or ``ssh://``, dropped. What it logged of
        that process is not logged again by the one that shows it."""
        keepers: list[Project] = []
        for project in sorted(self.projects.values(), key=self._rank):
            process = project.sorted = project.process()
            if project.duplicate is not None:
                if project.duplicate.process == process:
                    continue
                project.duplicate = None  # its port follows another process now
            if process is None:
                continue
            first = next((k for k in keepers if process.same(k.sorted)), None)
            if first is None:
                keepers.append(project)
            else:
                self._second(project, first, process)

    def _second(self, project: Project, first: Project, process: Process) -> None:
        """``project`` follows ``process``, which ``first`` shows (:meth:`_sort_out`)."""
        logged = project.logged
        if logged is not None and logged[0].same(process) and first.sorted is not None:
            skip = first.skip
            if skip is None or not skip[0].same(process) or skip[1] < logged[1]:
                first.skip = (first.sorted, logged[1])
        if project.target.kind in NAMING:
            where = f"line {first.target.line}" if first.target.line else first.target.text
            said = f"the same scheduler as {where} ({first.name}): shown there only"
            project.duplicate = Duplicate(process, first.name, said)
            project.last = project.heard_at = project.parts = None
            project.clean_stop, project.stopped_with, project.stop_reason = False, None, None
            return
        self._forget(project)
        project.dropped = True
        self._dropped.append(project)
        if project.endpoint is not None and project.endpoint.pid is not None:
            key = (project.target.text, project.key)
            self._elsewhere[key] = (project.endpoint.pid, first, process)

    def _shown_elsewhere(self, target: tg.Target, endpoint: tg.Endpoint) -> bool:
        """Whether what ``target`` (``local``, ``ssh://``) found at ``endpoint`` is the
        process another project shows (it was dropped as that one's: :meth:`_second`)."""
        found = self._elsewhere.get((target.text, endpoint.key))
        if found is None:
            return False
        pid, first, process = found
        shown = self.projects.get(first.name) is first and process.same(first.process())
        if pid == endpoint.pid and shown:
            return True
        del self._elsewhere[(target.text, endpoint.key)]
        return False

    async def _close_dropped(self, target: tg.Target | None = None) -> None:
        """Close the ports of the projects of ``target`` (all: None) dropped as another's."""
        for project in [p for p in self._dropped if target is None or p.target is target]:
            self._dropped.remove(project)
            await self._disconnect(project)

    async def _connect(self, project: Project, endpoint: tg.Endpoint) -> None:
        """Follow ``endpoint`` as ``project`` (its old port, if any, closed first; the
        same process through a new forward keeps its transcripts where they are), with
        the token its target gives it when it needs one its note does not offer
        (:func:`~symphony_tui.fleet.targets.with_token`; one that cannot be had leaves the
        project misconfigured, nothing asked of its scheduler)."""
        old, port = project.endpoint, project.port
        same = old is not None and (old.pid, old.api_port) == (endpoint.pid, endpoint.api_port)
        await self._disconnect(project, lives_on=same and port is not None and not port.stopped)
        project.endpoint = endpoint
        project.error = project.misconfigured = None
        project.gone = None
        try:
            endpoint = await self._thread(tg.with_token, endpoint, project.target)
        except tg.TokenError as exc:
            project.misconfigured = str(exc)
            return
        client = None
        if endpoint.url is None:  # over ssh: a forward of its own
            assert project.target.ssh is not None and endpoint.api_port is not None
            tunnel = SshTunnel(project.target.ssh, endpoint.api_port)
            try:
                project.tunnel = await self._thread(tunnel.open, undo=SshTunnel.close)
            except SshError as exc:
                project.error = str(exc)
                return
            client = tunnel.client()
        url = endpoint.url or (project.tunnel.base_url if project.tunnel else "")
        port = self.remote_port(project, url, endpoint, client)
        project.port = port
        project.task = asyncio.create_task(port.run(), name=f"fleet {project.name}")

    def remote_port(
        self,
        project: Project,
        url: str,
        endpoint: tg.Endpoint,
        client: httpx.AsyncClient | None = None,
    ) -> RemotePort:
        """The port that follows ``project``'s scheduler at ``url`` (``client``: through
        its forward): it says ``via fleet``, and hands its events to the merge."""
        return RemotePort(
            url,
            client=client,
            token=endpoint.token,
            token_hint=tg.token_hint(project.target),
            control=endpoint.control,
            owner=endpoint.owner,
            stale_after_s=self.stale_after_s,
            clock=self._clock,
            via=VIA,
            on_events=partial(self._take, project),
            ring=0,  # the fleet's own ring holds every project's events
            taken=project.taken,
        )

    async def _disconnect(self, project: Project, *, lives_on: bool = False) -> None:
        """Drop ``project``'s port and forward. Its issues' transcripts are kept as an
        earlier process's unless its scheduler ``lives_on`` (to be followed again)."""
        project.remember()
        port, project.port = project.port, None
        task, project.task = project.task, None
        tunnel, project.tunnel = project.tunnel, None
        if port is not None:
            project.taken = port.taken()
            if not lives_on:
                project.transcripts.leave(port)
            await port.close()
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if tunnel is not None:
            await self._thread(tunnel.close)

    def _take(self, project: Project, events: list[AgentEvent]) -> None:
        """Add ``events`` (one project's, each once, in its seq order: ``RemotePort``) to
        those waiting for their number, by time: an event goes after every waiting one
        that is not later, and never before an earlier event of its own project (an event
        without a time, and its project's after it, go last). A dropped or duplicate
        project's are not taken, nor those another project logged of the same process
        (:meth:`_sort_out`)."""
        if project.dropped or self.projects.get(project.name) is not project:
            return
        process = project.process()
        if process != project.sorted:
            self._sort_out()
        if project.duplicate is not None or project.dropped:
            return
        skip = project.skip
        if skip is not None and skip[0].same(process):
            events = [e for e in events if e.seq > skip[1]]
        if process is not None and events:
            project.logged = (process, events[-1].seq)
        name = project.name
        key = self._floors.get(name, -math.inf)
        batch = []
        for event in events:
            at = event.at.timestamp() if event.at is not None else math.inf
            key = max(key, at)
            self._arrivals += 1
            batch.append((key, self._arrivals, name, event))
        if not batch:
            return
        self._floors[name] = key
        pending = self._pending
        start = bisect.bisect_right(pending, batch[0][:2], key=lambda item: item[:2])
        pending[start:] = heapq.merge(pending[start:], batch)
        if len(pending) > PENDING:
            self._number(len(pending) - PENDING)

    def _number(self, count: int | None = None) -> None:
        """Give the oldest ``count`` waiting events (all: ``None``) the fleet's next
        numbers, into the ring."""
        pending = self._pending
        count = len(pending) if count is None else count
        for _key, _n, name, event in pending[:count]:
            self._seq += 1
            self._ring.append(event_of(name, event, self._seq))
        del pending[:count]
        if not pending:
            self._floors.clear()

    async def _thread(
        self, fn: Callable[..., T], *args: Any, undo: Callable[[T], object] | None = None
    ) -> T:
        """``fn(*args)`` in a daemon thread of its own (:func:`~symphony_tui.api.follow.in_thread`)."""
        return await in_thread(fn, *args, undo=undo, name="fleet")

    async def _wait(self, seconds: float) -> bool:
        """Sleep ``seconds`` or until :meth:`close`; True when closing."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop.wait(), timeout=seconds)
        return self._stop.is_set()

    async def _answers(self, endpoint: tg.Endpoint) -> bool:
        """Whether an HTTP server answers at ``endpoint.url`` now (any status; 2 s)."""
        if endpoint.url is None:
            return True
        try:
            async with httpx.AsyncClient(base_url=endpoint.url, timeout=2.0) as client:
                await client.get("/api/v1/state")
        except httpx.HTTPError:
            return False
        return True

    def _needs_new(self, project: Project, endpoint: tg.Endpoint) -> bool:
        """Whether ``project`` must (re)connect to ``endpoint``: not connected, its
        scheduler stopped, or another process (a restart) or port serves it now. Never to
        the very process already known to have stopped (its note or lock can outlive it a
        moment): a new port would have heard nothing from it."""
        if project.port is None or project.endpoint is None:
            return True
        old = project.endpoint
        moved = (old.pid, old.api_port) != (endpoint.pid, endpoint.api_port)
        if project.port.stopped:
            return moved or endpoint.pid is None
        if project.tunnel is not None and not project.tunnel.alive:
            return True  # its forward ended (the network went): a new one
        return moved

    # -- following each target -------------------------------------------------------------
    def _tried(self, target: tg.Target) -> None:
        """A workflow or URL target made its first attempt (``local`` waits for them all,
        so a scheduler they name keeps their name)."""
        self._untried.discard(target.text)
        if not self._untried:
            self._named_tried.set()

    def _not_local(self, target: tg.Target, endpoint: tg.Endpoint) -> bool:
        """Whether the scheduler ``local`` found at ``endpoint`` is another target's: one
        that a workflow or URL target names (its workflow, its address:
        :func:`~symphony_tui.fleet.identity.designates`; the process such a target's project
        follows), or one another project was found to show (:meth:`_shown_elsewhere`).
        Decided by what names it, not by which target reached it first."""
        if endpoint.pid is not None and any(
            p.target.kind in NAMING and p.endpoint is not None and p.endpoint.pid == endpoint.pid
            for p in self.projects.values()
        ):
            return True
        if any(designates(t, endpoint) for t in self.targets):
            return True
        return self._shown_elsewhere(target, endpoint)

    async def _follow_local(self, target: tg.Target) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._named_tried.wait(), timeout=5.0)
        while True:
            try:
                found = await self._thread(tg.local_endpoints)
            except OSError:
                found = []
            await self._close_dropped(target)
            named = [e for e in found if self._not_local(target, e)]
            now = {e.key: e for e in found}
            for project in [p for p in self.projects.values() if p.target is target]:
                there = now.get(project.key)
                if there in named or (
                    project.endpoint is not None and self._not_local(target, project.endpoint)
                ):
                    await self._disconnect(project)  # taken before its target had it
                    self._forget(project)
            for endpoint in found:
                if endpoint in named:
                    continue
                project = self._project(
                    target, endpoint.key, endpoint.folder_name, workflow=endpoint.workflow_path
                )
                if self._needs_new(project, endpoint):
                    await self._connect(project, endpoint)
            if await self._wait(self.local_every_s):
                return

    async def _follow_workflow(self, target: tg.Target) -> None:
        base = PurePath(target.text).parent.name
        project = self._project(target, target.text, base, workflow=target.text)
        while True:
            if project.port is None or project.port.stopped:
                try:
                    endpoint = await self._thread(tg.workflow_endpoint, target.text)
                except (tg.TargetError, OSError) as exc:
                    if project.port is None:
                        project.error = str(exc)
                else:
                    if self._needs_new(project, endpoint):
                        await self._connect(project, endpoint)
            self._tried(target)
            if await self._wait(self.local_every_s):
                return

    async def _follow_url(self, target: tg.Target) -> None:
        project = self._project(target, target.text, names.url_base(target.text))
        while True:
            if project.port is None or project.port.stopped:
                try:
                    endpoint = await self._thread(tg.url_endpoint, target)
                except (tg.TargetError, OSError) as exc:
                    # a token that cannot be had is the operator's to fix, not the scheduler
                    token = isinstance(exc, tg.TokenError)
                    project.misconfigured = str(exc) if token else None
                    project.error = None if token else str(exc)
                else:
                    # a stopped scheduler's row keeps its last state until one answers there
                    if project.port is None or await self._answers(endpoint):
                        await self._connect(project, endpoint)
            elif target.machine is None and project.endpoint and project.endpoint.owner is None:
                await self._find_owner(project)
            self._tried(target)
            if await self._wait(self.local_every_s):
                return

    async def _find_owner(self, project: Project) -> None:
        """Give the port of a loopback URL target followed before its scheduler's API note
        named it (its API answered first, or nothing did yet) that scheduler's process
        once a note does, so a kill reads ``lost``, not a link that is down."""
        try:
            endpoint = await self._thread(tg.url_endpoint, project.target)
        except (tg.TargetError, OSError):
            return
        if endpoint.owner is not None and project.port is not None:
            project.endpoint = dataclasses.replace(
                project.endpoint or endpoint, pid=endpoint.pid, owner=endpoint.owner
            )
            project.port.watch_owner(endpoint.owner)

    async def _follow_ssh(self, target: tg.Target) -> None:
        assert target.ssh is not None
        placeholder: Project | None = None
        while True:
            try:
                found = await self._thread(tg.ssh_endpoints, target.ssh)
            except SshError as exc:
                if not any(p.target is target for p in self.projects.values()):
                    where = target.text.removeprefix("ssh://")  # the host's row until it answers
                    placeholder = self._project(target, "", where, as_is=True)
                    placeholder.error = str(exc)
                found = None
            if found is not None:
                if placeholder is not None:
                    self._forget(placeholder)
                    placeholder = None
                await self._close_dropped(target)
                found = [e for e in found if not self._shown_elsewhere(target, e)]
                keys = {e.key for e in found}
                for endpoint in found:
                    project = self._project(
                        target, endpoint.key, endpoint.folder_name, workflow=endpoint.workflow_path
                    )
                    if self._needs_new(project, endpoint):
                        await self._connect(project, endpoint)
                for project in [p for p in self.projects.values() if p.target is target]:
                    if project.key not in keys and project.port is not None:
                        await self._disconnect(project)
                        project.gone = f"its scheduler no longer runs on {target.ssh.hostname}"
            ours = [p for p in self.projects.values() if p.target is target]
            settled = found is not None and all(p.state()[0] == "live" for p in ours)
            if await self._wait(self.ssh_every_s if settled else self.ssh_retry_s):
                return

    async def run(self) -> None:
        """Follow every target until :meth:`close` (each in a task of its own)."""
        follow = {
            "local": self._follow_local,
            "workflow": self._follow_workflow,
            "url": self._follow_url,
            "ssh": self._follow_ssh,
        }
        self._tasks = [
            asyncio.create_task(follow[t.kind](t), name=f"fleet target {t.text}")
            for t in self.targets
        ]
        try:
            await self._stop.wait()
        finally:
            for task in self._tasks:
                task.cancel()
            for task in self._tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    async def close(self) -> None:
        """Stop following; close every project's port and forward."""
        self._stop.set()
        for task in self._tasks:
            task.cancel()
        for project in list(self.projects.values()):
            await self._disconnect(project)
        await self._close_dropped()

    def end_forwards(self) -> None:
        """End every ssh forward now (blocking): the last resort when the event loop ended
        without :meth:`close`, so no ``ssh`` outlives the fleet."""
        for project in [*self.projects.values(), *self._dropped]:
            tunnel, project.tunnel = project.tunnel, None
            if tunnel is not None:
                tunnel.close()

    # -- SchedulerPort --------------------------------------------------------------------
    def snapshot(self) -> Snapshot:
        if any(p.process() != p.sorted for p in self.projects.values()):
            self._sort_out()
        rows = tuple(p.row() for p in self.projects.values())
        sources = tuple(p.source() for p in self.projects.values())
        ids = tuple(id(s) for s in sources)
        if rows == self._merged_rows and ids == self._merged_ids:
            return self._merged
        # the capacity of the schedulers that can run work now: a stopped one's is left
        # out; one whose link is lost, or gone without a word, may still run its agents
        # (its runs are counted too)
        capacity = sum(
            source.max_concurrent_agents
            for row, source in zip(rows, sources, strict=True)
            if source is not None and row.link_state != "stopped"
        )
        if ids == self._merged_ids:  # only a project's link or age: the rows stay
            self._merged = self._merged.model_copy(
                update={
                    "projects": rows,
                    "generated_at": datetime.now(UTC),
                    "max_concurrent_agents": capacity,
                }
            )
        else:
            parts = []
            for project, source in zip(self.projects.values(), sources, strict=True):
                if source is None:
                    continue
                if project.parts is None or project.parts.source is not source:
                    project.parts = parts_of(project.name, source, project.parts)
                parts.append(project.parts)
            self._merged = merge(parts, rows, capacity=capacity)
            self.rebuilds += 1
        self._merged_rows, self._merged_ids = rows, ids
        return self._merged

    def link(self) -> FleetLink:
        states = [p.state() for p in self.projects.values()]
        ages = [age for _s, age, _e in states if age is not None]
        names = {s for s, _a, _e in states}
        state = next(
            (s for s in ("live", "reconnecting", "connecting", "stale") if s in names),
            "connecting" if not states else "stale",
        )
        return FleetLink(state, min(ages) if ages else None)

    def events_since(
        self, seq: int, *, limit: int = 2000, issue_id: str | None = None
    ) -> list[AgentEvent]:
        if issue_id is not None:
            routed = self._route_id(issue_id)
            if routed is None:
                return []
            project, raw = routed
            events = project.transcripts.since(project.port, raw, seq, limit=limit)
            return [event_of(project.name, e) for e in events]
        self._number()  # handed out from here: numbered, in the order they now read
        newer: list[AgentEvent] = []
        for event in reversed(self._ring):
            if event.seq <= seq:
                break
            newer.append(event)
            if len(newer) >= limit:
                break
        newer.reverse()
        return newer

    def transcript_gap(self, issue_id: str) -> TranscriptGap:
        routed = self._route_id(issue_id)
        if routed is None or routed[0].port is None:
            return TranscriptGap()
        return routed[0].port.transcript_gap(routed[1])

    def _route_id(self, value: str) -> tuple[Project, str] | None:
        split = split_id(value, self.projects)
        return None if split is None else (self.projects[split[0]], split[1])

    def route(self, command: Command) -> tuple[Project, Command] | str:
        """The project a command goes to and the command as that scheduler takes it (its
        id without the prefix, no ``project``); else the reason, one line."""
        if isinstance(command, Approve | Deny | Answer):
            routed = self._route_id(command.approval_id)
            if routed is None:
                return f"no project has approval {command.approval_id}"
            return routed[0], command.model_copy(update={"approval_id": routed[1], "project": None})
        issue_id = getattr(command, "issue_id", None)
        if isinstance(issue_id, str):
            routed = self._route_id(issue_id)
            if routed is None:
                return f"no project has issue {issue_id}"
            return routed[0], command.model_copy(update={"issue_id": routed[1], "project": None})
        if command.project is None:
            return "choose a project: the fleet sends this to one scheduler"
        project = self.projects.get(command.project)
        if project is None:
            return f"no project named {command.project}"
        return project, command.model_copy(update={"project": None})

    async def send(
        self, command: Command, *, who: str | None = None, via: str = "console"
    ) -> CommandResult:
        routed = self.route(command)
        if isinstance(routed, str):
            return CommandResult(False, routed)
        project, plain = routed
        state, age, error = project.state()
        if state == "duplicate":
            return CommandResult(False, f"{project.name}: {error}: not sent")
        if state == "lost":  # gone without a word: not "stopped", as its port would say
            return CommandResult(False, lost_refusal(project.name, error))
        if project.port is None:
            return CommandResult(
                False,
                f"{project.name}: {project.misconfigured or project.error or 'not connected'}",
            )
        if state == "stale":  # frozen or cut off: the request would wait out its timeout
            return CommandResult(False, stale_refusal(project.name, age))
        result = await project.port.send(plain, who=who, via=VIA)
        if not result.ok:
            return CommandResult(False, f"{project.name}: {result.message}", result.issue)
        # the project, then its scheduler's answer: "alpha · DEMO-3: approved"
        said = result.message or f"{plain.type.replace('_', ' ')}: ok"
        return CommandResult(True, f"{project.name} · {said}", result.issue)

    def _port_for(self, issue: str) -> tuple[RemotePort, str] | str:
        routed = self._route_id(issue)
        if routed is None:
            return f"no project has issue {issue}"
        project, raw = routed
        if project.port is None:
            return f"{project.name}: {project.misconfigured or project.error or 'not connected'}"
        return project.port, raw

    async def diff(self, issue: str) -> WorkspaceDiff:
        found = self._port_for(issue)
        if isinstance(found, str):
            return WorkspaceDiff(issue_identifier=issue, error=found)
        return await found[0].diff(found[1])

    async def diff_file(
        self, issue: str, path: str, *, offset: int = 0, limit: int = 400
    ) -> DiffPage:
        found = self._port_for(issue)
        if isinstance(found, str):
            return DiffPage(path=path, error=found)
        return await found[0].diff_file(found[1], path, offset=offset, limit=limit)

    async def audit_entries(self, limit: int = 500) -> list[AuditEntry]:
        """Every connected project's newest ``limit`` entries, merged by time (the newest
        ``limit``); an entry names its ``project`` (a pause names no issue), its ``issue``
        is namespaced and its ``via`` starts with its project. A project that does not answer within 5 s is left out."""
        projects = [p for p in self.projects.values() if p.port is not None and not p.duplicate]

        async def one(project: Project) -> list[AuditEntry]:
            assert project.port is not None
            entries = await asyncio.wait_for(project.port.audit_entries(limit), timeout=5.0)
            return [
                e.model_copy(
                    update={
                        "issue": f"{project.name}/{e.issue}" if e.issue else None,
                        "via": f"{project.name}: {e.via}",
                        "project": project.name,
                    }
                )
                for e in entries
            ]

        answers = await asyncio.gather(*(one(p) for p in projects), return_exceptions=True)
        merged = [e for answer in answers if isinstance(answer, list) for e in answer]
        if projects and not merged and all(isinstance(a, BaseException) for a in answers):
            raise RemoteError("no project answered with its audit log")
        merged.sort(key=lambda e: e.at)
        return merged[-limit:]

    async def note_action(self, what: str, **fields: object) -> AuditEntry | None:
        """Audit an action on the scheduler of the project it is about: ``project``, else
        the prefix of ``issue``; None when there is none or it is unreachable."""
        project_name = fields.pop("project", None)
        issue = fields.get("issue")
        project: Project | None = None
        if isinstance(issue, str):
            routed = self._route_id(issue)
            if routed is not None:
                project, fields["issue"] = routed
        if project is None and isinstance(project_name, str):
            project = self.projects.get(project_name)
        if project is None or project.port is None or project.duplicate is not None:
            return None
        return await project.port.note_action(what, **fields)
