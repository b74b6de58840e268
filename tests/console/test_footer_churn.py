"""The footer under churn: workers that start and end change the keys that
apply several times a second. Textual's Footer binds every key it builds to the footer's
``compact`` (``data_bind``), a watcher kept on the footer until ``compact`` changes, so every
key ever shown would stay alive. Counts only, never time."""

from __future__ import annotations

import gc
import weakref

from textual.widgets._footer import FooterKey

from symphony_tui.console.widgets.footer import ConsoleFooter
from symphony_tui.domain import ClaimState, IssueRow, RunningRow, RunStatus
from tests.console.helpers import SIZE, settle
from tests.console.sample import COMMAND_APPROVAL, ago

STEPS = 12


def churn(port, step: int) -> None:
    """Ten running workers, three of them replaced each step; every third one waits for an
    approval, so the keys of the selected row come and go."""
    running, issues, approvals = [], [], []
    for i in range(10):
        n = step * 3 + i
        running.append(
            RunningRow(
                issue_id=f"w-{n}",
                issue_identifier=f"W-{n}",
                state="In Progress",
                status=RunStatus.STREAMING_TURN,
                started_at=ago(10),
                last_event="message",
                last_message=f"step {step}",
                pending_approvals=int(n % 3 == 0),
            )
        )
        if n % 3 == 0:
            approvals.append(
                COMMAND_APPROVAL.model_copy(
                    update={"id": f"w-{n}:1", "issue_id": f"w-{n}", "issue_identifier": f"W-{n}"}
                )
            )
        issues.append(
            IssueRow(
                issue_id=f"w-{n}",
                identifier=f"W-{n}",
                title="churn",
                state="In Progress",
                claim=ClaimState.RUNNING,
            )
        )
    port.update(
        running=tuple(running),
        issues=tuple(issues),
        approvals=tuple(approvals),
        generated_at=ago(-step),
    )


def footer_watchers(footer: ConsoleFooter) -> int:
    return sum(len(v) for v in getattr(footer, "__watchers", {}).values())


async def test_churning_workers_keep_footer_keys_and_watchers_bounded(port, make_app):
    # Keys another test's app still holds (the suite shares one process) are not this footer's.
    gc.collect()
    earlier = weakref.WeakSet(o for o in gc.get_objects() if isinstance(o, FooterKey))
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        footer = app.screen.query_one(ConsoleFooter)
        changes = 0
        for step in range(STEPS):
            before = [k.key for k in footer.query(FooterKey)]
            churn(port, step)
            await settle(pilot)
            await pilot.press("down" if step % 2 else "up")
            await settle(pilot)
            changes += before != [k.key for k in footer.query(FooterKey)]
        assert changes >= STEPS // 3  # the keys really did change: the footer was rebuilt
        gc.collect()
        shown = len(footer.query(FooterKey))
        alive = [o for o in gc.get_objects() if isinstance(o, FooterKey) and o not in earlier]
        assert shown > 0 and len(alive) == shown
        assert footer_watchers(footer) <= shown


async def test_unchanged_keys_are_not_rebuilt(port, make_app):
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        footer = app.screen.query_one(ConsoleFooter)
        keys = list(footer.query(FooterKey))
        for _ in range(5):
            app.refresh_bindings()
            await settle(pilot)
        assert list(footer.query(FooterKey)) == keys
        assert all(a is b for a, b in zip(footer.query(FooterKey), keys, strict=True))


async def test_closed_worker_screens_are_not_kept(port, make_app):
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        for _ in range(8):
            await pilot.press("2", "enter")
            await settle(pilot)
            assert type(app.screen).__name__ == "WorkerScreen"
            await pilot.press("escape")
            await settle(pilot)
        gc.collect()
        assert len(app.refresher.render_keys) <= len(app.screen_stack)
