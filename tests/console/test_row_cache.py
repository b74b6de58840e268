"""Cell reuse: an unchanged value keeps its Text object, so diffing is by identity and a
busy table rebuilds only the cells that changed."""

from __future__ import annotations

from symphony_tui.console.tones import Tones
from symphony_tui.console.widgets.issues import issue_rows
from symphony_tui.console.widgets.keyed_table import RowCache
from symphony_tui.console.widgets.workers import worker_rows
from tests.console.sample import NOW, later, sample_snapshot


def test_unchanged_rows_and_cells_are_reused():
    tones = Tones()
    cache = RowCache()
    snap = sample_snapshot()
    first = dict(worker_rows(snap, NOW, tones, cache))
    again = dict(worker_rows(snap, NOW, tones, cache))
    assert all(first[k] is again[k] for k in first)

    changed = snap.running[1].model_copy(update={"last_message": "now testing"})
    snap2 = snap.model_copy(update={"running": (snap.running[0], changed)})
    third = dict(worker_rows(snap2, later(1), tones, cache))
    assert third["demo-1"][1] is first["demo-1"][1]  # identifier kept
    assert third["demo-3"][8] is not first["demo-3"][8]  # last event rebuilt
    assert "now testing" in third["demo-3"][8].plain
    assert third["demo-3"][5].plain != first["demo-3"][5].plain  # age moved on


def test_new_tones_rebuild_and_gone_rows_are_forgotten():
    cache = RowCache()
    snap = sample_snapshot()
    a = dict(issue_rows(snap, Tones(), cache))
    b = dict(issue_rows(snap, Tones(bold=Tones().muted), cache))
    assert a["demo-1"] is not b["demo-1"]
    issue_rows(snap.model_copy(update={"issues": snap.issues[:1]}), Tones(), cache)
    assert set(cache._rows) == {"demo-1"}
