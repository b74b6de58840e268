"""The console's header names the worker hosts (up of all, runs over their
capacity) and the alert line names a down host with its reason; without hosts, nothing
of it shows."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from symphony_tui.console.tones import Tones
from symphony_tui.console.widgets.status import alert_text, status_text
from symphony_tui.domain import Snapshot
from symphony_tui.domain.snapshot import HostRow

NOW = datetime(2026, 12, 1, tzinfo=UTC)


def _tones() -> Tones:
    return Tones()


def test_hosts_in_the_header_and_a_down_host_in_the_alerts() -> None:
    snap = Snapshot(
        generated_at=NOW,
        hosts=(
            HostRow(name="build-1", up=True, running=2, capacity=4, rtt_ms=3.1),
            HostRow(name="me@build-2:2222", up=False, capacity=4, last_error="refused"),
        ),
    )
    line = status_text(snap, NOW, _tones()).plain
    assert "⇄ 1/2 hosts up · 2/8 on hosts" in line
    alert = alert_text(snap, NOW, _tones())
    assert alert is not None and "✗ host me@build-2:2222 down: refused" in alert.plain


def test_no_hosts_no_host_text() -> None:
    snap = Snapshot(generated_at=NOW)
    assert "hosts" not in status_text(snap, NOW, _tones()).plain
    assert alert_text(snap, NOW, _tones()) is None


def test_the_worker_detail_and_a_recovered_workspace_name_the_host() -> None:
    from symphony_tui.console.screens.recovered import recovered_detail
    from symphony_tui.console.screens.worker import worker_header
    from symphony_tui.domain import RecoveredWorkspace, RunningRow

    row = RunningRow(
        issue_id="i-1", issue_identifier="FL-1", state="Todo", host="build-1",
        workspace_path="/srv/ws/FL-1",
    )  # fmt: skip
    snap = Snapshot(generated_at=NOW, running=(row,))
    assert "workspace build-1:/srv/ws/FL-1" in worker_header(snap, "i-1", NOW, _tones()).plain
    here = row.model_copy(update={"host": None})
    text = worker_header(Snapshot(generated_at=NOW, running=(here,)), "i-1", NOW, _tones())
    assert "workspace /srv/ws/FL-1" in text.plain
    ws = RecoveredWorkspace(key="FL-1", path="/srv/ws/FL-1", host="build-1")
    assert re.search(r"^host +build-1$", recovered_detail(ws, _tones()).plain, re.M)
    assert "host" not in recovered_detail(ws.model_copy(update={"host": None}), _tones()).plain


def test_a_drained_host_is_counted_in_the_header() -> None:
    snap = Snapshot(
        generated_at=NOW,
        hosts=(
            HostRow(name="build-1", up=True, running=1, capacity=2, drained=True),
            HostRow(name="build-2", up=True, capacity=2),
        ),
    )
    line = status_text(snap, NOW, _tones())
    assert "⇄ 2/2 hosts up · 1/4 on hosts · 1 drained" in line.plain
    assert (
        "drained"
        not in status_text(snap.model_copy(update={"hosts": (snap.hosts[1],)}), NOW, _tones()).plain
    )
