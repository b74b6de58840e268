"""Which app commands apply to the acting screen's selection (the app's ``check_action``).

Commands that do not apply are hidden from the footer; an approval key pressed where
nothing waits says where approvals are waiting instead (registry ``requires``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.screen import ModalScreen

from symphony_tui.console.approval_text import permission_choices
from symphony_tui.console.fleet import is_fleet
from symphony_tui.console.registry import APP_BY_ACTION, commands_for
from symphony_tui.console.sanitize import one_line
from symphony_tui.console.selection import Selection
from symphony_tui.domain import ApprovalDecision

if TYPE_CHECKING:
    from textual.screen import Screen

    from symphony_tui.console.keymap import Keys
    from symphony_tui.console.state import ConsoleState
    from symphony_tui.domain import ApprovalRequest

# What the approval-answering commands need selected (registry ``requires``).
_ANSWER_REQUIRES = frozenset({"accept", "decline", "cancel", "question"})


def selected_issue(screen: Screen) -> str | None:
    """The issue id selected on ``screen`` (a :class:`Selection`), else ``None``."""
    return screen.selected_issue_id() if isinstance(screen, Selection) else None


def selected_approval(screen: Screen) -> ApprovalRequest | None:
    """The approval request selected on ``screen`` (a :class:`Selection`), else ``None``."""
    return screen.selected_approval() if isinstance(screen, Selection) else None


class Enablement:
    """Whether an app command applies, from ``state`` (snapshot, stopping) and the screen
    whose selection the commands act on; ``keys`` are the keys after the user's keymap."""

    def __init__(self, state: ConsoleState, keys: Keys) -> None:
        self._state = state
        self._keys = keys

    def allows(self, action: str, screen: Screen) -> bool:
        """True when app action ``action`` applies to ``screen``'s selection (always for
        actions that require nothing; never, but ``quit``, once the console is stopping)."""
        if self._state.stopping and action != "quit":
            return False  # quitting or detaching: only a second quit (forcing it) still runs
        cmd = APP_BY_ACTION.get(action)
        if cmd is not None and action != "quit" and isinstance(screen, ModalScreen):
            return False  # a dialog (help, a question) is open: its keys, not the console's
        if cmd is not None and cmd.fleet:
            return is_fleet(self._state.fleet_snapshot)
        if cmd is None or cmd.requires is None:
            return True
        if not isinstance(screen, Selection):
            return False
        requires = cmd.requires
        running_ids = self._state.running_ids
        if requires == "budget":
            row = self._state.running_row(screen.selected_issue_id())
            return row is not None and bool(row.budget_reached)
        if requires == "workspace":  # a live or recovered one
            return self._state.workspace_of(screen.selected_issue_id()) is not None
        # Textual 8: False hides the key from the footer (None would show it dimmed, which
        # reads as an offer); what does not apply to the selected row is hidden
        if requires in ("issue", "running", "rerun"):
            issue = screen.selected_issue_id()
            if issue is None:
                return False
            running = issue in running_ids()
            if requires == "running":
                return running
            if requires == "rerun":
                if getattr(screen, "CONSOLE_SCOPE", None) in ("recovered", "worker"):
                    return False  # these screens own "r" (re-attach / rerun, with reasons)
                return not running
            return True
        # approval commands hide when nothing applies, keeping the footer short
        approval = screen.selected_approval()
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

    def misplaced_approval_key(self, key: str, acting: Screen, active: Screen) -> str | None:
        """What to say when ``key`` answers approvals but ``acting``'s selection has none
        that it applies to while others wait (where they are); ``None`` when the key is not
        an approval key, applies, is ``active``'s own, or nothing waits."""
        snapshot = self._state.snapshot
        if snapshot is None or not snapshot.approvals or self._screen_binds(active, key):
            return None
        if isinstance(acting, ModalScreen):
            return None  # a dialog is open: the key is not meant for the console
        cmd = next(
            (
                c
                for c in APP_BY_ACTION.values()
                if c.requires in _ANSWER_REQUIRES and key in self._keys.of(c)
            ),
            None,
        )
        if cmd is None or self.allows(cmd.action_name, acting):
            return None
        approval = selected_approval(acting)
        issue = selected_issue(acting)
        if approval is not None:
            what = "this request does not offer that"
        else:
            name = next((r.identifier for r in snapshot.issues if r.issue_id == issue), None)
            what = f"{name or 'the selection'} has nothing waiting for you"
        # a fleet console's identifiers repeat across projects: each says its project
        where = sorted(
            {
                f"{a.project} {a.issue_identifier or a.issue_id}"
                if a.project
                else a.issue_identifier or a.issue_id
                for a in snapshot.approvals
            }
        )
        return one_line(f"{what}; waiting: {', '.join(where)} (v opens the approvals)", 200)

    def _screen_binds(self, screen: Screen, key: str) -> bool:
        """``screen`` has its own command on ``key`` (the hosts screen's ``d`` drains):
        that key is the screen's there, not an approval key."""
        scope = getattr(screen, "CONSOLE_SCOPE", None)
        if scope is None or scope == "app":
            return False
        return any(key in self._keys.of(c) for c in commands_for(scope))
