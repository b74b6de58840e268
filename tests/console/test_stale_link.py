"""An attached console whose link to the scheduler is lost never shows stale data as live:
rows whose status is live read ``? unknown`` (dimmed) ``as of <age> ago``, the header and the alert line
name the lost link (never a tracker error)."""

from __future__ import annotations

import html
import re

import pytest

from symphony_tui.api.client import LinkStatus
from tests.console.helpers import SIZE, settle


class LinkedPort:
    """The sample port, attached: ``link()`` as :class:`RemotePort` has it."""

    detach_only = True

    def __init__(self, port, link: LinkStatus) -> None:
        self._port = port
        self.current_link = link

    def link(self) -> LinkStatus:
        return self.current_link

    def __getattr__(self, name):
        return getattr(self._port, name)


def screen_text(app) -> str:
    """The screen's text, from its SVG screenshot (one ``<text>`` element per styled run)."""
    svg = app.export_screenshot()
    svg = re.sub(r"<style.*?</style>", "", svg, flags=re.S)
    runs = re.findall(r"<text[^>]*>(.*?)</text>", svg, flags=re.S)
    return "".join(html.unescape(run) for run in runs).replace("\xa0", " ")


@pytest.mark.parametrize("state", ["stale", "reconnecting"])
async def test_a_lost_link_shows_no_row_as_working(port, make_app, state):
    running = port.snapshot().running
    assert any(r.status == "streaming_turn" for r in running)  # the sample has live rows
    lost = LinkStatus(state, 19.0, "stream", "connection refused")
    linked = LinkedPort(port, lost)
    app = make_app(linked)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        text = screen_text(app)
        assert "working" not in text and "waiting" not in text
        assert text.count("? unknown") == len(running)
        assert text.count("as of 19s ago") == len(running)
        assert "scheduler link lost" in text
        assert "connection refused · last update 19s ago" in text
        assert "tracker error" not in text
        linked.current_link = LinkStatus("live", 0.2, "stream")  # back: live rows again
        await settle(pilot)
        await settle(pilot)
        text = screen_text(app)
        assert "working" in text and "unknown" not in text
        assert "scheduler link lost" not in text


def test_a_failed_row_keeps_its_status_while_the_link_is_lost(port):
    from symphony_tui.console.tones import Tones
    from symphony_tui.console.widgets.workers import worker_rows

    snap = port.snapshot()
    ended = snap.running[0].model_copy(update={"status": "failed"})
    snap = snap.model_copy(update={"running": (ended, *snap.running[1:])})
    rows = worker_rows(snap, snap.generated_at, Tones(), unknown_s=19.0)
    cells = [" ".join(c.plain for c in row) for _, row in rows]
    assert "✗ failed" in cells[0]
    assert all("? unknown" in c and "as of 19s ago" in c for c in cells[1:])
    assert "as of" not in cells[0]
