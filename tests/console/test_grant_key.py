"""``g`` grants part of a permissions request (then asks for how long) against the fake
port: the right ``Approve`` command, and disabled for other requests."""

from __future__ import annotations

from symphony_tui.console.approval_text import permission_choices
from symphony_tui.console.screens.modals import Choose
from symphony_tui.domain import ApprovalKind, Approve
from tests.console.helpers import SIZE, done, settle
from tests.console.sample import COMMAND_APPROVAL, QUESTION_APPROVAL
from tests.console.test_keys import select_worker

PERMISSIONS = COMMAND_APPROVAL.model_copy(
    update={
        "kind": ApprovalKind.PERMISSIONS,
        "command": None,
        "permissions": {
            "network": {"enabled": True},
            "fileSystem": {"write": ["/ws/DEMO-1/out"], "read": ["/etc/hosts"]},
        },
    }
)


def test_permission_choices_are_the_grantable_parts():
    assert permission_choices(PERMISSIONS) == [
        ("network access", {"network": {"enabled": True}}),
        ("write /ws/DEMO-1/out", {"fileSystem": {"write": ["/ws/DEMO-1/out"]}}),
        ("read /etc/hosts", {"fileSystem": {"read": ["/etc/hosts"]}}),
    ]
    assert permission_choices(COMMAND_APPROVAL) == []


async def test_grant_is_disabled_for_other_requests(port, make_app):
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await select_worker(pilot, "DEMO-1")  # a command approval
        assert app.check_action("grant", ()) is False
        await pilot.press("g")
        await done(pilot)
        assert not isinstance(app.screen, Choose)
        assert port.sent == []


async def test_grant_one_part_for_the_session(port, make_app):
    port.update(approvals=(PERMISSIONS, QUESTION_APPROVAL))
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await select_worker(pilot, "DEMO-1")
        await pilot.press("g")
        await pilot.pause()
        assert isinstance(app.screen, Choose)
        await pilot.press("down", "enter")  # "write /ws/DEMO-1/out"
        await pilot.pause()
        assert isinstance(app.screen, Choose)
        await pilot.press("down", "enter")  # "the rest of the session"
        await done(pilot)
        assert port.sent == [
            Approve(
                approval_id="demo-1:7",
                for_session=True,
                permissions={"fileSystem": {"write": ["/ws/DEMO-1/out"]}},
            )
        ]


async def test_grant_everything_for_the_turn(port, make_app):
    port.update(approvals=(PERMISSIONS, QUESTION_APPROVAL))
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await select_worker(pilot, "DEMO-1")
        await pilot.press("g")
        await pilot.pause()
        await pilot.press("down", "down", "down", "enter")  # the last: "everything asked"
        await pilot.pause()
        await pilot.press("enter")  # "this turn"
        await done(pilot)
        assert port.sent == [Approve(approval_id="demo-1:7")]
