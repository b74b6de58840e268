"""The operator's worker-host commands: ``drain_host`` / ``undrain_host`` and
``probe_host``, applied on the scheduling loop by ``commands.OperatorCommands``.

A drained host takes no new issue (``book.HostBook.place``); its running attempts
go on, and an issue whose workspace is there (continuation, retry, rerun) still goes back
to it, so no work is redone on another host. Each answer is a ``CommandResult``; a name
that is not one of ``worker.ssh_hosts`` (as written there) is refused with the list.
"""

from __future__ import annotations

from symphony_tui.scheduler.inbox import Tick
from symphony_tui.scheduler.mailbox import Mailbox
from symphony_tui.scheduler.port import CommandResult
from symphony_tui.scheduler.worker_hosts.book import HostProbes, SchedulerView
from symphony_tui.text import one_line


def refusal(state: SchedulerView, name: str) -> CommandResult | None:
    """Why ``name`` is not a configured worker host, or None when it is one."""
    names = state.settings.worker.ssh_hosts
    if not state.hosts.enabled or not names:
        return CommandResult(False, "no worker hosts are configured (worker.ssh_hosts)")
    if state.hosts.get(name) is None:
        listed = one_line(", ".join(names), 200)
        return CommandResult(False, f"no worker host {one_line(name, 60)!r} ({listed})")
    return None


def drain(state: SchedulerView, host: str, drained: bool, mailbox: Mailbox) -> CommandResult:
    """Drain (``drained``) or undrain ``host`` (``HostBook.drain``). Draining twice is no
    error (the answer says so). An undrain asks for a tick (``Tick`` to ``mailbox``), so
    work waiting for a slot can go there at once."""
    refused = refusal(state, host)
    if refused is not None:
        return refused
    if not state.hosts.drain(host, drained):
        return CommandResult(True, f"{host} is already {'drained' if drained else 'open'}")
    state.changed()
    state.log("info", "worker host drained" if drained else "worker host undrained", host=host)
    if not drained:
        mailbox.post(Tick())
        return CommandResult(True, f"{host} takes new work again")
    running = state.hosts.load(state.running).get(host, 0)
    return CommandResult(
        True, f"{host} drained: no new issues go there ({running} running there go on)"
    )


def probe(state: SchedulerView, host: str, probes: HostProbes) -> CommandResult:
    """Probe ``host`` now. A down host: its next probe is moved to now
    (``HostBook.probe_now``, then ``probes.tick``) instead of the end of its backoff; the
    outcome comes as its ``up again`` event or a newer error on its row. An up host: its
    round trip is measured (``HostProbes.measure``); if it does not answer it is marked down
    and its running attempts end, as when a run loses its connection. Refused while the
    host is being probed."""
    refused = refusal(state, host)
    if refused is not None:
        return refused
    shown = state.hosts.get(host)
    if shown is not None and shown.probing:
        return CommandResult(False, f"{host} is being probed already")
    if shown is not None and shown.up:
        if not probes.measure(host):
            return CommandResult(False, f"{host} is not reached yet: its first contact runs")
        return CommandResult(True, f"measuring the round trip to {host}")
    state.hosts.probe_now(host, state.clock.monotonic())
    probes.tick()
    state.changed()
    return CommandResult(True, f"probing {host}")
