"""Memory and CPU of each run's agent, free memory of each machine, and admission by memory
(docs/configuration.md ``worker.min_free_memory_mb``, ``worker.max_memory_mb``).

- :class:`ResourceSampler` is a task off the loop: every ``worker.resource_sample_ms``
  it takes one pass on this machine (``hosts/resources.py`` ``local_pass``, in a thread)
  and one ssh command per worker host that is up (``host_script``, over the host's shared
  connection), whatever the number of runs, and posts the result as a
  ``ResourcesSampled`` input. It only reads the state (which runs, where).
- :class:`ResourceBook` is part of the scheduler state (``SchedulerState.resources``),
  changed by the loop only (:func:`apply_sample`): each running run's last usage, each
  machine's memory, and why an issue waits for memory (the issue row's note).
- A machine is **short** (:meth:`ResourceBook.short`) while its free memory is under its
  floor or its agents together use its cap or more; it then takes no new run (dispatch
  and ``HostBook.place``), an operator's rerun excepted. When it becomes short an event
  names its largest agent; when it has room again a tick is asked for.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, Protocol

from symphony_tui.config.settings import Settings
from symphony_tui.config.worker_hosts import WorkerSettings
from symphony_tui.domain import EventKind
from symphony_tui.domain.kinds import WAITING_FOR_MEMORY
from symphony_tui.domain.snapshot import MemoryRow
from symphony_tui.hosts.resources import (
    MIB,
    CpuMeter,
    Memory,
    Proc,
    Usage,
    host_script,
    local_pass,
    memory_text,
    parse_host_output,
)
from symphony_tui.hosts.ssh import SshError, SshTarget
from symphony_tui.scheduler.inbox import Input, ResourcesSampled
from symphony_tui.scheduler.run import Run
from symphony_tui.scheduler.worker_hosts.book import HostBook

log = logging.getLogger("symphony_tui.scheduler")

#: Seconds the sampler waits before looking at ``worker.resource_sample_ms`` again while
#: sampling is off (0).
IDLE_CHECK_S = 1.0
#: How far past its floor (or under its cap) a machine that is short must get before it
#: takes new runs again: 5 %.
RELEASE_MARGIN = 0.05
#: Seconds a host's sampling command may take at least (a slow host is left out of the pass).
HOST_TIMEOUT_S = 10.0


def _where(host: str | None) -> str:
    return "this machine" if host is None else f"host {host}"


class ResourceBook:
    """The last sample (see the module docstring); the loop's only."""

    def __init__(self) -> None:
        #: issue id -> (the run sampled, its agent's usage); a newer run of the issue
        #: is not the one sampled, so it shows nothing until its own sample.
        self.usage: dict[str, tuple[Run, Usage]] = {}
        #: worker host (None: this machine) -> its memory at the last pass.
        self.machines: dict[str | None, Memory] = {}
        #: issue id -> why it waits for a place to run: memory (``WAITING_FOR_MEMORY``
        #: first) or a worker host (set by dispatch, shown on its row).
        self.waiting: dict[str, str] = {}
        #: machines short of memory after the last pass (for the events on a change).
        self.was_short: set[str | None] = set()

    def of(self, run: Run) -> Usage | None:
        """``run``'s agent usage at the last pass (None: not sampled yet)."""
        hit = self.usage.get(run.issue.id)
        return hit[1] if hit is not None and hit[0] is run else None

    def agents_rss(self, host: str | None, running: Mapping[str, Run]) -> int:
        """Bytes the agents of the runs on ``host`` (None: this machine) use together; an
        agent server several runs share (one ``root``) counts once."""
        by_root: dict[object, int] = {}
        for run in running.values():
            usage = self.of(run)
            if run.worker_host == host and usage is not None:
                by_root[usage.root if usage.root is not None else id(run)] = usage.rss_bytes
        return sum(by_root.values())

    def short(
        self, host: str | None, worker: WorkerSettings, running: Mapping[str, Run]
    ) -> str | None:
        """Why ``host`` (None: this machine) takes no new run now, or None: its free memory
        is under ``worker.min_free_memory_mb`` (per host: ``worker.hosts.<h>``), or its
        agents use ``max_memory_mb`` or more (once short: until 5 % past the line,
        :data:`RELEASE_MARGIN`); with either set, also until its first sample (a host
        just reached). Sampling off (``resource_sample_ms`` 0): never."""
        floor, cap = worker.memory_floor_mb(host), worker.memory_cap_mb(host)
        if not (floor or cap) or worker.resource_sample_ms <= 0:
            return None
        memory = self.machines.get(host)
        if memory is None:
            return f"the memory of {_where(host)} is not sampled yet"
        # Once short, a machine has room again only past a margin (no event and tick on
        # every swing of a few MB around the line).
        margin = RELEASE_MARGIN if host in self.was_short else 0.0
        available = memory.available
        if floor and available is not None and available < floor * MIB * (1 + margin):
            return f"{_where(host)} has {memory_text(available)} free, under the {floor:,} MB floor"
        if cap:
            used = self.agents_rss(host, running)
            if used >= cap * MIB * (1 - margin):
                return f"agents on {_where(host)} use {memory_text(used)}, the cap is {cap:,} MB"
        return None

    def largest(self, host: str | None, running: Mapping[str, Run]) -> tuple[Run, Usage] | None:
        """The run on ``host`` whose agent uses the most memory, with its usage."""
        best: tuple[Run, Usage] | None = None
        for run in running.values():
            usage = self.of(run)
            if (
                run.worker_host == host
                and usage is not None
                and (best is None or usage.rss_bytes > best[1].rss_bytes)
            ):
                best = (run, usage)
        return best

    def rows(self, worker: WorkerSettings, running: Mapping[str, Run]) -> tuple[MemoryRow, ...]:
        """The machines agents run on now, as sampled (this machine without worker hosts,
        else the listed hosts), for the snapshot."""
        names: tuple[str | None, ...] = worker.ssh_hosts if worker.enabled else (None,)
        if worker.enabled and any(r.worker_host is None for r in running.values()):
            names = (None, *names)
        return tuple(
            MemoryRow(
                host=name,
                available_bytes=memory.available,
                total_bytes=memory.total,
                agents_rss_bytes=self.agents_rss(name, running),
                short=self.short(name, worker, running),
            )
            for name in names
            if (memory := self.machines.get(name)) is not None
        )


class SchedulerState(Protocol):
    """What this module uses of ``state.SchedulerState`` (named structurally: the state
    module imports this one)."""

    resources: ResourceBook
    running: dict[str, Run]
    hosts: HostBook

    @property
    def settings(self) -> Settings: ...

    def emit_system(self, kind: EventKind, message: str) -> None: ...

    def log(self, level: str, msg: str, **fields: Any) -> None: ...

    def changed(self) -> None: ...


def _reachable(hosts: HostBook, name: str) -> bool:
    """Whether worker host ``name`` is listed, up and reached."""
    host = hosts.get(name)
    return host is not None and host.up and host.reached


def dispatch_hold(state: SchedulerState, issue_id: str) -> str | None:
    """Why ``issue_id`` cannot start for lack of memory right now, or None (it waits for
    something else, or not at all): this machine without worker hosts; with them, its
    workspace's host when that one is short, else the hosts that would have a slot but
    are short (all of them). Recorded as the issue's note (``ResourceBook.waiting``)."""
    book, worker, running = state.resources, state.settings.worker, state.running
    why: str | None = None
    if not worker.enabled:
        why = book.short(None, worker, running)
    else:
        hosts = state.hosts
        home = hosts.get(hosts.home.get(issue_id, ""))
        if home is not None and home.up and home.reached:
            why = book.short(home.name, worker, running)
        else:
            load = hosts.load(running)
            open_ = [
                h
                for h in hosts.hosts()
                if h.up and h.reached and not h.drained
                and ((cap := worker.capacity(h.name)) is None or load.get(h.name, 0) < cap)
            ]  # fmt: skip
            reasons = [book.short(h.name, worker, running) for h in open_]
            if reasons and all(reasons):
                why = "; ".join(r for r in reasons if r)
    if why is None:
        book.waiting.pop(issue_id, None)
    else:
        book.waiting[issue_id] = WAITING_FOR_MEMORY + why
    return why


def apply_sample(state: SchedulerState, sample: ResourcesSampled) -> bool:
    """Apply one pass to ``state`` (the loop's handler): the runs still running keep
    their usage, each sampled machine its memory; a machine that became short says so in
    an event naming its largest agent. Returns True when issues wait for memory and a
    machine has room again or was sampled for the first time with room (the caller asks
    for a tick: they may start)."""
    book = state.resources
    book.usage = {
        issue_id: (run, usage)
        for issue_id, (run, usage) in sample.runs.items()
        if state.running.get(issue_id) is run
    }
    first = [m for m in sample.machines if m not in book.machines]
    book.machines.update(sample.machines)
    # A host no longer listed, or down, has no memory known: one that comes back is held
    # (when it has a floor or cap) until its first sample after it.
    for gone in [m for m in book.machines if m is not None and not _reachable(state.hosts, m)]:
        del book.machines[gone]
    worker = state.settings.worker
    short_now: set[str | None] = set()
    for machine in book.machines:
        why = book.short(machine, worker, state.running)
        if why is None:
            continue
        short_now.add(machine)
        if machine in book.was_short:
            continue
        largest = book.largest(machine, state.running)
        if largest is not None:
            run, usage = largest
            tail = f"; largest agent {run.issue.identifier} ({memory_text(usage.rss_bytes)})"
        else:
            tail = "; no agent of ours runs there"
        state.emit_system(
            EventKind.WARNING, f"short of memory: {why}{tail}; no new run starts there"
        )
        state.log(
            "warning", "short of memory", host=machine or "local", reason=why,
            largest=largest[0].issue.identifier if largest else None,
            largest_rss=largest[1].rss_bytes if largest else None,
        )  # fmt: skip
    freed = book.was_short - short_now
    for machine in freed:
        state.emit_system(EventKind.WARNING, f"{_where(machine)} has memory for new runs again")
    book.was_short = short_now
    state.changed()
    # Issues held for memory (until a machine's first sample too) may start now; with none
    # waiting the next poll is soon enough.
    held = any(why.startswith(WAITING_FOR_MEMORY) for why in book.waiting.values())
    return held and (bool(freed) or any(m not in short_now for m in first))


class ResourceSampler:
    """The sampling task (module docstring). ``post`` puts an input on the loop's inbox;
    ``targets`` gives a worker host's ssh target."""

    def __init__(
        self,
        state: SchedulerState,
        post: Callable[[Input], None],
        targets: Callable[[str], SshTarget],
    ) -> None:
        self._state = state
        self._post = post
        self._targets = targets
        self._meters: dict[str | None, CpuMeter] = {}

    async def run(self, *, wait_first: bool = False) -> None:
        """Sample every ``worker.resource_sample_ms`` until cancelled (the interval is read
        again after each pass: a reload changes it); ``wait_first``: one interval before
        the first pass (one was just taken)."""
        if wait_first:
            await asyncio.sleep(self._state.settings.worker.resource_sample_ms / 1000)
        while True:
            interval_ms = self._state.settings.worker.resource_sample_ms
            if interval_ms <= 0:
                await asyncio.sleep(IDLE_CHECK_S)
                continue
            await self.post_one()
            await asyncio.sleep(interval_ms / 1000)

    async def post_one(self) -> None:
        """Take one pass and post it; a pass that fails is logged and nothing is posted (it
        never ends the sampling, nor the start-up that takes the first one)."""
        try:
            self._post(await self.sample())
        except Exception as exc:
            log.warning("resource sampling failed: %s", exc)

    def _meter(self, machine: str | None) -> CpuMeter:
        meter = self._meters.get(machine)
        if meter is None:
            meter = self._meters[machine] = CpuMeter()
        return meter

    async def sample(self) -> ResourcesSampled:
        """One pass over every machine agents run on (see the module docstring)."""
        state = self._state
        worker = state.settings.worker
        runs = list(state.running.values())
        local = {
            r.issue.id: r
            for r in runs
            if r.worker_host is None and r.session is not None and r.session.pid
        }
        remote: dict[str, list[Run]] = {}
        if worker.enabled:
            for host in state.hosts.hosts():
                if host.up and host.reached:
                    remote[host.name] = [
                        r for r in runs if r.worker_host == host.name and r.workspace is not None
                    ]
        jobs: list[asyncio.Future] = []
        if not worker.enabled or local:
            jobs.append(asyncio.ensure_future(self._local(local)))
        jobs += [asyncio.ensure_future(self._host(name, on)) for name, on in remote.items()]
        out_runs: dict[str, tuple[Run, Usage]] = {}
        machines: dict[str | None, Memory] = {}
        for result in await asyncio.gather(*jobs, return_exceptions=True):
            if isinstance(result, BaseException):
                if not isinstance(result, SshError | OSError | TimeoutError):
                    log.warning("resource sampling failed: %s", result)
                continue
            machine, memory, usage = result
            machines[machine] = memory
            out_runs.update(usage)
        listed = set(worker.ssh_hosts)
        self._meters = {m: v for m, v in self._meters.items() if m is None or m in listed}
        return ResourcesSampled(out_runs, machines)

    async def _local(
        self, runs: Mapping[str, Run]
    ) -> tuple[None, Memory, dict[str, tuple[Run, Usage]]]:
        roots = {
            key: pid
            for key, run in runs.items()
            if run.session is not None and (pid := run.session.pid)
        }
        groups, memory = await asyncio.to_thread(local_pass, roots)
        usage = self._meter(None).usage(groups, time.monotonic())
        return (
            None,
            memory,
            {
                key: (runs[key], replace(u, root=roots[key]))
                for key, u in usage.items()
                if groups[key]
            },
        )

    async def _host(
        self, name: str, runs: list[Run]
    ) -> tuple[str, Memory, dict[str, tuple[Run, Usage]]]:
        interval_s = self._state.settings.worker.resource_sample_ms / 1000
        script = host_script([str(r.workspace) for r in runs])
        done = await self._targets(name).run(script, timeout_s=max(HOST_TIMEOUT_S, interval_s))
        found, memory = parse_host_output(done.stdout.decode("utf-8", "replace"), len(runs))
        groups: dict[str, list[Proc]] = {runs[i].issue.id: procs for i, procs in found.items()}
        usage = self._meter(name).usage(groups, time.monotonic())
        by_id = {r.issue.id: r for r in runs}
        return (
            name,
            memory,
            {
                key: (by_id[key], replace(u, root=min(p.pid for p in groups[key])))
                for key, u in usage.items()
                if groups[key]
            },
        )
