"""Answering approval requests: approve, deny, cancel the turn, grant permissions, answer
questions (approval shapes: docs/protocols.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual import work

from symphony_tui import domain
from symphony_tui.console.approval_text import asked, permission_choices
from symphony_tui.console.sanitize import inert
from symphony_tui.console.screens.modals import AskText, Choose
from symphony_tui.domain import ApprovalDecision

if TYPE_CHECKING:
    from symphony_tui.domain import ApprovalRequest


class ApprovalActionsMixin:
    """The actions on the selected approval request.

    A mixin of :class:`~symphony_tui.console.app.SymphonyApp` (it uses the App's API and
    the attributes set in ``SymphonyApp.__init__``); it never imports the app."""

    def action_approve(self) -> None:
        approval = self._selected_approval()
        if approval is not None:
            self.send(domain.Approve(approval_id=approval.id))

    def action_approve_session(self) -> None:
        approval = self._selected_approval()
        if approval is not None:
            self.send(domain.Approve(approval_id=approval.id, for_session=True))

    def action_deny(self) -> None:
        approval = self._selected_approval()
        if approval is not None:
            self.send(domain.Deny(approval_id=approval.id))

    def action_cancel_turn(self) -> None:
        approval = self._selected_approval()
        if approval is None or ApprovalDecision.CANCEL not in approval.available:
            return
        body = Text("Deny ", end="")
        body.append_text(
            inert(approval.summary or approval.command or approval.kind.value, "bold", limit=80)
        )
        body.append(" and end the turn of ")
        body.append_text(inert(approval.issue_identifier or approval.issue_id, "bold"))
        body.append("? The agent stops working on this turn.")
        command = domain.Deny(approval_id=approval.id, cancel=True)
        self.confirm_then("Cancel turn", body, command, "Deny and end turn", no="Keep the turn")

    @work(group="dialogs", exclusive=True, exit_on_error=False)
    async def action_grant(self) -> None:
        """Grant one part of a permissions request (or all of it), then pick the scope."""
        approval = self._selected_approval()
        parts = permission_choices(approval) if approval is not None else []
        if approval is None or not parts:
            return
        everything = "everything asked"
        body = Text("Grant which part of ", end="")
        body.append_text(inert(asked(approval, 60), "bold"))
        body.append("?")
        choices = [(label, None) for label, _ in parts] + [(everything, None)]
        picked = await self.push_screen_wait(Choose("Grant permissions", body, choices))
        if picked is None:
            return
        scopes = [("this turn", None), ("the rest of the session", None)]
        scope = await self.push_screen_wait(Choose("For how long", Text(picked), scopes))
        if scope is None:
            return
        grant = dict(parts).get(picked)  # None: everything asked
        self.send(
            domain.Approve(
                approval_id=approval.id, for_session=scope != "this turn", permissions=grant
            )
        )

    def action_deny_message(self) -> None:
        approval = self._selected_approval()
        if approval is None:
            return
        body = Text("Deny ", end="")
        body.append_text(
            inert(approval.summary or approval.command or approval.kind.value, limit=80)
        )
        body.append("\nwith this message to the agent:")

        def entered(message: str | None) -> None:
            if message is not None:
                self.send(domain.Deny(approval_id=approval.id, message=message))

        self.push_screen(AskText("Deny with a message", body, placeholder="reason"), entered)

    def action_answer(self) -> None:
        approval = self._selected_approval()
        if approval is not None and approval.questions:
            self._ask_questions(approval)

    @work(group="dialogs", exclusive=True, exit_on_error=False)
    async def _ask_questions(self, approval: ApprovalRequest) -> None:
        answers: dict[str, tuple[str, ...]] = {}
        for n, q in enumerate(approval.questions, 1):
            title = f"Question {n}/{len(approval.questions)}"
            body = inert(q.header, "bold") if q.header else Text("", end="")
            if q.question:
                if body.plain:
                    body.append("\n")
                body.append_text(inert(q.question, multiline=True))
            if q.options:
                choices = [(o.label, o.description) for o in q.options]
                value = await self.push_screen_wait(Choose(title, body, choices, allow_text=True))
            else:
                value = await self.push_screen_wait(AskText(title, body, placeholder="answer"))
            if value is None:
                self.notify("answer cancelled", severity="warning")
                return
            answers[q.id] = (value,)
        self.send(domain.Answer(approval_id=approval.id, answers=answers))
