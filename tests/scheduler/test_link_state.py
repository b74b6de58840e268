"""A run's link to its detached agent is scheduler state: the session's ``LinkChanged``
event reaches the loop as agent traffic and shows in the snapshot (workers pane, worker
detail, hosts screen) and in ``GET /api/v1/state``."""

from __future__ import annotations

from datetime import timedelta

from symphony_tui.console.screens.hosts import host_detail, host_rows
from symphony_tui.console.screens.worker import worker_header
from symphony_tui.console.tones import Tones
from symphony_tui.console.widgets.workers import HOST_SHRINK, worker_rows
from symphony_tui.domain import AgentEvent, EventKind
from symphony_tui.domain.payloads import LinkChanged
from symphony_tui.domain.snapshot import HostRow
from symphony_tui.scheduler.inbox import AgentTraffic
from symphony_tui.scheduler.run import Run
from tests.console.sample import NOW, sample_snapshot

from .conftest import make_issue


async def test_a_link_change_posted_by_a_session_reaches_the_snapshot_and_the_api(make_harness):
    h = make_harness([])
    await h.start()
    await h.settle()
    run = Run(
        issue=make_issue(1, state="In Progress"),
        attempt=None,
        backend="codex",
        started_at=h.clock.now(),
        started_mono=0.0,
        last_event_mono=0.0,
        worker_host="h1",
    )
    h.orch.state.claim(run)
    since = NOW.isoformat()
    link = LinkChanged(mode="ssh", state="reconnecting", since=since, host="h1", reason="x")
    h.orch._inbox.post(AgentTraffic(run, AgentEvent(kind=EventKind.WARNING, payload=link)))
    await h.orch.barrier()
    (row,) = h.orch.snapshot().running
    assert (row.link_mode, row.link_state, row.link_since) == ("ssh", "reconnecting", NOW)
    state = h.orch.snapshot().state_payload()["running"][0]["link"]
    assert state == {"mode": "ssh", "state": "reconnecting", "since": since, "host": "h1"}
    back = LinkChanged(mode="ssh", state="connected", host="h1")
    h.orch._inbox.post(AgentTraffic(run, AgentEvent(kind=EventKind.NOTIFICATION, payload=back)))
    await h.orch.barrier()
    (row,) = h.orch.snapshot().running
    assert (row.link_state, row.link_since) == ("connected", None)


def test_the_console_shows_the_link_in_the_workers_pane_the_detail_and_the_hosts_screen():
    snap = sample_snapshot()
    first, *rest = snap.running
    cut = first.model_copy(
        update={
            "host": "build-1",
            "link_mode": "ssh",
            "link_state": "reconnecting",
            "link_since": NOW - timedelta(seconds=12),
        }
    )
    hosts = (HostRow(name="build-1", running=1, reconnecting=1, reconnecting_since=cut.link_since),)
    snap = snap.model_copy(update={"running": (cut, *rest), "hosts": hosts})
    rows = dict(worker_rows(snap, NOW, Tones(), hosts=True))
    status = rows[cut.issue_id][3]  # approval, issue, host, status
    assert status.plain == "↻ cut 12s"
    assert len(status.plain) <= HOST_SHRINK["status"]  # what the column keeps at 80
    lost = cut.model_copy(update={"link_state": "lost"})
    snap_lost = snap.model_copy(update={"running": (lost, *rest)})
    assert dict(worker_rows(snap_lost, NOW, Tones(), hosts=True))[cut.issue_id][3].plain == (
        "✗ no link"
    )
    detail = worker_header(snap, cut.issue_id, NOW, Tones()).plain
    assert "link ssh reconnecting for 12s" in detail
    here = worker_header(snap, rest[0].issue_id, NOW, Tones()).plain
    assert "link local connected" in here
    lines = worker_header(snap, cut.issue_id, NOW, Tones(), width=76).plain.split("\n")
    (line,) = [x for x in lines if "link ssh" in x]
    assert len(line) <= 76, line
    (host_row,) = [r for _, r in host_rows(snap, NOW, Tones())]
    assert host_row[1].plain == "↻ 1 link"
    text = host_detail(hosts[0], snap, NOW, Tones())
    assert "1 of 1 reconnecting, the first for 12s" in text.plain
    (line,) = [x for x in text.plain.split("\n") if x.startswith("links")]
    assert len(line) <= 80, line


async def test_an_exec_server_run_shows_its_mode_from_its_first_link_event(make_harness):
    h = make_harness([])
    await h.start()
    await h.settle()
    run = Run(
        issue=make_issue(2, state="In Progress"),
        attempt=None,
        backend="codex",
        started_at=h.clock.now(),
        started_mono=0.0,
        last_event_mono=0.0,
        worker_host="h1",
    )
    h.orch.state.claim(run)
    (row,) = h.orch.snapshot().running
    assert row.link_mode == "ssh"  # nothing said yet: the host's default
    link = LinkChanged(mode="exec-server", state="connected", host="h1")
    h.orch._inbox.post(AgentTraffic(run, AgentEvent(kind=EventKind.NOTIFICATION, payload=link)))
    await h.orch.barrier()
    snap = h.orch.snapshot()
    (row,) = snap.running
    assert (row.link_mode, row.link_state) == ("exec-server", "connected")
    state = snap.state_payload()["running"][0]["link"]
    assert state == {"mode": "exec-server", "state": "connected", "since": None, "host": "h1"}
    lines = worker_header(snap, row.issue_id, NOW, Tones(), width=76).plain.split("\n")
    (line,) = [x for x in lines if "link exec-server connected" in x]
    assert len(line) <= 76, line
