"""Which worker host a run goes to, and which hosts are down.

:class:`HostBook` is part of the scheduler state (``SchedulerState.hosts``), changed on
the event loop only. Rules:

- **Placement** (:meth:`HostBook.place`): an issue whose workspace is on a host (it ran
  there: continuation, retry, rerun) goes back to that host while it is up, and waits for
  a free slot there; otherwise the least-loaded up host with a free slot
  (``worker.max_concurrent_agents_per_host`` / ``worker.hosts.<h>.max_concurrent_agents``),
  first listed on a tie. No up host with room: the issue waits (no slot).
- **Down hosts** (:meth:`HostBook.mark_down`): a host whose connection failed (ssh exit
  255, refused, timeout) is down: nothing new goes there, its running attempts are told to
  end (they fail with the reason and are retried per policy), and it is probed again after
  ``worker.down_backoff_ms``, doubling up to ``worker.down_backoff_max_ms``. A probe that
  answers marks it up (with its round trip), and an issue whose workspace was there goes
  back to it from then on.
- **Drained hosts** (:meth:`HostBook.drain`, the operator's ``drain_host``): no new issue
  is placed there; its running attempts go on, and an issue whose workspace is there
  (continuation, retry, rerun) still goes back to it, so no work is redone elsewhere.
  A drain lasts until ``undrain_host`` (it is not kept across a restart).
- **First contact and coming back** (:class:`HostProbes`): at start-up every host is
  checked in the background (:meth:`HostProbes.start`; start-up, the first tick and local
  runs never wait for a host), and takes no work until it answered (shown up meanwhile:
  not tried is not down); an unreachable one is then down and probed with backoff. Before a host takes work (first contact, or back after
  being down) what earlier runs left running there is ended and its start-up recovery
  runs (``on_reached``: scheduler/startup.py), so a host whose network went away (not
  rebooted) keeps no agent or hook of a run that was failed over.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from symphony_tui.agents.base import AgentError
from symphony_tui.config.settings import Settings
from symphony_tui.domain import EventKind, RecoveredWorkspace, RunOutcome, RunStatus
from symphony_tui.domain.snapshot import HostRow
from symphony_tui.hosts.ssh import SshError, SshTarget
from symphony_tui.scheduler.inbox import HostProbed
from symphony_tui.scheduler.run import Ending, Run
from symphony_tui.workspaces.errors import WorkspaceError

#: The run ending a host's loss gives its running attempts.
HOST_DOWN_PREFIX = "host down"


@dataclass
class HostState:
    """One host's live facts: ``up``, ``last_error`` (one line), ``rtt_ms`` of the last
    probe, when to probe next (monotonic seconds) and the current backoff; ``since`` (UTC)
    when it last went up or down, ``drained`` by the operator; ``reached`` False from
    start-up until its first contact finished (no work goes there meanwhile)."""

    name: str
    up: bool = True
    last_error: str | None = None
    rtt_ms: float | None = None
    probe_at: float | None = None
    backoff_ms: int = 0
    probing: bool = False
    runs_started: int = 0
    since: datetime | None = None
    drained: bool = False
    reached: bool = True


class HostBook:
    """Worker hosts of ``settings().worker`` and where each issue's workspace is."""

    def __init__(
        self, settings: Callable[[], Settings], now: Callable[[], datetime] | None = None
    ) -> None:
        self._settings = settings
        self._now = now or (lambda: datetime.now(UTC))
        self._hosts: dict[str, HostState] = {}
        #: issue id -> the host holding its workspace (where it last ran).
        self.home: dict[str, str] = {}
        #: issue id -> hosts where its workspace could not be made or its agent not
        #: started (:meth:`failed_there`): new placements prefer the others.
        self.avoid: dict[str, set[str]] = {}
        #: Why a host takes no new run for lack of memory (None: it has room); the
        #: state sets it (scheduler/resources.py ``ResourceBook.short``).
        self.memory_short: Callable[[str], str | None] = lambda name: None

    @property
    def enabled(self) -> bool:
        return self._settings().worker.enabled

    def hosts(self) -> list[HostState]:
        """The listed hosts in order (a reload's new hosts appear, removed ones go)."""
        names = self._settings().worker.ssh_hosts
        for name in names:
            if name not in self._hosts:
                self._hosts[name] = HostState(name, since=self._now())
        return [self._hosts[n] for n in names]

    def get(self, name: str) -> HostState | None:
        return next((h for h in self.hosts() if h.name == name), None)

    @staticmethod
    def load(running: Mapping[str, Run]) -> dict[str, int]:
        out: dict[str, int] = {}
        for run in running.values():
            if run.worker_host is not None:
                out[run.worker_host] = out.get(run.worker_host, 0) + 1
        return out

    def _has_room(self, host: HostState, load: Mapping[str, int]) -> bool:
        cap = self._settings().worker.capacity(host.name)
        return (
            host.up
            and host.reached
            and (cap is None or load.get(host.name, 0) < cap)
            and self.memory_short(host.name) is None
        )

    def place(
        self, issue_id: str, running: Mapping[str, Run], *, force: bool = False
    ) -> str | None:
        """The host ``issue_id`` should run on now, or None when it must wait. ``force``
        (an operator's rerun): never None; a full host is taken as well, and with every
        host down the workspace's host (or the first) is tried."""
        load = self.load(running)
        home = self.get(self.home.get(issue_id, ""))
        if home is not None and home.up and home.reached:
            if self._has_room(home, load) or force:
                return home.name
            return None
        hosts = self.hosts()
        free = [h for h in hosts if not h.drained and self._has_room(h, load)]
        avoided = self.avoid.get(issue_id)
        if avoided:
            free = [h for h in free if h.name not in avoided] or free
        if not free and force:
            free = [h for h in hosts if h.up and h.reached and not h.drained] or (
                [home] if home is not None else hosts[:1]
            )
        if not free:
            return None
        return min(free, key=lambda h: load.get(h.name, 0)).name

    def why_waiting(self, issue_id: str, running: Mapping[str, Run]) -> str:
        """Why :meth:`place` has no host for ``issue_id`` now, in one line for its row:
        its workspace's host is full, or every host is down, not reached yet, drained or
        full (the first of these that holds for all)."""
        load = self.load(running)
        settings = self._settings().worker
        home = self.get(self.home.get(issue_id, ""))
        if home is not None and home.up and home.reached:
            cap = settings.capacity(home.name)
            return f"waiting for a slot on {home.name}, where its workspace is ({load.get(home.name, 0)}/{cap})"
        hosts = self.hosts()
        down = [h for h in hosts if not h.up]
        if down and len(down) == len(hosts):
            first = down[0]
            error = f": {first.last_error}" if first.last_error else ""
            return f"every worker host is down ({first.name}{error})"
        if all(not h.up or not h.reached for h in hosts):
            return "waiting for the worker hosts' first contact"
        if all(not h.up or not h.reached or h.drained for h in hosts):
            return "every worker host that is up is drained"
        caps = [settings.capacity(h.name) for h in hosts if h.up and h.reached and not h.drained]
        busy = sum(load.get(h.name, 0) for h in hosts if h.up and h.reached and not h.drained)
        room = "" if None in caps else f" ({busy}/{sum(c or 0 for c in caps)})"
        return f"every worker host that is up is full{room}"

    def placed(self, issue_id: str, host: str) -> None:
        """``issue_id``'s workspace is (now) on ``host``."""
        self.home[issue_id] = host
        state = self.get(host)
        if state is not None:
            state.runs_started += 1

    def forget(self, issue_id: str) -> None:
        """The issue's workspace was removed (terminal): it may go anywhere next time."""
        self.home.pop(issue_id, None)
        self.avoid.pop(issue_id, None)

    def failed_there(self, issue_id: str, host: str) -> None:
        """An attempt of ``issue_id`` could not get going on ``host`` (no workspace could
        be made there, or the agent did not start in a workspace made for it): it is no
        longer bound to that host, and its next placements prefer the other hosts (all of
        them avoided: any again). Without this a broken host (a read-only or full disk, a
        missing program) took the issue's every retry, drained or not."""
        if self.home.get(issue_id) == host:
            del self.home[issue_id]
        avoided = self.avoid.setdefault(issue_id, set())
        avoided.add(host)
        if avoided >= set(self._settings().worker.ssh_hosts):
            avoided.clear()
            avoided.add(host)

    def mark_down(self, name: str, reason: str, now_mono: float) -> bool:
        """Host ``name`` cannot be reached; True when it was up until now (its first
        probe is then ``worker.down_backoff_ms`` away; a host already down keeps its
        schedule and takes the newer reason)."""
        host = self.get(name)
        if host is None:
            return False
        was_up = host.up
        host.up = False
        host.last_error = reason
        if was_up:
            host.since = self._now()
            host.backoff_ms = self._settings().worker.down_backoff_ms
            host.probe_at = now_mono + host.backoff_ms / 1000
        return was_up

    def mark_up(self, name: str, rtt_ms: float) -> bool:
        """A probe of ``name`` answered; True when it was down until now."""
        host = self.get(name)
        if host is None:
            return False
        was_down = not host.up
        host.up, host.rtt_ms, host.probe_at, host.backoff_ms = True, rtt_ms, None, 0
        host.probing, host.reached = False, True
        if was_down:
            host.since = self._now()
        return was_down

    def drain(self, name: str, drained: bool) -> bool:
        """Drain (or undrain) host ``name``; True when that changed something. See the
        module docstring for what a drained host still takes."""
        host = self.get(name)
        if host is None or host.drained == drained:
            return False
        host.drained = drained
        return True

    def probe_now(self, name: str, now_mono: float) -> bool:
        """Move down host ``name``'s next probe to ``now_mono`` (the next
        :meth:`due_probes` returns it); False when it is up or already being probed."""
        host = self.get(name)
        if host is None or host.up or host.probing:
            return False
        host.probe_at = now_mono
        return True

    def start_checks(self) -> list[str]:
        """Start-up: every host is being probed and takes no work until its first contact
        (``reached``; it is still shown up: not tried yet is not down); returns their
        names."""
        names = []
        for host in self.hosts():
            host.reached, host.probing = False, True
            names.append(host.name)
        return names

    def due_probes(self, now_mono: float) -> list[str]:
        """Down hosts whose next probe is due (each is then marked as being probed)."""
        due = []
        for host in self.hosts():
            if not host.up and not host.probing and (host.probe_at or 0) <= now_mono:
                host.probing = True
                due.append(host.name)
        return due

    def probe_failed(self, name: str, reason: str, now_mono: float) -> None:
        """A probe of down host ``name`` failed: the next one waits twice as long (up to
        ``worker.down_backoff_max_ms``); after a failed first contact, the backoff."""
        host = self.get(name)
        if host is None:
            return
        worker = self._settings().worker
        host.probing = False
        if host.up:  # its first contact failed: it goes down now
            host.since = self._now()
        host.up = False
        host.last_error = reason
        if host.backoff_ms == 0:  # its first contact (start-up) failed
            host.backoff_ms = worker.down_backoff_ms
        else:
            host.backoff_ms = min(
                max(host.backoff_ms, worker.down_backoff_ms) * 2, worker.down_backoff_max_ms
            )
        host.probe_at = now_mono + host.backoff_ms / 1000

    def rows(
        self, running: Mapping[str, Run], recovered: Iterable[RecoveredWorkspace] = ()
    ) -> tuple[HostRow, ...]:
        """The hosts view (console, API); ``recovered``: the workspaces found by the last
        recovery scan, counted with the issues that ran on each host."""
        load = self.load(running)
        worker = self._settings().worker
        held: dict[str, set[str]] = {}
        for issue_id, name in self.home.items():
            held.setdefault(name, set()).add(issue_id)
        for w in recovered:
            if w.host:
                held.setdefault(w.host, set()).add(w.issue_id or f"key:{w.key}")
        cut: dict[str, list[datetime]] = {}
        for run in running.values():
            if run.worker_host is not None and run.link_state == "reconnecting":
                cut.setdefault(run.worker_host, []).append(run.link_since or datetime.now(UTC))
        return tuple(
            HostRow(
                name=h.name,
                up=h.up,
                running=load.get(h.name, 0),
                capacity=worker.capacity(h.name),
                last_error=h.last_error,
                rtt_ms=h.rtt_ms,
                since=h.since,
                drained=h.drained,
                workspaces=len(held.get(h.name, ())),
                reconnecting=len(cut.get(h.name, ())),
                reconnecting_since=min(cut[h.name]) if h.name in cut else None,
            )
            for h in self.hosts()
        )


class _Poster(Protocol):
    """Where a probe posts its outcome (``mailbox.Mailbox``)."""

    def post(self, item: HostProbed, *, control: bool = False) -> None: ...


class SchedulerView(Protocol):
    """What the worker-host code (:func:`host_down`, :class:`HostProbes`, the operator's
    host commands) uses of ``SchedulerState``, named structurally: the state module
    imports this one."""

    hosts: HostBook
    running: dict[str, Run]
    clock: Any

    @property
    def settings(self) -> Settings: ...

    def emit_system(self, kind: EventKind, message: str) -> None: ...

    def log(self, level: str, msg: str, **fields: Any) -> None: ...

    def changed(self) -> None: ...


def host_down(state: SchedulerView, name: str, reason: str, lost: Run | None = None) -> None:
    """Host ``name`` failed under run ``lost``: mark it down (one warning event and log
    line when it was up) and end its other running attempts as failed with the reason
    (retried per policy, elsewhere while it is down)."""
    if state.hosts.mark_down(name, reason, state.clock.monotonic()):
        state.emit_system(EventKind.WARNING, f"worker host {name} is down: {reason}")
        state.log("warning", "worker host down", host=name, error=reason)
    for run in list(state.running.values()):
        if run.worker_host == name and run is not lost and run.worker is not None:
            run.host_lost = reason
            run.worker.stop(
                Ending(RunOutcome.FAILED, RunStatus.FAILED, f"{HOST_DOWN_PREFIX}: {reason}")
            )
    state.changed()


class HostProbes:
    """Probes down hosts when their backoff ran out (:meth:`tick`, called each poll tick
    and when a run ends); a probe that answers marks the host up again, once
    ``on_reached(name)`` finished (ending leftovers, recovery; see :meth:`start`). An
    ``on_reached`` that raises ``SshError`` or an ``AgentError`` / ``WorkspaceError`` with
    ``host_lost`` set counts as a failed probe.

    Each probe runs in its own task and posts its outcome to ``mailbox`` (``HostProbed``);
    the loop applies it (:meth:`probed`). Every other method runs on the loop."""

    def __init__(
        self,
        state: SchedulerView,
        targets: Callable[[str], SshTarget],
        mailbox: _Poster,
        on_reached: Callable[[str], Awaitable[None]] | None = None,
    ) -> None:
        self._state = state
        self._targets = targets
        self._mailbox = mailbox
        self.on_reached = on_reached
        self._tasks: set[asyncio.Task[None]] = set()
        self._first: set[str] = set()

    def start(self, on_reached: Callable[[str], Awaitable[None]] | None = None) -> None:
        """Start-up: check every host in the background (first contact), so nothing waits
        for one that cannot be reached; ``on_reached`` (when given) replaces the hook."""
        state = self._state
        if on_reached is not None:
            self.on_reached = on_reached
        if not state.hosts.enabled:
            return
        for name in state.hosts.start_checks():
            self._first.add(name)
            self._spawn(self._probe(name), f"probe-{name}")
        state.changed()

    def _spawn(self, probe: Coroutine[Any, Any, None], name: str) -> None:
        task = asyncio.get_running_loop().create_task(probe, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def tick(self) -> None:
        state = self._state
        if not state.hosts.enabled:
            return
        for name in state.hosts.due_probes(state.clock.monotonic()):
            self._spawn(self._probe(name), f"probe-{name}")

    async def _probe(self, name: str) -> None:
        try:
            rtt = await self._targets(name).probe()
            if self.on_reached is not None:
                await self.on_reached(name)
        except Exception as err:  # a probe must never take the scheduler down
            if isinstance(err, SshError):
                reason = str(err)
            elif isinstance(err, (AgentError, WorkspaceError)) and err.host_lost:
                reason = err.host_lost
            else:
                reason = f"probe failed: {err}"
            self._mailbox.post(HostProbed(name, error=reason))
            return
        self._mailbox.post(HostProbed(name, rtt_ms=rtt))

    def probed(self, outcome: HostProbed) -> None:
        """Apply a probe's ``outcome`` (on the loop): the host is up again, or its next
        probe backs off; a failed measure (:meth:`measure`) marks it down."""
        if outcome.measured:
            self._measured(outcome)
            return
        state, name = self._state, outcome.name
        first = name in self._first
        self._first.discard(name)
        if outcome.error is not None or outcome.rtt_ms is None:
            reason = outcome.error or "probe failed"
            if first:  # first contact: say it once, as a host going down
                state.emit_system(EventKind.WARNING, f"worker host {name} is down: {reason}")
                state.log("warning", "worker host down", host=name, error=reason)
            state.hosts.probe_failed(name, reason, state.clock.monotonic())
            state.changed()
            return
        rtt = outcome.rtt_ms
        if first:
            state.hosts.mark_up(name, rtt)
            state.log("info", "worker host reached", host=name, rtt_ms=round(rtt, 1))
        elif state.hosts.mark_up(name, rtt):
            state.emit_system(EventKind.WARNING, f"worker host {name} is up again ({rtt:.0f} ms)")
            state.log("info", "worker host up", host=name, rtt_ms=round(rtt, 1))
        state.changed()

    def measure(self, name: str) -> bool:
        """The operator's probe of up host ``name`` (``probe_host``): its round trip is
        measured again (``rtt_ms``); one that does not answer is down like a host whose run
        lost its connection (:func:`host_down`). Only the round trip: an up host was
        reached already, so nothing of ``on_reached`` runs. False when it is unknown, down,
        not reached yet or being probed."""
        host = self._state.hosts.get(name)
        if host is None or not host.up or not host.reached or host.probing:
            return False
        host.probing = True
        self._spawn(self._measure(name), f"rtt-{name}")
        return True

    async def _measure(self, name: str) -> None:
        try:
            rtt = await self._targets(name).probe()
        except Exception as err:  # a probe must never take the scheduler down
            reason = str(err) if isinstance(err, SshError) else f"probe failed: {err}"
            self._mailbox.post(HostProbed(name, error=reason, measured=True))
            return
        self._mailbox.post(HostProbed(name, rtt_ms=rtt, measured=True))

    def _measured(self, outcome: HostProbed) -> None:
        state = self._state
        host = state.hosts.get(outcome.name)
        if host is not None:
            host.probing = False
        if outcome.error is not None or outcome.rtt_ms is None:
            host_down(state, outcome.name, outcome.error or "probe failed")
            return
        if host is not None:
            host.rtt_ms = outcome.rtt_ms
        state.changed()

    def cancel(self) -> None:
        for task in list(self._tasks):
            task.cancel()
