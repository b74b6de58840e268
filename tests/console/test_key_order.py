"""Keys read in one burst are handled in the order they were typed (console/key_order.py),
also when a later one is a priority binding (``/``) that Textual runs as it arrives."""

from __future__ import annotations

from textual import events

from symphony_tui.console.screens.modals import Confirm
from tests.console.helpers import SIZE, settle


def _burst(app, *keys: tuple[str, str]) -> None:
    # posted before the console handles the first: what one terminal read delivers
    for key, char in keys:
        app.post_message(events.Key(key, char))


async def test_q_then_slash_in_one_read_asks_to_quit(port, make_app):
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        _burst(app, ("q", "q"), ("slash", "/"))
        await settle(pilot)
        assert isinstance(app.screen, Confirm)  # the q was not lost behind the /
        assert not app.screen_stack[0].query_one("#log-filter").display


async def test_a_key_then_slash_then_text_each_go_where_they_were_typed(port, make_app):
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        # "1" focuses the issues pane, "/" opens the filter, which gets exactly "ab"
        _burst(app, ("1", "1"), ("slash", "/"), ("a", "a"), ("b", "b"))
        await settle(pilot)
        box = app.screen.query_one("#log-filter")
        assert box.display and box.value == "ab"
        assert port.sent == []
