"""Which app commands apply to the active screen's selection (``check_action``).

Commands that do not apply are hidden from the footer; an approval key pressed where
nothing waits says where approvals are waiting instead (registry ``requires``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual import events

from symphony_tui.console.approval_text import permission_choices
from symphony_tui.console.registry import (
    APP_BY_ACTION,
    ConsoleCommand,
    commands_for,
    display_key,
)
from symphony_tui.console.sanitize import one_line
from symphony_tui.console.selection import Selection
from symphony_tui.domain import ApprovalDecision

if TYPE_CHECKING:
    from symphony_tui.domain import ApprovalRequest

# What the approval-answering commands need selected (registry ``requires``).
_ANSWER_REQUIRES = frozenset({"accept", "decline", "cancel", "question"})


class EnablementMixin:
    """The selection, command enablement and the key shown for a command.

    A mixin of :class:`~symphony_tui.console.app.SymphonyApp` (it uses the App's API and
    the attributes set in ``SymphonyApp.__init__``); it never imports the app."""

    def _acting_screen(self):
        """The screen whose selection the commands act on: the active one, or, while the
        command palette is open, the screen it was opened from (its row actions apply to
        that screen's selected row)."""
        from textual.command import CommandPalette

        stack = self.screen_stack
        if len(stack) > 1 and isinstance(stack[-1], CommandPalette):
            return stack[-2]
        return self.screen

    def _selection(self) -> Selection | None:
        screen = self._acting_screen()
        return screen if isinstance(screen, Selection) else None

    def _selected_issue(self) -> str | None:
        sel = self._selection()
        return sel.selected_issue_id() if sel else None

    def _selected_approval(self) -> ApprovalRequest | None:
        sel = self._selection()
        return sel.selected_approval() if sel else None

    def _running_ids(self) -> set[str]:
        return {r.issue_id for r in self._snapshot.running} if self._snapshot else set()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if self._stopping and action != "quit":
            return False  # quitting or detaching: only a second quit (forcing it) still runs
        cmd = APP_BY_ACTION.get(action)
        if cmd is None or cmd.requires is None:
            return True
        if self._selection() is None:
            return False
        requires = cmd.requires
        if requires == "budget":
            issue = self._selected_issue()
            rows = self._snapshot.running if self._snapshot else ()
            return any(r.issue_id == issue and r.budget_reached for r in rows)
        if requires == "workspace":
            return self._workspace() is not None  # app_tools: a live or recovered one
        # Textual 8: False hides the key from the footer (None would show it dimmed, which
        # reads as an offer); what does not apply to the selected row is hidden
        if requires in ("issue", "running", "rerun"):
            issue = self._selected_issue()
            if issue is None:
                return False
            running = issue in self._running_ids()
            if requires == "running":
                return running
            if requires == "rerun":
                scope = getattr(self._acting_screen(), "CONSOLE_SCOPE", None)
                if scope in ("recovered", "worker"):
                    return False  # these screens own "r" (re-attach / rerun, with reasons)
                return not running
            return True
        # approval commands hide when nothing applies, keeping the footer short
        approval = self._selected_approval()
        if approval is None:
            return False
        if requires == "cancel":
            return ApprovalDecision.CANCEL in approval.available
        if requires == "question":
            return bool(approval.questions)
        if action == "grant":
            return bool(permission_choices(approval))
        if approval.questions:
            return requires == "decline"
        if requires == "accept":
            wanted = (
                ApprovalDecision.ACCEPT_FOR_SESSION
                if action == "approve_session"
                else ApprovalDecision.ACCEPT
            )
            return wanted in approval.available
        return bool({ApprovalDecision.DECLINE, ApprovalDecision.CANCEL} & set(approval.available))

    def on_key(self, event: events.Key) -> None:
        """A key that answers approvals, pressed where the selection has none while others
        wait: say where they are instead of doing nothing (the binding itself is disabled,
        so the key reaches here; text inputs consume their keys before)."""
        snapshot = self._snapshot
        if snapshot is None or not snapshot.approvals or self._screen_binds(event.key):
            return
        cmd = next(
            (
                c
                for c in APP_BY_ACTION.values()
                if c.requires in _ANSWER_REQUIRES
                and event.key in self._user_keymap.get(c.id, c.key).split(",")
            ),
            None,
        )
        if cmd is None or self.check_action(cmd.action_name, ()):
            return
        approval = self._selected_approval()
        issue = self._selected_issue()
        if approval is not None:
            what = "this request does not offer that"
        else:
            name = next((r.identifier for r in snapshot.issues if r.issue_id == issue), None)
            what = f"{name or 'the selection'} has nothing waiting for you"
        where = sorted({a.issue_identifier or a.issue_id for a in snapshot.approvals})
        self.notify(
            one_line(f"{what}; waiting: {', '.join(where)} (v opens the approvals)", 200),
            severity="warning",
            markup=False,
        )

    def _screen_binds(self, key: str) -> bool:
        """The active screen has its own command on ``key`` (the hosts screen's ``d``
        drains): that key is the screen's there, not an approval key."""
        scope = getattr(self.screen, "CONSOLE_SCOPE", None)
        if scope is None or scope == "app":
            return False
        return any(
            key in self._user_keymap.get(c.id, c.key).split(",") for c in commands_for(scope)
        )

    def key_for(self, cmd: ConsoleCommand) -> str:
        """The key(s) that run ``cmd`` now, after keymap remapping, for display."""
        return display_key(self._user_keymap.get(cmd.id, cmd.key))
