"""The command palette acts on the row selected where it was opened: approve, deny,
interrupt (the registry's row commands), as their keys do."""

from __future__ import annotations

from tests.console.helpers import SIZE, done, settle
from tests.console.test_keys import select_worker
from tests.console.test_tools import palette_titles


async def test_the_palette_offers_and_runs_the_selected_rows_actions(port, make_app):
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await select_worker(pilot, "DEMO-1")  # a worker with a pending approval
        titles = await palette_titles(pilot, "approve")
        assert "Approve (a)" in titles and "Approve for session (A)" in titles
        await pilot.press("escape")
        await settle(pilot)
        titles = await palette_titles(pilot, "deny")
        assert "Deny (d)" in titles
        await pilot.press("escape")
        await settle(pilot)
        titles = await palette_titles(pilot, "interrupt")
        assert "Interrupt (i)" in titles
        await pilot.press("escape")
        await settle(pilot)
        await palette_titles(pilot, "approve for session")
        await pilot.press("enter")
        await done(pilot)
    assert [c.type for c in port.sent] == ["approve"]
    assert port.sent[0].for_session is True
