"""The operator's worker-host commands through the normal command path
(``Orchestrator.send`` -> control lane -> scheduler/worker_hosts/commands.py): a drained host takes
no new dispatch (the next host does), undrain opens it again, unknown hosts and a
scheduler without hosts are refused in one line, and every one is audited.

The hosts are loopback ports nothing listens on: placement is decided (and logged as the
dispatch event) before the run's first ssh call, which then fails fast. The start-up
contact with each host is left out (:func:`_untried`): it would find them down at once,
and these commands are about hosts that were not tried yet."""

from __future__ import annotations

from symphony_tui.domain.commands import DrainHost, ProbeHost, UndrainHost

from .conftest import make_issue

HOSTS = "worker:\n  ssh_hosts: ['127.0.0.1:9', '127.0.0.2:9']\n  connect_timeout_ms: 2000\n"


def _untried(h):
    """``h`` whose scheduler does not reach its hosts at start-up (they stay as listed)."""
    h.orch.dispatcher.probes.start = lambda *args, **kwargs: None
    return h


def _dispatched(h) -> list[str]:
    return [e.message for e in h.orch.events_since(0) if e.message.startswith("dispatched ")]


async def test_a_drained_host_gets_no_new_dispatch_and_undrain_opens_it(make_harness):
    h = _untried(make_harness([], front=HOSTS))
    await h.start()
    await h.settle()
    result = await h.orch.send(DrainHost(host="127.0.0.1:9"))
    assert result.ok and "drained" in result.message, result.message
    first = h.orch.snapshot().hosts[0]
    assert first.name == "127.0.0.1:9" and first.drained and first.up
    again = await h.orch.send(DrainHost(host="127.0.0.1:9"))
    assert again.ok and "already drained" in again.message

    h.tracker.put(make_issue(1))
    await h.orch.tick()
    await h.settle()
    # without the drain, the first listed of two idle hosts takes it
    assert _dispatched(h)[:1] == ["dispatched ABC-1 on 127.0.0.2:9"]

    undrained = await h.orch.send(UndrainHost(host="127.0.0.1:9"))
    assert undrained.ok and not h.orch.snapshot().hosts[0].drained
    entries = await h.orch.audit_entries()
    assert [(e.what, e.ok, e.detail) for e in entries] == [
        ("drain_host", True, 'host="127.0.0.1:9"'),
        ("drain_host", True, 'host="127.0.0.1:9"'),
        ("undrain_host", True, 'host="127.0.0.1:9"'),
    ]


async def test_unknown_hosts_and_no_hosts_are_refused_in_one_line(make_harness):
    h = _untried(make_harness([], front=HOSTS))
    await h.start()
    unknown = await h.orch.send(DrainHost(host="build-9"))
    assert not unknown.ok
    assert unknown.message == "no worker host 'build-9' (127.0.0.1:9, 127.0.0.2:9)"
    assert not any(r.drained for r in h.orch.snapshot().hosts)
    refused = [e.message for e in h.orch.events_since(0) if "refused" in e.message]
    assert "operator: drain host build-9 refused: no worker host 'build-9'" in refused[0]


async def test_without_hosts_the_host_commands_say_so(make_harness):
    h = make_harness([])
    await h.start()
    for command in (DrainHost(host="a"), UndrainHost(host="a"), ProbeHost(host="a")):
        result = await h.orch.send(command)
        assert not result.ok
        assert result.message == "no worker hosts are configured (worker.ssh_hosts)"
    assert h.orch.snapshot().hosts == ()


async def test_removing_a_workspace_on_a_host_frees_its_issue_from_that_host(make_harness):
    from symphony_tui.domain import RecoveredWorkspace

    h = _untried(make_harness([], front=HOSTS))
    await h.start()
    state = h.orch.state
    state.hosts.placed("id-7", "127.0.0.1:9")
    state.hosts.placed("id-8", "127.0.0.1:9")
    assert (await h.orch.send(DrainHost(host="127.0.0.1:9"))).ok
    assert state.hosts.place("id-7", {}) == "127.0.0.1:9"  # its workspace is there
    state.recovered = (
        RecoveredWorkspace(key="ABC-7", path="/w/ABC-7", host="127.0.0.1:9", issue_id="id-7"),
        RecoveredWorkspace(key="ABC-8", path="/w/ABC-8", host="127.0.0.1:9", issue_id="id-8"),
    )
    h.orch._commands.workspace_removed("ABC-7", True, "")
    h.orch._commands.workspace_removed("ABC-8", False, "")  # the removal failed
    assert state.hosts.place("id-7", {}) == "127.0.0.2:9"  # anywhere but the drained one
    assert state.hosts.place("id-8", {}) == "127.0.0.1:9"


async def test_probing_an_up_host_that_does_not_answer_marks_it_down(make_harness):
    h = _untried(make_harness([], front=HOSTS))
    await h.start()
    up = await h.orch.send(ProbeHost(host="127.0.0.2:9"))
    assert up.ok and up.message == "measuring the round trip to 127.0.0.2:9"
    again = await h.orch.send(ProbeHost(host="127.0.0.2:9"))
    assert not again.ok and again.message == "127.0.0.2:9 is being probed already"
    await h.until(lambda: not h.orch.snapshot().hosts[1].up, timeout=15)
    row = h.orch.snapshot().hosts[1]
    assert row.last_error and "refused" in row.last_error and "\n" not in row.last_error
    assert any("worker host 127.0.0.2:9 is down" in e.message for e in h.orch.events_since(0))
    # down now: a probe moves its next one forward instead
    down = await h.orch.send(ProbeHost(host="127.0.0.2:9"))
    assert down.ok and down.message == "probing 127.0.0.2:9"


async def test_an_issue_that_no_host_can_take_says_why_on_its_row(make_harness):
    h = _untried(make_harness([], front=HOSTS))
    await h.start()
    await h.settle()
    for name in ("127.0.0.1:9", "127.0.0.2:9"):
        h.orch.state.hosts.mark_down(name, f"ssh: connect to host {name}: refused", 0.0)
    h.tracker.put(make_issue(1))
    await h.orch.tick()
    await h.settle()
    assert not _dispatched(h)
    row = next(r for r in h.orch.snapshot().issues if r.issue_id == "id-1")
    assert (
        row.note
        == "every worker host is down (127.0.0.1:9: ssh: connect to host 127.0.0.1:9: refused)"
    )
