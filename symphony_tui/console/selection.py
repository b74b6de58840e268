"""What "the selected thing" means on each screen.

App-level commands (interrupt, approve, rerun...) act on the active screen's selection.
Each console screen implements :class:`Selection`; modal screens do not (App bindings do
not reach through a modal anyway).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from symphony_tui.domain import ApprovalRequest, Snapshot


@runtime_checkable
class Selection(Protocol):
    def selected_issue_id(self) -> str | None:
        """Issue id of the highlighted row, or ``None``."""
        ...

    def selected_approval(self) -> ApprovalRequest | None:
        """The approval a key like ``a`` would answer, or ``None``."""
        ...


def oldest_approval(snapshot: Snapshot, issue_id: str | None) -> ApprovalRequest | None:
    """The oldest pending approval of ``issue_id`` (creation time, then snapshot order)."""
    if issue_id is None:
        return None
    pending = [a for a in snapshot.approvals if a.issue_id == issue_id]
    if not pending:
        return None
    return min(
        enumerate(pending),
        key=lambda p: (p[1].created_at is None, p[1].created_at or 0, p[0]),
    )[1]


def approvals_oldest_first(snapshot: Snapshot) -> list[ApprovalRequest]:
    indexed = list(enumerate(snapshot.approvals))
    indexed.sort(key=lambda p: (p[1].created_at is None, p[1].created_at or 0, p[0]))
    return [a for _, a in indexed]
