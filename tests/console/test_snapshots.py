"""SVG screenshots of every screen at 80x24 and 120x36, compared with syrupy.

Deterministic: fixed sample data and datetimes, a frozen clock, UTC, no cursor blink.
Update after an intended change with ``pytest tests/console --snapshot-update`` and
review the .svg diff (textual is pinned exactly; bump it on purpose with this review).
"""

from __future__ import annotations

import pytest

from tests.console.helpers import settle

SIZES = [(80, 24), (120, 36)]


async def shoot(app, size, keys=(), before=None) -> str:
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        if before is not None:
            await before(pilot)
        for key in keys:
            await pilot.press(key)
            await settle(pilot)
        await settle(pilot)
        return app.export_screenshot(title="symphony")


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_main_screen(port, make_app, svg_snapshot, size):
    assert await shoot(make_app(port), size) == svg_snapshot


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_main_screen_with_alerts_and_pause(port, make_app, svg_snapshot, size):
    from tests.console.sample import later

    port.update(
        config_error="template_parse_error: unknown filter 'shout'",
        tracker_error="linear: 429 rate limited",
        tracker_paused_until=later(75),
        dispatch_paused=True,
    )
    assert await shoot(make_app(port), size) == svg_snapshot


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_worker_detail(port, make_app, svg_snapshot, size):
    assert await shoot(make_app(port), size, keys=("2", "enter")) == svg_snapshot


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_approvals_screen(port, make_app, svg_snapshot, size):
    assert await shoot(make_app(port), size, keys=("v",)) == svg_snapshot


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_recovered_screen(port, make_app, svg_snapshot, size):
    assert await shoot(make_app(port), size, keys=("w",)) == svg_snapshot


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_help_screen(port, make_app, svg_snapshot, size):
    assert await shoot(make_app(port), size, keys=("question_mark",)) == svg_snapshot


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_interrupt_confirmation(port, make_app, svg_snapshot, size):
    assert await shoot(make_app(port), size, keys=("2", "i")) == svg_snapshot


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_question_dialog(port, make_app, svg_snapshot, size):
    assert await shoot(make_app(port), size, keys=("2", "down", "t")) == svg_snapshot


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_log_filter_applied(port, make_app, svg_snapshot, size):
    async def filter_demo1(pilot):
        await pilot.press("slash", *"demo-1 cmd", "enter")

    app = make_app(port)
    assert await shoot(app, size, before=filter_demo1) == svg_snapshot


async def test_terminal_too_small(port, make_app, svg_snapshot):
    async def settle_again(pilot):
        await settle(pilot)  # the message screen is pushed after the first layout

    assert await shoot(make_app(port), (40, 12), before=settle_again) == svg_snapshot


async def _open_tool(pilot, *keys):
    await pilot.press(*keys)
    await pilot.app.workers.wait_for_complete()
    await settle(pilot)
    await pilot.app.workers.wait_for_complete()


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_diff_screen(port, make_app, svg_snapshot, size):
    from tests.console.sample import sample_tools

    app = make_app(sample_tools(port))
    shot = await shoot(app, size, before=lambda pilot: _open_tool(pilot, "2", "equals_sign"))
    assert shot == svg_snapshot


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_audit_screen(port, make_app, svg_snapshot, size):
    from tests.console.sample import sample_tools

    app = make_app(sample_tools(port))
    assert await shoot(app, size, before=lambda pilot: _open_tool(pilot, "H")) == svg_snapshot


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_workspace_dialog(port, make_app, svg_snapshot, size):
    assert await shoot(make_app(port), size, keys=("2", "o")) == svg_snapshot


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_hosts_screen(port, make_app, svg_snapshot, size):
    from tests.console.sample import sample_hosts

    app = make_app(sample_hosts(port))
    assert await shoot(app, size, keys=("h", "down")) == svg_snapshot


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_main_screen_with_hosts(port, make_app, svg_snapshot, size):
    from tests.console.sample import sample_hosts

    assert await shoot(make_app(sample_hosts(port)), size) == svg_snapshot
