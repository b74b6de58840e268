"""``/api/v1/<identifier>``'s ``recent_events``: the newest 50 events of the
issue that are not streamed fragments, newest first (``symphony_tui.domain.activity``)."""

from __future__ import annotations

from symphony_tui.api.server import _issue_payload
from symphony_tui.domain import EventKind
from symphony_tui.domain.activity import RECENT_EVENTS, recent_events
from tests.console.sample import sample_port


def test_recent_events_are_the_newest_first():
    port = sample_port()
    port.events.clear()
    for n in range(120):
        port.add_event(EventKind.MESSAGE, f"item {n}", issue_id="demo-3", identifier="DEMO-3")
        port.add_event(EventKind.MESSAGE_DELTA, "chunk", issue_id="demo-3", identifier="DEMO-3")
    port.add_event(EventKind.MESSAGE, "another issue", issue_id="demo-1", identifier="DEMO-1")
    body = _issue_payload(port, "DEMO-3")
    assert body is not None
    messages = [e["message"] for e in body["recent_events"]]
    assert messages == [f"item {n}" for n in range(119, 119 - RECENT_EVENTS, -1)]
    assert {e["event"] for e in body["recent_events"]} == {"message"}


def test_recent_events_helper_bounds_and_order():
    port = sample_port()
    events = [e for e in port.events if e.kind is not EventKind.MESSAGE_DELTA]
    assert recent_events(port.events, limit=2) == events[::-1][:2]
    assert recent_events(port.events, limit=0) == []
